package ha_test

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"

	"github.com/weirstream/weir/internal/ha"
	"github.com/weirstream/weir/internal/ha/kubefake"
)

// A backend is one implementation of ha.Services. store makes a new,
// empty store and returns how to connect to it: each call is a process of
// its own (a client of its own), with high-availability.storageDir dir
// ("" for none).
type backend struct {
	name  string
	store func(t *testing.T) (connect func(t *testing.T, dir string) ha.Services)
}

// backends are the implementations every test of this file runs against:
// etcd (an embedded server), and Kubernetes on kubefake (client-go's fake
// API with the API server's optimistic concurrency). Each is held to the
// same contract.
func backends() []backend {
	return []backend{
		{"etcd", func(t *testing.T) func(*testing.T, string) ha.Services {
			s := startEtcd(t)
			return func(t *testing.T, dir string) ha.Services {
				var opts []ha.EtcdOption
				if dir != "" {
					opts = append(opts, ha.WithStorageDir(dir))
				}
				return connect(t, s, opts...)
			}
		}},
		{"kubernetes", func(t *testing.T) func(*testing.T, string) ha.Services {
			cli := kubefake.New()
			return func(t *testing.T, dir string) ha.Services { return connectKube(t, cli, dir) }
		}},
	}
}

func startEtcd(t *testing.T) *ha.Server {
	t.Helper()
	s, err := ha.StartServer(t.TempDir(), "127.0.0.1:0", "127.0.0.1:0", ha.ServerLogLevel("panic"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

func connect(t *testing.T, s *ha.Server, opts ...ha.EtcdOption) *ha.Etcd {
	t.Helper()
	e, err := ha.NewEtcd([]string{s.Endpoint}, append([]ha.EtcdOption{ha.WithLeaseTTL(time.Second)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	return e
}

// connectKube connects to the API behind cli with a 1 s lease, renewed
// every 200 ms.
func connectKube(t *testing.T, cli kubernetes.Interface, dir string) *ha.Kubernetes {
	t.Helper()
	k, err := ha.NewKubernetes(cli, "weir", ha.WithKubernetesClusterID("test"),
		ha.WithLeaseDuration(time.Second), ha.WithRenewDeadline(time.Second), ha.WithRetryPeriod(200*time.Millisecond),
		ha.WithKubernetesStorageDir(dir))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { k.Close() })
	return k
}

func each(t *testing.T, test func(t *testing.T, connect func(t *testing.T, dir string) ha.Services)) {
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) { test(t, b.store(t)) })
	}
}

// A standby wins when the leader resigns; the deposed leader's writes
// fail from then on, and the new leader's epoch is greater. The jobs, the
// latest checkpoint and the reserved ids survive the takeover; a
// checkpoint older than the recorded one is refused.
func TestElectionFencesDeposedLeader(t *testing.T) {
	each(t, func(t *testing.T, connect func(*testing.T, string) ha.Services) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		a, b := connect(t, ""), connect(t, "")
		if _, ok, err := b.Leader(ctx); err != nil || ok {
			t.Fatalf("Leader() before any campaign: %v, %v; want none", ok, err)
		}
		la, err := a.Campaign(ctx, ha.LeaderInfo{Addr: "a:1"})
		if err != nil {
			t.Fatal(err)
		}
		if info, ok, err := b.Leader(ctx); err != nil || !ok || info.Addr != "a:1" || info.Epoch != la.Epoch() {
			t.Fatalf("Leader() = %+v, %v, %v; want a:1 at epoch %d", info, ok, err, la.Epoch())
		}
		if err := la.Jobs().Put(ctx, "j1", []byte("job one")); err != nil {
			t.Fatal(err)
		}
		if err := la.Checkpoints().Put(ctx, "j1", ha.CompletedCheckpoint{ID: 3, Path: "/cp/j1/chk-3"}); err != nil {
			t.Fatal(err)
		}
		if err := la.Checkpoints().Reserve(ctx, "j1", 1000); err != nil {
			t.Fatal(err)
		}
		won := make(chan ha.Leadership, 1)
		go func() {
			lb, err := b.Campaign(ctx, ha.LeaderInfo{Addr: "b:1"})
			if err != nil {
				t.Error(err)
			}
			won <- lb
		}()
		select {
		case <-won:
			t.Fatal("the standby won while the leader held")
		case <-time.After(200 * time.Millisecond):
		}
		if err := la.Resign(ctx); err != nil {
			t.Fatal(err)
		}
		lb := <-won
		if lb == nil {
			t.FailNow()
		}
		if lb.Epoch() <= la.Epoch() {
			t.Errorf("new epoch %d is not above the old %d", lb.Epoch(), la.Epoch())
		}
		if err := la.Checkpoints().Put(ctx, "j1", ha.CompletedCheckpoint{ID: 4, Path: "/cp/j1/chk-4"}); !errors.Is(err, ha.ErrNotLeader) {
			t.Errorf("deposed leader's checkpoint write: %v, want ErrNotLeader", err)
		}
		if err := la.Checkpoints().Reserve(ctx, "j1", 2000); !errors.Is(err, ha.ErrNotLeader) {
			t.Errorf("deposed leader's id reservation: %v, want ErrNotLeader", err)
		}
		if n, err := lb.Checkpoints().Reserved(ctx, "j1"); err != nil || n != 1000 {
			t.Errorf("reserved ids after takeover: %d, %v; want the old leader's 1000", n, err)
		}
		if err := la.Jobs().Put(ctx, "j2", []byte("x")); !errors.Is(err, ha.ErrNotLeader) {
			t.Errorf("deposed leader's job write: %v, want ErrNotLeader", err)
		}
		jobs, err := lb.Jobs().List(ctx)
		if err != nil || len(jobs) != 1 || string(jobs["j1"]) != "job one" {
			t.Errorf("jobs after takeover: %q, %v", jobs, err)
		}
		cp, ok, err := lb.Checkpoints().Latest(ctx, "j1")
		if err != nil || !ok || cp.ID != 3 || cp.Path != "/cp/j1/chk-3" {
			t.Errorf("latest checkpoint after takeover: %+v %v %v", cp, ok, err)
		}
		if err := lb.Checkpoints().Put(ctx, "j1", ha.CompletedCheckpoint{ID: 2}); err == nil {
			t.Errorf("an older checkpoint replaced checkpoint 3")
		}
		if err := lb.Checkpoints().Put(ctx, "j1", ha.CompletedCheckpoint{ID: 5, Path: "/cp/j1/chk-5"}); err != nil {
			t.Errorf("the new leader's checkpoint 5: %v", err)
		}
		if cp, _, err := b.(interface {
			LatestCheckpoint(context.Context, string) (ha.CompletedCheckpoint, bool, error)
		}).LatestCheckpoint(ctx, "j1"); err != nil || cp.ID != 5 {
			t.Errorf("latest checkpoint read without a leadership: %+v, %v; want 5", cp, err)
		}
		if err := lb.Jobs().Remove(ctx, "j1"); err != nil {
			t.Fatal(err)
		}
		if err := lb.Checkpoints().Remove(ctx, "j1"); err != nil {
			t.Fatal(err)
		}
		if jobs, _ := lb.Jobs().List(ctx); len(jobs) != 0 {
			t.Errorf("jobs after removal: %q", jobs)
		}
		if _, ok, _ := lb.Checkpoints().Latest(ctx, "j1"); ok {
			t.Errorf("a checkpoint is left after removal")
		}
		if n, _ := lb.Checkpoints().Reserved(ctx, "j1"); n != 0 {
			t.Errorf("reserved ids after removal: %d", n)
		}
	})
}

// A leader whose lease is not renewed (its client is gone, as a killed or
// paused process's) is replaced once the lease expires, and WatchLeader
// reports the new leader.
func TestLeaseExpiryHandsOver(t *testing.T) {
	each(t, func(t *testing.T, connect func(*testing.T, string) ha.Services) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		a, b, watcher := connect(t, ""), connect(t, ""), connect(t, "")
		la, err := a.Campaign(ctx, ha.LeaderInfo{Addr: "a:1"})
		if err != nil {
			t.Fatal(err)
		}
		if err := la.Checkpoints().Reserve(ctx, "j1", 500); err != nil {
			t.Fatal(err)
		}
		leaders := watcher.WatchLeader(ctx)
		if first := <-leaders; first.Addr != "a:1" || first.Epoch != la.Epoch() {
			t.Fatalf("first leader %+v", first)
		}
		// Closing a's client stops the lease's renewal without revoking it.
		a.Close()
		lb, err := b.Campaign(ctx, ha.LeaderInfo{Addr: "b:1", RESTAddr: "b:2"})
		if err != nil {
			t.Fatal(err)
		}
		next := <-leaders
		if next.Addr != "b:1" || next.RESTAddr != "b:2" || next.Epoch != lb.Epoch() || next.Epoch <= la.Epoch() {
			t.Errorf("watched leader %+v, want b:1 at epoch %d, above %d", next, lb.Epoch(), la.Epoch())
		}
		if n, err := lb.Checkpoints().Reserved(ctx, "j1"); err != nil || n != 500 {
			t.Errorf("reserved ids after takeover: %d, %v; want 500", n, err)
		}
		select {
		case <-la.Lost():
		case <-time.After(30 * time.Second):
			t.Error("the old leadership was not reported lost")
		}
	})
}

// A job bigger than the store keeps goes to the storage directory, and
// comes back whole; without one it is refused.
func TestLargeJobGoesToStorageDir(t *testing.T) {
	each(t, func(t *testing.T, connect func(*testing.T, string) ha.Services) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		big := bytes.Repeat([]byte("0123456789abcdef"), 64<<10) // 1 MiB
		e := connect(t, "")
		l, err := e.Campaign(ctx, ha.LeaderInfo{Addr: "a:1"})
		if err != nil {
			t.Fatal(err)
		}
		if err := l.Jobs().Put(ctx, "big", big); err == nil {
			t.Fatal("a 1 MiB job was accepted without high-availability.storageDir")
		}
		l.Resign(ctx)
		e2 := connect(t, t.TempDir())
		l2, err := e2.Campaign(ctx, ha.LeaderInfo{Addr: "b:1"})
		if err != nil {
			t.Fatal(err)
		}
		if err := l2.Jobs().Put(ctx, "big", big); err != nil {
			t.Fatal(err)
		}
		jobs, err := l2.Jobs().List(ctx)
		if err != nil || !bytes.Equal(jobs["big"], big) {
			t.Fatalf("the big job came back as %d bytes, %v", len(jobs["big"]), err)
		}
	})
}
