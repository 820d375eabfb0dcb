package ha

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/weirstream/weir/internal/ha/kubefake"
	"github.com/weirstream/weir/internal/objstore/gcstest"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// kube returns a Kubernetes HA service with short timings in cluster
// "fence", which opts may change.
func kube(t *testing.T, cli kubernetes.Interface, opts ...KubernetesOption) *Kubernetes {
	t.Helper()
	k, err := NewKubernetes(cli, "weir", append([]KubernetesOption{WithKubernetesClusterID("fence"),
		WithLeaseDuration(time.Second), WithRenewDeadline(time.Second), WithRetryPeriod(200 * time.Millisecond)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { k.Close() })
	return k
}

// pause stops l's renewals without telling it, as SIGSTOP does to its
// process: it still believes it leads.
func pause(l *kubeLeadership) {
	l.stopOnce.Do(func() { close(l.stop) })
	<-l.done
}

// A paused leader that resumes after a standby took over finds every
// write refused by the API, not by its own bookkeeping: it has not
// noticed that it lost.
func TestKubernetesPausedLeaderIsFenced(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cli := kubefake.New()
	a, b := kube(t, cli), kube(t, cli)
	la, err := a.Campaign(ctx, LeaderInfo{Addr: "a:1"})
	if err != nil {
		t.Fatal(err)
	}
	if err := la.Checkpoints().Put(ctx, "j", CompletedCheckpoint{ID: 1, Path: "p1"}); err != nil {
		t.Fatal(err)
	}
	pause(la.(*kubeLeadership))
	lb, err := b.Campaign(ctx, LeaderInfo{Addr: "b:1"})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-la.Lost():
		t.Fatal("the paused leader was told it lost: the test would not reach the API's fence")
	default:
	}
	for what, err := range map[string]error{
		"checkpoint": la.Checkpoints().Put(ctx, "j", CompletedCheckpoint{ID: 2, Path: "p2"}),
		"reserve":    la.Checkpoints().Reserve(ctx, "j", 99),
		"job":        la.Jobs().Put(ctx, "j", []byte("x")),
		"remove":     la.Jobs().Remove(ctx, "j"),
	} {
		if !errors.Is(err, ErrNotLeader) {
			t.Errorf("the paused leader's %s write: %v, want ErrNotLeader", what, err)
		}
	}
	if cp, _, err := lb.Checkpoints().Latest(ctx, "j"); err != nil || cp.ID != 1 {
		t.Errorf("latest checkpoint %+v, %v; want 1", cp, err)
	}
	if jobs, err := lb.Jobs().List(ctx); err != nil || len(jobs) != 0 {
		t.Errorf("jobs %q, %v; want none", jobs, err)
	}
}

// Kubernetes has no transaction over the Lease and the index: a deposed
// leader can pass the Lease check just before its successor takes over.
// Its write to the index then conflicts with the successor's claim, and
// reading again it finds itself deposed: the successor never sees it.
func TestKubernetesWriteRacingTakeoverIsFenced(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cli := kubefake.New()
	a, b := kube(t, cli), kube(t, cli)
	la, err := a.Campaign(ctx, LeaderInfo{Addr: "a:1"})
	if err != nil {
		t.Fatal(err)
	}
	if err := la.Checkpoints().Put(ctx, "j", CompletedCheckpoint{ID: 1, Path: "p1"}); err != nil {
		t.Fatal(err)
	}
	l := la.(*kubeLeadership)
	pause(l)
	var lb Leadership
	calls := 0
	_, err = l.update(ctx, "racing write", "j", func(e *indexEntry) error {
		calls++
		if calls == 1 {
			// The Lease check passed and the index was read: now the
			// successor takes over and claims the index.
			var err error
			if lb, err = b.Campaign(ctx, LeaderInfo{Addr: "b:1"}); err != nil {
				return err
			}
		}
		e.Checkpoint = &CompletedCheckpoint{ID: 2, Path: "p2"}
		return nil
	})
	if !errors.Is(err, ErrNotLeader) || calls != 1 {
		t.Fatalf("the racing write: %v after %d attempts; want ErrNotLeader after 1", err, calls)
	}
	if cp, _, err := lb.Checkpoints().Latest(ctx, "j"); err != nil || cp.ID != 1 {
		t.Errorf("the successor sees checkpoint %+v, %v; want 1", cp, err)
	}
}

// A Lease deleted by hand does not restart the epochs: the next leader's
// epoch is above the one that last claimed the index, so the old leader
// stays fenced.
func TestKubernetesEpochSurvivesLeaseDeletion(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cli := kubefake.New()
	a, b := kube(t, cli), kube(t, cli)
	la, err := a.Campaign(ctx, LeaderInfo{Addr: "a:1"})
	if err != nil {
		t.Fatal(err)
	}
	if err := la.Checkpoints().Reserve(ctx, "j", 7); err != nil {
		t.Fatal(err)
	}
	pause(la.(*kubeLeadership))
	if err := cli.CoordinationV1().Leases("weir").Delete(ctx, a.leaseName(), metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	lb, err := b.Campaign(ctx, LeaderInfo{Addr: "b:1"})
	if err != nil {
		t.Fatal(err)
	}
	if lb.Epoch() <= la.Epoch() {
		t.Fatalf("epoch %d after the Lease was deleted, not above the old %d", lb.Epoch(), la.Epoch())
	}
	if err := la.Checkpoints().Reserve(ctx, "j", 8); !errors.Is(err, ErrNotLeader) {
		t.Errorf("old leader's write: %v, want ErrNotLeader", err)
	}
	if n, err := lb.Checkpoints().Reserved(ctx, "j"); err != nil || n != 7 {
		t.Errorf("reserved %d, %v; want 7", n, err)
	}
}

// Options that would let a standby take over while the leader still
// acts, or renew too rarely, are refused.
func TestKubernetesOptionsChecked(t *testing.T) {
	cli := kubefake.New()
	for name, opts := range map[string][]KubernetesOption{
		"renew deadline above lease": {WithLeaseDuration(10 * time.Second), WithRenewDeadline(11 * time.Second)},
		"retry period too long":      {WithRenewDeadline(5 * time.Second), WithRetryPeriod(5 * time.Second)},
		"lease below 1 s":            {WithLeaseDuration(500 * time.Millisecond)},
		"cluster id not a label":     {WithKubernetesClusterID("My_Cluster")},
	} {
		if _, err := NewKubernetes(cli, "weir", opts...); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if _, err := NewKubernetes(cli, "weir"); err != nil {
		t.Errorf("defaults: %v", err)
	}
}

// A deposed leader that writes a job graph (having passed its Lease check
// just before a takeover) and then finds its index write refused leaves
// the graph behind (a ConfigMap, or a blob in
// high-availability.storageDir for a large one); the next leader deletes
// what no entry points at and keeps what one does.
func TestKubernetesUnrecordedJobGraphsAreDeleted(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cli := kubefake.New()
	dir := t.TempDir()
	newKube := func() *Kubernetes { return kube(t, cli, WithKubernetesClusterID("gc"), WithKubernetesStorageDir(dir)) }
	a, b, c := newKube(), newKube(), newKube()
	la, err := a.Campaign(ctx, LeaderInfo{Addr: "a:1"})
	if err != nil {
		t.Fatal(err)
	}
	big := make([]byte, maxInline+1)
	if err := la.Jobs().Put(ctx, "kept", []byte("small")); err != nil {
		t.Fatal(err)
	}
	if err := la.Jobs().Put(ctx, "kept-big", big); err != nil {
		t.Fatal(err)
	}
	pause(la.(*kubeLeadership))
	lb, err := b.Campaign(ctx, LeaderInfo{Addr: "b:1"})
	if err != nil {
		t.Fatal(err)
	}
	// What the deposed leader writes when it passed its Lease check just
	// before the takeover: its graphs, under its epoch's names, go in;
	// their index entries are refused.
	if _, err := cli.CoreV1().ConfigMaps("weir").Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: a.jobObject("lost", 1), Labels: a.labels()},
		BinaryData: map[string][]byte{"job": []byte("small")},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := (blobDir{path: dir}).write(ctx, "gc/jobs/lost-big-1", big); err != nil {
		t.Fatal(err)
	}
	if err := la.Jobs().Put(ctx, "lost", []byte("small")); !errors.Is(err, ErrNotLeader) {
		t.Fatalf("the deposed leader recorded a job: %v", err)
	}
	graphs := func() (cms, blobs []string) {
		list, err := cli.CoreV1().ConfigMaps("weir").List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, cm := range list.Items {
			if strings.HasPrefix(cm.Name, "weir-gc-job-") {
				cms = append(cms, cm.Name)
			}
		}
		blobs, err = (blobDir{path: dir}).list(ctx, "gc/jobs/")
		if err != nil {
			t.Fatal(err)
		}
		slices.Sort(cms)
		return cms, blobs
	}
	cms, blobs := graphs()
	if !slices.Equal(cms, []string{"weir-gc-job-kept-1", "weir-gc-job-lost-1"}) || !slices.Equal(blobs, []string{"gc/jobs/kept-big-1", "gc/jobs/lost-big-1"}) {
		t.Fatalf("before a new leader: ConfigMaps %q, blobs %q; want the recorded and the unrecorded graphs", cms, blobs)
	}
	pause(lb.(*kubeLeadership))
	lc, err := c.Campaign(ctx, LeaderInfo{Addr: "c:1"})
	if err != nil {
		t.Fatal(err)
	}
	cms, blobs = graphs()
	if !slices.Equal(cms, []string{"weir-gc-job-kept-1"}) || !slices.Equal(blobs, []string{"gc/jobs/kept-big-1"}) {
		t.Fatalf("after a new leader: ConfigMaps %q, blobs %q; want only the recorded graphs", cms, blobs)
	}
	jobs, err := lc.Jobs().List(ctx)
	if err != nil || len(jobs) != 2 || string(jobs["kept"]) != "small" || len(jobs["kept-big"]) != len(big) {
		t.Fatalf("jobs after collection: %d, %v", len(jobs), err)
	}
}

// A storage directory given as a URL opens through the mux the job
// manager builds from its options (here gs.storage.root.url), not through
// gocloud's default mux, which knows none of them.
func TestKubernetesStorageDirUsesObjectStoreOptions(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	srv := gcstest.Start(t)
	k := kube(t, kubefake.New(), WithKubernetesClusterID("blobs"),
		WithKubernetesStorageDir("gs://"+gcstest.Bucket+"/ha"), WithKubernetesURLMux(srv.Mux()))
	l, err := k.Campaign(ctx, LeaderInfo{Addr: "a:1"})
	if err != nil {
		t.Fatal(err)
	}
	big := make([]byte, maxInline+1)
	big[0] = 7
	if err := l.Jobs().Put(ctx, "big", big); err != nil {
		t.Fatal(err)
	}
	if _, err := srv.OpenBucket(t).Attributes(ctx, "ha/blobs/jobs/big-1"); err != nil {
		t.Fatalf("the job graph is not in the bucket: %v", err)
	}
	jobs, err := k.Jobs(ctx)
	if err != nil || len(jobs["big"]) != len(big) || jobs["big"][0] != 7 {
		t.Fatalf("jobs read back: %d bytes, %v", len(jobs["big"]), err)
	}
}
