package clustercli

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net/http"
	"regexp"
	"sync"
	"testing"
	"time"

	"github.com/weirstream/weir/config"
	"github.com/weirstream/weir/internal/cluster"
	"github.com/weirstream/weir/internal/ha/kubefake"
)

// syncBuffer is a job manager's stderr, read while it writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// waitFor waits for re in out and returns its first group.
func waitFor(t *testing.T, out *syncBuffer, re *regexp.Regexp) string {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if m := re.FindStringSubmatch(out.String()); m != nil {
			return m[1]
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("no %s in:\n%s", re, out.String())
	return ""
}

var (
	advertisedRE = regexp.MustCompile(`advertised as (\S+)\)`)
	restRE       = regexp.MustCompile(`msg="REST API listening" addr=(\S+)`)
)

// Two job managers with high-availability.type kubernetes on one
// Kubernetes API (kubefake): the first leads and publishes its advertised
// RPC and REST addresses (rest.address with the REST port) in the Lease;
// the standby's REST API redirects there; stopped, the leader resigns
// and the standby takes over at a greater epoch and serves REST itself.
func TestKubernetesJobManagersTakeOver(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cli := kubefake.New()
	kctx := withKubeClient(ctx, cli, "weir")
	cfg, err := config.ParseDynamic([]string{
		config.KeyHAType + "=kubernetes", config.KeyKubernetesClusterID + "=jm-test",
		config.KeyHAKubernetesLeaseDuration + "=1 s", config.KeyHAKubernetesRenewDeadline + "=1 s", config.KeyHAKubernetesRetryPeriod + "=200 ms",
		config.KeyRESTPort + "=0", config.KeyRESTBindAddress + "=127.0.0.1", config.KeyRESTAddress + "=localhost",
	})
	if err != nil {
		t.Fatal(err)
	}
	noJobs := func(*slog.Logger) cluster.Jobs { return nil }
	type jm struct {
		cancel context.CancelFunc
		out    *syncBuffer
		exited chan int
		done   chan error
	}
	start := func() *jm {
		c, stop := context.WithCancel(kctx)
		j := &jm{cancel: stop, out: &syncBuffer{}, exited: make(chan int, 1), done: make(chan error, 1)}
		go func() {
			j.done <- runJobManager(c, "weir", j.out, "127.0.0.1:0", "", cfg, noJobs, func(code int) { j.exited <- code })
		}()
		return j
	}
	watcher, err := openHA(kctx, cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer watcher.Close()
	leaders := watcher.WatchLeader(ctx)

	a := start()
	first := <-leaders
	aRPC, aREST := waitFor(t, a.out, advertisedRE), waitFor(t, a.out, restRE)
	wantREST := "localhost:" + aREST[len("127.0.0.1:"):]
	if first.Addr != aRPC || first.RESTAddr != wantREST {
		t.Fatalf("leader %+v; want %s and REST %s (rest.address with the port of %s)", first, aRPC, wantREST, aREST)
	}
	b := start()
	bRPC, bREST := waitFor(t, b.out, advertisedRE), waitFor(t, b.out, restRE)
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := noRedirect.Get("http://" + bREST + "/jobs/overview")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if loc := resp.Header.Get("Location"); resp.StatusCode != http.StatusTemporaryRedirect || loc != "http://"+wantREST+"/jobs/overview" {
		t.Errorf("the standby's REST API answered %d, Location %q; want a redirect to the leader's %s", resp.StatusCode, loc, wantREST)
	}

	a.cancel()
	if code := <-a.exited; code != 0 {
		t.Errorf("the stopped leader exited %d, want 0", code)
	}
	next := <-leaders
	if next.Addr != bRPC || next.Epoch <= first.Epoch {
		t.Fatalf("after the leader stopped: %+v; want %s above epoch %d", next, bRPC, first.Epoch)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := noRedirect.Get("http://" + bREST + "/jobs/overview")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the new leader's REST API still answers %v, %v", resp, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	b.cancel()
	<-b.exited
	for _, j := range []*jm{a, b} {
		if err := <-j.done; err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("runJobManager: %v", err)
		}
	}
}

// A highly available job manager listening on every interface must be
// told what to advertise, for RPC (--advertise) and for REST
// (rest.address).
func TestWildcardListenNeedsAdvertisedAddress(t *testing.T) {
	if _, err := advertisedREST("0.0.0.0:8081", ""); err == nil {
		t.Error("a wildcard REST address was published")
	}
	if got, err := advertisedREST("0.0.0.0:8081", "10.1.2.3"); err != nil || got != "10.1.2.3:8081" {
		t.Errorf("advertisedREST = %q, %v", got, err)
	}
	cfg, err := config.ParseDynamic([]string{config.KeyHAType + "=kubernetes", config.KeyRESTPort + "=0", config.KeyClusterAuthToken + "=secret"})
	if err != nil {
		t.Fatal(err)
	}
	ctx := withKubeClient(context.Background(), kubefake.New(), "weir")
	err = runJobManager(ctx, "weir", &syncBuffer{}, "0.0.0.0:0", "", cfg, func(*slog.Logger) cluster.Jobs { return nil }, func(int) {})
	if err == nil || !regexp.MustCompile(`--advertise`).MatchString(err.Error()) {
		t.Errorf("job manager on 0.0.0.0 without --advertise: %v", err)
	}
}
