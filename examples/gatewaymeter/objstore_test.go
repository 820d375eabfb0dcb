package gatewaymeter_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	gm "github.com/weirstream/weir/examples/gatewaymeter"
	"github.com/weirstream/weir/internal/objstore/azuretest"
	"github.com/weirstream/weir/internal/objstore/gcstest"
	"github.com/weirstream/weir/internal/objstore/s3test"
	"github.com/weirstream/weir/stream"
)

// objectStore is a store the GatewayMeter runs checkpoint to, reached
// through a proxy that can cut it off.
type objectStore struct {
	// endpoint is the store's address, http://host:port.
	endpoint string
	// dir is the URL of a fresh checkpoint directory in it.
	dir string
	// through returns the -D options that reach the store through the
	// proxy at proxyURL (http://host:port), and sets the environment
	// for it where the store's client reads that.
	through func(t *testing.T, proxyURL string) []string
}

// TestGatewayMeterS3 runs the job with its checkpoints in a real
// S3-compatible server (see package s3test; skipped without one) and
// diffs its outputs against both oracles, per seed. Each run meets two
// failures:
//
//   - an outage of the S3 server: once a checkpoint has completed, every
//     connection to it is cut and new ones are refused (at a TCP proxy
//     between the job and the server) until a checkpoint has failed, or
//     the job has failed over, for it;
//   - a tenant-cost subtask failing once a checkpoint has completed after
//     the outage, so that the job restores state it reads from S3.
//
// The test checks that the outage failed a checkpoint, that a restart
// restored a checkpoint from S3, and that the outputs are exact.
func TestGatewayMeterS3(t *testing.T) {
	srv := s3test.Env(t)
	testGatewayMeterObjectStore(t, "TestGatewayMeterS3", func(t *testing.T) objectStore {
		return objectStore{
			endpoint: srv.S3.Endpoint,
			dir:      srv.URL(srv.Prefix(t) + "checkpoints"),
			through: func(_ *testing.T, proxy string) []string {
				defines := srv.Defines()
				defines[0] = "s3.endpoint=" + proxy
				return defines
			},
		}
	})
}

// TestGatewayMeterGCS is TestGatewayMeterS3 on gs://, against a Cloud
// Storage server in the test's process (see package gcstest).
func TestGatewayMeterGCS(t *testing.T) {
	testGatewayMeterObjectStore(t, "TestGatewayMeterGCS", func(t *testing.T) objectStore {
		srv := gcstest.Start(t)
		return objectStore{
			endpoint: strings.TrimSuffix(srv.GCS.RootURL, "/"),
			dir:      srv.URL(srv.Prefix(t) + "checkpoints"),
			through: func(_ *testing.T, proxy string) []string {
				return []string{"gs.storage.root.url=" + proxy + "/"}
			},
		}
	})
}

// TestGatewayMeterAzure is TestGatewayMeterS3 on azblob://, against
// Azurite (see package azuretest; skipped without it).
func TestGatewayMeterAzure(t *testing.T) {
	azuretest.Env(t)
	testGatewayMeterObjectStore(t, "TestGatewayMeterAzure", func(t *testing.T) objectStore {
		srv := azuretest.Env(t)
		return objectStore{
			endpoint: "http://" + srv.Endpoint,
			dir:      srv.URL(srv.Prefix(t) + "checkpoints"),
			through: func(t *testing.T, proxy string) []string {
				t.Setenv("AZURE_STORAGE_DOMAIN", strings.TrimPrefix(proxy, "http://"))
				return nil
			},
		}
	})
}

func testGatewayMeterObjectStore(t *testing.T, name string, open func(t *testing.T) objectStore) {
	seeds := testSeeds(t, []uint64{1, 2}, 0)
	for _, seed := range seeds {
		t.Run(fmt.Sprint("seed=", seed), func(t *testing.T) {
			r := rand.New(rand.NewPCG(seed, 11))
			pick := func(vs ...int) int { return vs[r.IntN(len(vs))] }
			cfg := gm.DefaultGenConfig()
			cfg.Seed = seed
			cfg.Requests = int64(pick(2000, 3000))
			cfg.Partitions = pick(3, 8)
			cfg.Tenants = pick(5, 20)
			cfg.BadRate = 0.002
			parallelism := pick(2, 3)
			trace, out := t.TempDir(), t.TempDir()
			m, err := gm.GenerateFiles(cfg, trace)
			if err != nil {
				t.Fatal(err)
			}
			var lines int64
			for _, p := range m.Partitions {
				lines += p.Lines
			}
			st := open(t)
			px := newCutProxy(t, st.endpoint)
			o := &outage{
				proxy: px,
				// The sources read for about 3 s, in batches of 64, so
				// that checkpoints complete before and after the outage,
				// which begins a sixth of the way in.
				pace:  3 * time.Second * time.Duration(64*parallelism) / time.Duration(lines),
				after: lines / int64(6*parallelism),
			}
			dir := st.dir
			defines := st.through(t, px.url())
			t.Logf("%s\ntrace %+v, parallelism %d, checkpoints in %s", reproduce(name, seed), cfg, parallelism, dir)
			runJobWith(t, trace, out, []stream.Option{stream.WithFaults(o.fn), stream.WithEvents(o.event)},
				append(defines, fmt.Sprint("parallelism.default=", parallelism), "execution.checkpointing.interval=50 ms",
					"execution.checkpointing.dir="+dir)...)
			t.Log(o.report())
			check(t, trace, out)

			o.mu.Lock()
			defer o.mu.Unlock()
			if !o.over {
				t.Fatalf("%s\nthe outage never began or never failed a checkpoint: %s", reproduce(name, seed), o.report())
			}
			if !slices.ContainsFunc(o.restoredFrom, func(p string) bool { return strings.HasPrefix(p, dir+"/") }) {
				t.Fatalf("%s\nno restart restored a checkpoint from %s: %s (from %q)", reproduce(name, seed), dir, o.report(), o.restoredFrom)
			}
		})
	}
}

