package kafka_test

import (
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
)

var blipSeeds = flag.Int("kafka.blip-seeds", 2, "seeds of TestJobKafkaToKafkaBrokerBlips")

// blipKeys are the requests a blipping broker drops: what the job's
// source (fetches, offsets, its group's commits) and its exactly-once
// sink (producer ids, transactions, produces, commits and aborts) send.
var blipKeys = []kmsg.Key{
	kmsg.Fetch, kmsg.ListOffsets, kmsg.Metadata, kmsg.FindCoordinator,
	kmsg.OffsetCommit, kmsg.OffsetFetch, kmsg.InitProducerID, kmsg.Produce,
	kmsg.AddPartitionsToTxn, kmsg.AddOffsetsToTxn, kmsg.TxnOffsetCommit, kmsg.EndTxn,
}

// TestJobKafkaToKafkaBrokerBlips is TestJobKafkaToKafkaExactlyOnce on a
// broker that blips: now and then it closes a client's connection
// instead of answering a request (as a broker restart or a network
// blip does), for every kind of request the source and the sink send,
// transaction commits and aborts among them. The clients reconnect and
// retry; the committed balances must still be each payment's exactly
// once, through the two failures of the source that the job suffers
// besides. The seed draws which requests are dropped (of each kind, once
// the sink has committed two transactions, one among its next six, then
// one in every 4 to 20); fetches, produces and the transactions'
// requests must have been dropped, or the test proves nothing.
func TestJobKafkaToKafkaBrokerBlips(t *testing.T) {
	for seed := range uint64(*blipSeeds) {
		t.Run(fmt.Sprintf("seed=%d", seed+1), func(t *testing.T) { brokerBlips(t, seed+1) })
	}
}

func brokerBlips(t *testing.T, seed uint64) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(4, "payments", "balances"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	var (
		mu      sync.Mutex
		r       = rand.New(rand.NewPCG(seed, 0xb119))
		dropped = map[string]int{}
		seen    = map[string]int{}
		// off: the job has ended, and the test's own clients read
		// its output.
		off bool
	)
	for _, key := range blipKeys {
		// Each kind of request counts down to its next drop: the first
		// within its first six requests once the sink has committed a
		// transaction (so that the job's first checkpoint completes and
		// its failures strike while it reads), the next 4 to 20 later.
		next := 1 + r.IntN(6)
		c.ControlKey(int16(key), func(kmsg.Request) (kmsg.Response, error, bool) {
			c.KeepControl()
			mu.Lock()
			defer mu.Unlock()
			seen[key.Name()]++
			if off {
				return nil, nil, false
			}
			if seen[kmsg.EndTxn.Name()] < 2 && key != kmsg.EndTxn || seen[kmsg.EndTxn.Name()] <= 2 && key == kmsg.EndTxn {
				return nil, nil, false
			}
			if next--; next > 0 {
				return nil, nil, false
			}
			next = 4 + r.IntN(17)
			dropped[key.Name()]++
			return nil, errors.New("blip"), true
		})
	}
	// More payments than the other runs of the job: a dropped request
	// is retried after a backoff, and the job must run long enough for
	// checkpoints to complete around the failures.
	balancesJob(t, c.ListenAddrs(), "payments", "balances", "balances-job", balancesRun{perPartition: 3000, ran: func() {
		mu.Lock()
		off = true
		mu.Unlock()
	}})
	mu.Lock()
	defer mu.Unlock()
	t.Logf("seed %d: requests dropped: %v, of %v", seed, dropped, seen)
	for _, key := range []kmsg.Key{kmsg.Fetch, kmsg.Produce, kmsg.EndTxn, kmsg.InitProducerID} {
		if dropped[key.Name()] == 0 {
			t.Fatalf("seed %d: no %v request was dropped: the test proves nothing (dropped: %v)", seed, key, dropped)
		}
	}
}
