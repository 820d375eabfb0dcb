// Package kafkatest connects integration tests to a real Apache Kafka broker.
//
// A test that needs Kafka calls Brokers, which reads the broker addresses
// from the environment variable WEIR_KAFKA_BROKERS (comma-separated
// host:port). When the variable is unset or empty, Brokers skips the test:
// the Kafka integration suite runs only where the variable is set, and a plain
// `go test ./...` on a machine without a broker passes. CI sets it: .ci/run
// starts a single-node KRaft broker with .ci/kafka/start.sh and exports
// WEIR_KAFKA_BROKERS=127.0.0.1:19092. CI also sets WEIR_KAFKA_REQUIRED=1,
// which turns the skip into a failure, so that a broker that should be there
// but is not fails the run instead of silently skipping the suite.
//
// To run the suite by hand:
//
//	.ci/kafka/start.sh /tmp/weir-kafka        # prints KAFKA_BROKERS=127.0.0.1:19092 last
//	WEIR_KAFKA_BROKERS=127.0.0.1:19092 go test -race ./...
//	.ci/kafka/stop.sh /tmp/weir-kafka
//
// Every test of every package shares that one broker, and topics outlive a
// run unless deleted, so each test uses names of its own: CreateTopic makes a
// topic with a unique name and deletes it when the test ends, and UniqueName
// makes names for transactional IDs and consumer groups.
package kafkatest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

// EnvBrokers names the environment variable holding the brokers'
// comma-separated addresses.
const EnvBrokers = "WEIR_KAFKA_BROKERS"

// EnvRequired names the environment variable that, when non-empty, makes
// Brokers fail the test instead of skipping it if EnvBrokers is unset.
const EnvRequired = "WEIR_KAFKA_REQUIRED"

// Brokers returns the addresses in WEIR_KAFKA_BROKERS. If the variable is
// unset or holds no address, it skips t (or fails it, when
// WEIR_KAFKA_REQUIRED is set).
func Brokers(t testing.TB) []string {
	t.Helper()
	var brokers []string
	for _, b := range strings.Split(os.Getenv(EnvBrokers), ",") {
		if b = strings.TrimSpace(b); b != "" {
			brokers = append(brokers, b)
		}
	}
	if len(brokers) == 0 {
		if os.Getenv(EnvRequired) != "" {
			t.Fatalf("%s is set but %s is not: the Kafka broker that should run for these tests is missing", EnvRequired, EnvBrokers)
		}
		t.Skipf("Kafka integration test: set %s=host:port,... to run it (CI starts a broker with .ci/kafka/start.sh and sets it)", EnvBrokers)
	}
	return brokers
}

// Client returns a franz-go client for the brokers in WEIR_KAFKA_BROKERS,
// with opts added, and closes it when the test ends. It skips t as Brokers
// does.
func Client(t testing.TB, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	all := append([]kgo.Opt{kgo.SeedBrokers(Brokers(t)...)}, opts...)
	cl, err := kgo.NewClient(all...)
	if err != nil {
		t.Fatalf("kafkatest: new client: %v", err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// BrokersOrFake returns the addresses in WEIR_KAFKA_BROKERS if it is set,
// else those of an in-process kfake cluster (franz-go's fake broker, over
// TCP, so other processes reach it too) that lives until the test ends:
// for tests that run on a plain `go test` and on the real broker in CI.
func BrokersOrFake(t testing.TB) []string {
	t.Helper()
	if os.Getenv(EnvBrokers) != "" {
		return Brokers(t)
	}
	c, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		t.Fatalf("kafkatest: starting kfake: %v", err)
	}
	t.Cleanup(c.Close)
	return c.ListenAddrs()
}

// UniqueName returns prefix, the test's name and a random suffix, made safe
// for a Kafka topic, transactional ID or group name (letters, digits, '.', '_'
// and '-', at most 200 characters).
func UniqueName(t testing.TB, prefix string) string {
	t.Helper()
	var b [6]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatalf("kafkatest: random name: %v", err)
	}
	name := []byte(prefix + "-" + t.Name())
	for i, c := range name {
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '.', c == '_', c == '-':
		default:
			name[i] = '_'
		}
	}
	if len(name) > 186 {
		name = name[:186]
	}
	return string(name) + "-" + hex.EncodeToString(b[:])
}

// CreateTopic creates a topic with a unique name, the given number of
// partitions and replication factor 1, waits until the broker knows it, and
// deletes it when the test ends. It returns the topic's name.
//
// The topic has retention.ms -1, which turns off time-based retention. Tests
// stamp records with event times such as 1 s after the Unix epoch; the broker
// measures a record's age from its timestamp (message.timestamp.type
// CreateTime), and every log.retention.check.interval.ms (5 minutes by
// default) it deletes the segments whose newest record is older than
// retention.ms (7 days by default), rolling the active segment first. A check
// that ran between a test's writes and its reads would delete records, those
// of a committed transaction among them if its marker was not in the segment
// yet, and the test would read too few.
func CreateTopic(t testing.TB, partitions int32) string {
	t.Helper()
	adm := kadm.NewClient(Client(t))
	topic := UniqueName(t, "topic")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	forever := "-1"
	configs := map[string]*string{"retention.ms": &forever}
	if _, err := adm.CreateTopic(ctx, partitions, 1, configs, topic); err != nil {
		t.Fatalf("kafkatest: create topic %s with %d partitions: %v", topic, partitions, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if _, err := adm.DeleteTopic(ctx, topic); err != nil {
			t.Logf("kafkatest: delete topic %s: %v", topic, err)
		}
	})
	// CreateTopics returns once the controller has the topic; wait until the
	// broker serves metadata for all of its partitions with a leader.
	for {
		details, err := adm.ListTopics(ctx, topic)
		if err == nil {
			d := details[topic]
			ready := d.Err == nil && len(d.Partitions) == int(partitions)
			for _, p := range d.Partitions {
				ready = ready && p.Err == nil && p.Leader >= 0
			}
			if ready {
				return topic
			}
		}
		select {
		case <-ctx.Done():
			t.Fatalf("kafkatest: topic %s has no leaders for its %d partitions after 30s (last error %v)", topic, partitions, err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}