// outage paces the sources, cuts the proxy once the sources have read
// after records and a checkpoint has completed, restores it when a
// checkpoint fails or the job fails over, and then fails a tenant-cost
// subtask once, after a checkpoint completed.
type outage struct {
	proxy *cutProxy
	pace  time.Duration
	after int64

	mu        sync.Mutex
	completed bool    // a checkpoint completed before the outage
	cut       bool    // the outage began
	over      bool    // the outage failed a checkpoint or the job, and ended
	after2    bool    // a checkpoint completed after the outage
	struck    bool    // the tenant-cost failure struck
	restored  []int64 // the checkpoint each restart restored, 0 for none
	// restoredFrom are the paths of the restored checkpoints.
	restoredFrom []string
	log          []string
}

func (o *outage) fn(_ context.Context, site stream.FaultSite) error {
	if site.Point != stream.FaultBatch {
		return nil
	}
	if site.Task.Vertex == gm.UIDSource {
		time.Sleep(o.pace)
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if site.Task.Vertex == gm.UIDSource && site.Records >= o.after && o.completed && !o.cut {
		o.cut = true
		o.log = append(o.log, fmt.Sprintf("store cut after %s[%d] read %d records", site.Task.Vertex, site.Task.Subtask, site.Records))
		o.proxy.setDown(true)
	}
	if site.Task.Vertex == gm.UIDTenantCost && o.after2 && !o.struck {
		o.struck = true
		o.log = append(o.log, fmt.Sprintf("%s[%d] failed after %d records", site.Task.Vertex, site.Task.Subtask, site.Records))
		return errors.New("injected failure")
	}
	return nil
}

func (o *outage) event(e stream.JobEvent) {
	o.mu.Lock()
	defer o.mu.Unlock()
	switch e.Kind {
	case stream.EventCheckpointCompleted:
		o.completed = true
		o.after2 = o.after2 || o.over
	case stream.EventCheckpointFailed, stream.EventRestarting:
		if o.cut && !o.over {
			o.over = true
			o.log = append(o.log, fmt.Sprintf("%s in the outage (checkpoint %d: %s); store back", e.Kind, e.Checkpoint, e.Message))
			o.proxy.setDown(false)
		}
	case stream.EventRestored:
		o.restored = append(o.restored, e.Checkpoint)
		o.restoredFrom = append(o.restoredFrom, e.Message)
	}
}

func (o *outage) report() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return fmt.Sprintf("%v; restored checkpoints %v", o.log, o.restored)
}

// cutProxy forwards TCP connections to an S3 server until it is set
// down: then it closes every open connection and refuses new ones, as a
// server that went away would.
type cutProxy struct {
	ln     net.Listener
	target string

	mu    sync.Mutex
	down  bool
	conns map[net.Conn]bool
}

func newCutProxy(t *testing.T, endpoint string) *cutProxy {
	t.Helper()
	target := endpoint
	for _, p := range []string{"http://", "https://"} {
		target = strings.TrimPrefix(target, p)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &cutProxy{ln: ln, target: target, conns: map[net.Conn]bool{}}
	done := make(chan struct{})
	go func() {
		defer close(done)
		p.serve()
	}()
	t.Cleanup(func() {
		ln.Close()
		p.setDown(true)
		<-done
	})
	return p
}

func (p *cutProxy) url() string { return "http://" + p.ln.Addr().String() }

func (p *cutProxy) serve() {
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		if p.down {
			p.mu.Unlock()
			c.Close()
			continue
		}
		p.conns[c] = true
		p.mu.Unlock()
		wg.Add(1)
		go func() {
			defer wg.Done()
			p.forward(c)
		}()
	}
}

func (p *cutProxy) forward(c net.Conn) {
	defer func() {
		p.mu.Lock()
		delete(p.conns, c)
		p.mu.Unlock()
		c.Close()
	}()
	s, err := net.Dial("tcp", p.target)
	if err != nil {
		return
	}
	p.mu.Lock()
	if p.down {
		p.mu.Unlock()
		s.Close()
		return
	}
	p.conns[s] = true
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		delete(p.conns, s)
		p.mu.Unlock()
		s.Close()
	}()
	errc := make(chan error, 2)
	go func() { _, err := io.Copy(s, c); errc <- err }()
	go func() { _, err := io.Copy(c, s); errc <- err }()
	<-errc
	c.Close()
	s.Close()
	<-errc
}

// setDown cuts (true) or restores (false) the connection to the server.
func (p *cutProxy) setDown(down bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.down = down
	if down {
		for c := range p.conns {
			c.Close()
		}
	}
}
