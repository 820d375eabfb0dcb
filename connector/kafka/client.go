package kafka

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl"
)

// ClientOption configures how a source, a sink or ReadCommitted connects
// to Kafka. Every ClientOption is both a SourceOption and a SinkOption.
type ClientOption struct{ f func(*clientConfig) }

func (o ClientOption) applySource(c *sourceConfig) { o.f(&c.client) }
func (o ClientOption) applySink(c *sinkConfig)     { o.f(&c.client) }

// clientConfig is what every franz-go client of this package is built
// from.
type clientConfig struct {
	brokers []string
	tls     *tls.Config
	sasl    []sasl.Mechanism
	timeout time.Duration
	extra   []kgo.Opt
}

const defaultRequestTimeout = 30 * time.Second

func defaultClientConfig() clientConfig { return clientConfig{timeout: defaultRequestTimeout} }

// BootstrapServers sets the brokers to bootstrap from, as host:port
// (Flink's setBootstrapServers, Kafka's bootstrap.servers). Each address
// may also be a comma-separated list. Required.
func BootstrapServers(addrs ...string) ClientOption {
	return ClientOption{func(c *clientConfig) {
		for _, a := range addrs {
			for s := range strings.SplitSeq(a, ",") {
				if s = strings.TrimSpace(s); s != "" {
					c.brokers = append(c.brokers, s)
				}
			}
		}
	}}
}

// TLS connects to the brokers over TLS with the given configuration
// (Kafka's security.protocol SSL or SASL_SSL). Default: plaintext.
func TLS(cfg *tls.Config) ClientOption {
	return ClientOption{func(c *clientConfig) { c.tls = cfg }}
}

// SASL authenticates with the first of the given mechanisms that the
// brokers support (see franz-go's pkg/sasl/plain, scram, oauth, aws).
// Default: no authentication.
func SASL(mechanisms ...sasl.Mechanism) ClientOption {
	return ClientOption{func(c *clientConfig) { c.sasl = append(c.sasl, mechanisms...) }}
}

// RequestTimeout bounds how long a request that does not belong to the
// data path waits for the brokers: listing partitions and offsets when a
// source starts, checking the topic when a sink writer starts, committing
// offsets and transactions, aborting lingering transactions. When it
// expires the operation fails with an error that names the brokers, and
// the job's restart strategy decides what happens next. Default 30s.
func RequestTimeout(d time.Duration) ClientOption {
	return ClientOption{func(c *clientConfig) { c.timeout = d }}
}

// ClientOptions passes options to every franz-go client the source, sink
// or ReadCommitted creates, after the package's own, so they take
// precedence. Options that the connector relies on must not be changed:
// ConsumePartitions, FetchIsolationLevel and KeepControlRecords on a
// source; TransactionalID and TransactionTimeout on an exactly-once sink
// (use TransactionalIDPrefix and TransactionTimeout instead).
func ClientOptions(opts ...kgo.Opt) ClientOption {
	return ClientOption{func(c *clientConfig) { c.extra = append(c.extra, opts...) }}
}

func (c clientConfig) validate() error {
	switch {
	case len(c.brokers) == 0:
		return errors.New("kafka: no bootstrap servers (BootstrapServers)")
	case c.timeout <= 0:
		return fmt.Errorf("kafka: request timeout must be positive, got %v", c.timeout)
	}
	return nil
}

// client is a franz-go client that remembers why it last failed to
// connect, so that a request that times out can say so.
type client struct {
	*kgo.Client
	cfg  clientConfig
	dial *dialErrors
}

// newClient creates a franz-go client from c and the given options.
func (c clientConfig) newClient(opts ...kgo.Opt) (*client, error) {
	d := &dialErrors{}
	// A connection the broker closes right after a request is retried
	// like any other dropped connection: franz-go takes one closed before
	// its first response for a client missing TLS or SASL and fails the
	// request at once, but a broker that restarts or a network that blips
	// closes fresh connections too, and a sink committing a checkpoint's
	// transactions on a new client meets it first. A misconfigured client
	// then fails once the request timeout passes, with the broker's
	// closing as the last connection error.
	all := []kgo.Opt{kgo.SeedBrokers(c.brokers...), kgo.WithHooks(d), kgo.AlwaysRetryEOF()}
	if c.tls != nil {
		all = append(all, kgo.DialTLSConfig(c.tls))
	}
	if len(c.sasl) > 0 {
		all = append(all, kgo.SASL(c.sasl...))
	}
	all = append(all, opts...)
	all = append(all, c.extra...)
	cl, err := kgo.NewClient(all...)
	if err != nil {
		return nil, fmt.Errorf("kafka: creating a client for %s: %w", c.brokerList(), err)
	}
	return &client{Client: cl, cfg: c, dial: d}, nil
}

func (c clientConfig) brokerList() string { return strings.Join(c.brokers, ",") }

// withTimeout bounds ctx by the request timeout.
func (c *client) withTimeout(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, c.cfg.timeout)
}

// describe turns err from a request that did what into an error that names
// the brokers; if the request timed out it says so and adds the last
// connection failure.
func (c *client) describe(err error, what string) error {
	if errors.Is(err, context.DeadlineExceeded) {
		msg := fmt.Sprintf("kafka: %s: brokers %s did not answer within %v", what, c.cfg.brokerList(), c.cfg.timeout)
		if last := c.dial.last(); last != nil {
			msg += fmt.Sprintf(" (last connection error: %v)", last)
		}
		return fmt.Errorf("%s: %w", msg, err)
	}
	return fmt.Errorf("kafka: %s (brokers %s): %w", what, c.cfg.brokerList(), err)
}

// dialErrors is a franz-go hook that keeps the last connection error: a
// dial that failed, or a connection that failed while reading a response.
type dialErrors struct {
	mu  sync.Mutex
	err error
}

// OnBrokerRead implements kgo.HookBrokerRead.
func (d *dialErrors) OnBrokerRead(meta kgo.BrokerMetadata, key int16, _ int, _, _ time.Duration, err error) {
	if err == nil || errors.Is(err, context.Canceled) || errors.Is(err, kgo.ErrClientClosed) {
		return
	}
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		err = fmt.Errorf("the broker closed the connection (a broker that wants TLS or SASL closes a client's that has neither): %w", err)
	}
	d.mu.Lock()
	d.err = fmt.Errorf("%s: reading a %s response: %w", net.JoinHostPort(meta.Host, fmt.Sprint(meta.Port)), kmsg.NameForKey(key), err)
	d.mu.Unlock()
}

// OnBrokerConnect implements kgo.HookBrokerConnect.
func (d *dialErrors) OnBrokerConnect(meta kgo.BrokerMetadata, _ time.Duration, _ net.Conn, err error) {
	if err == nil {
		return
	}
	d.mu.Lock()
	d.err = fmt.Errorf("%s: %w", net.JoinHostPort(meta.Host, fmt.Sprint(meta.Port)), err)
	d.mu.Unlock()
}

func (d *dialErrors) last() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.err
}
