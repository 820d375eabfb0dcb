package ha

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	mrand "math/rand/v2"
	"os"
	"path"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"gocloud.dev/blob"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// Kubernetes implements Services with the Kubernetes API, for clusters
// without etcd of their own (Flink's KubernetesHaServices):
//
//   - The leader holds the Lease weir-<cluster-id>-leader
//     (coordination.k8s.io/v1), acquired and renewed by updates guarded by
//     the Lease's resourceVersion. Its annotation weir.dev/leader is the
//     leader's LeaderInfo; spec.leaseTransitions, which grows with each
//     new holder, is the epoch.
//   - The ConfigMap weir-<cluster-id>-ha is the index: one data key per
//     job, holding where the job graph is, the latest completed checkpoint
//     and the reserved checkpoint ids. Its annotation weir.dev/epoch is the
//     epoch of the leader that owns it.
//   - Each job graph is a ConfigMap of its own,
//     weir-<cluster-id>-job-<job>-<epoch> (binaryData "job"), or, above
//     512 KiB, a blob under high-availability.storageDir; the index points
//     at it. A name carries its writer's epoch, so a deposed leader can
//     never overwrite the graph its successor reads.
//
// The fence: a new leader first claims the index (it sets weir.dev/epoch
// to its own epoch, by an update guarded by resourceVersion) and only then
// reads it. Every write checks that the writer still holds the Lease at
// its epoch, then updates the index guarded by its resourceVersion and
// only if weir.dev/epoch is still the writer's epoch. A deposed leader's
// write therefore lands before its successor reads the index, and so is
// seen by it, or fails with ErrNotLeader: Kubernetes has no multi-object
// transaction, and the index's epoch is what makes the check and the
// write one step.
//
// What it calls, and so what its Role must allow: leases get, create,
// update, watch; configmaps get, create, update, delete.
type Kubernetes struct {
	cli                                       kubernetes.Interface
	ns, clusterID                             string
	leaseDuration, renewDeadline, retryPeriod time.Duration
	storageDir                                blobDir
	log                                       *slog.Logger
	closed                                    chan struct{}
	closeOnce                                 sync.Once
}

// KubernetesOption configures Kubernetes.
type KubernetesOption func(*Kubernetes)

// WithKubernetesClusterID names the cluster's objects (kubernetes.cluster-id;
// default "default"): weir-<id>-leader, weir-<id>-ha, weir-<id>-job-....
// It must be a DNS label of at most 40 characters.
func WithKubernetesClusterID(id string) KubernetesOption {
	return func(k *Kubernetes) { k.clusterID = id }
}

// WithLeaseDuration sets how long a standby waits, after it last saw the
// Lease renewed, before it takes the leadership
// (high-availability.kubernetes.leader-election.lease-duration; default
// 15 s, at least 1 s; the Lease counts it in whole seconds, rounded up).
func WithLeaseDuration(d time.Duration) KubernetesOption {
	return func(k *Kubernetes) { k.leaseDuration = d }
}

// WithRenewDeadline sets how long the leader keeps trying to renew the
// Lease before it gives the leadership up
// (high-availability.kubernetes.leader-election.renew-deadline; default
// 15 s, at most the lease duration).
func WithRenewDeadline(d time.Duration) KubernetesOption {
	return func(k *Kubernetes) { k.renewDeadline = d }
}

// WithRetryPeriod sets how often the leader renews the Lease and a
// standby tries to take it (high-availability.kubernetes.leader-election.retry-period;
// default 5 s, below the renew deadline). Each wait is stretched by up to
// a fifth at random, so that standbys do not move in step.
func WithRetryPeriod(d time.Duration) KubernetesOption {
	return func(k *Kubernetes) { k.retryPeriod = d }
}

// WithKubernetesStorageDir sets where job graphs above 512 KiB go, a
// path or a gocloud.dev/blob URL (high-availability.storageDir; default:
// none, and such a job is refused).
func WithKubernetesStorageDir(dir string) KubernetesOption {
	return func(k *Kubernetes) { k.storageDir.path = dir }
}

// WithKubernetesURLMux opens a storage directory given as a URL; without
// it, gocloud.dev/blob's default mux does, which knows no object store
// options (s3.endpoint, gs.storage.root.url, ...).
func WithKubernetesURLMux(m *blob.URLMux) KubernetesOption {
	return func(k *Kubernetes) { k.storageDir.mux = m }
}

// WithKubernetesLogger sets the logger (default slog.Default()).
func WithKubernetesLogger(l *slog.Logger) KubernetesOption {
	return func(k *Kubernetes) { k.log = l }
}

// Annotations and labels weir sets on its objects.
const (
	annotationLeader = "weir.dev/leader"
	annotationEpoch  = "weir.dev/epoch"
	labelClusterID   = "weir.dev/cluster-id"
	labelManagedBy   = "app.kubernetes.io/managed-by"
)

// NewKubernetes returns the services of cluster objects in namespace, through
// cli.
func NewKubernetes(cli kubernetes.Interface, namespace string, opts ...KubernetesOption) (*Kubernetes, error) {
	k := &Kubernetes{cli: cli, ns: namespace, clusterID: "default",
		leaseDuration: 15 * time.Second, renewDeadline: 15 * time.Second, retryPeriod: 5 * time.Second,
		log: slog.Default(), closed: make(chan struct{})}
	for _, o := range opts {
		o(k)
	}
	if errs := validation.IsDNS1123Label(k.clusterID); len(errs) > 0 || len(k.clusterID) > 40 {
		return nil, fmt.Errorf("ha: kubernetes cluster id %q must be a DNS label (lower-case letters, digits and '-') of at most 40 characters", k.clusterID)
	}
	if errs := validation.IsDNS1123Label(k.ns); len(errs) > 0 {
		return nil, fmt.Errorf("ha: kubernetes namespace %q: %s", k.ns, strings.Join(errs, "; "))
	}
	switch {
	case k.leaseDuration < time.Second:
		return nil, fmt.Errorf("ha: lease duration %s is below 1 s", k.leaseDuration)
	case k.renewDeadline > k.leaseDuration:
		return nil, fmt.Errorf("ha: renew deadline %s is above the lease duration %s: a standby could take over while the leader still acts", k.renewDeadline, k.leaseDuration)
	case k.retryPeriod <= 0 || k.retryPeriod*6/5 >= k.renewDeadline:
		return nil, fmt.Errorf("ha: retry period %s (stretched by up to a fifth) must be below the renew deadline %s", k.retryPeriod, k.renewDeadline)
	}
	return k, nil
}

// serviceAccountNamespace is where a pod finds its own namespace.
const serviceAccountNamespace = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"

// KubernetesClient connects to the Kubernetes API: from inside a pod (its
// service account) when kubeconfig is "", else as the kubeconfig file at
// that path says (kubernetes.config.file). It returns the namespace to
// use when none is configured: the pod's, or the kubeconfig context's
// (else "default").
func KubernetesClient(kubeconfig string) (kubernetes.Interface, string, error) {
	var cfg *rest.Config
	var ns string
	if kubeconfig == "" {
		c, err := rest.InClusterConfig()
		if err != nil {
			return nil, "", fmt.Errorf("ha: not in a Kubernetes pod (%w); outside a cluster, set kubernetes.config.file to a kubeconfig", err)
		}
		cfg = c
		b, err := os.ReadFile(serviceAccountNamespace)
		if err != nil {
			return nil, "", fmt.Errorf("ha: the pod's namespace: %w; set kubernetes.namespace", err)
		}
		ns = strings.TrimSpace(string(b))
	} else {
		cc := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(&clientcmd.ClientConfigLoadingRules{ExplicitPath: kubeconfig}, &clientcmd.ConfigOverrides{})
		c, err := cc.ClientConfig()
		if err != nil {
			return nil, "", fmt.Errorf("ha: kubeconfig %s: %w", kubeconfig, err)
		}
		cfg = c
		if ns, _, err = cc.Namespace(); err != nil {
			return nil, "", fmt.Errorf("ha: kubeconfig %s: %w", kubeconfig, err)
		}
	}
	// A checkpoint's record is three requests; the default 5 per second
	// would queue them behind the Lease's renewals.
	cfg.QPS, cfg.Burst = 50, 100
	cfg.UserAgent = "weir"
	cli, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, "", fmt.Errorf("ha: kubernetes client: %w", err)
	}
	return cli, ns, nil
}

// Close implements Services: the leaderships stop renewing their Lease
// (without releasing it, as a killed process's) and are lost.
func (k *Kubernetes) Close() error {
	k.closeOnce.Do(func() { close(k.closed) })
	return nil
}

func (k *Kubernetes) leaseName() string { return "weir-" + k.clusterID + "-leader" }
func (k *Kubernetes) indexName() string { return "weir-" + k.clusterID + "-ha" }

// jobObject names the ConfigMap of job id's graph written at epoch.
func (k *Kubernetes) jobObject(id string, epoch int64) string {
	n := strings.ToLower(id)
	if errs := validation.IsDNS1123Label(n); len(errs) > 0 || n != id {
		sum := sha256.Sum256([]byte(id))
		n = hex.EncodeToString(sum[:16])
	}
	return fmt.Sprintf("weir-%s-job-%s-%d", k.clusterID, n, epoch)
}

func (k *Kubernetes) labels() map[string]string {
	return map[string]string{labelClusterID: k.clusterID, labelManagedBy: "weir"}
}

// indexKeyRE is what a ConfigMap's data key may be.
var indexKeyRE = regexp.MustCompile(`^[-._a-zA-Z0-9]{1,200}$`)

// indexKey is job id's data key in the index.
func indexKey(id string) string {
	if indexKeyRE.MatchString(id) {
		return "job." + id
	}
	sum := sha256.Sum256([]byte(id))
	return "hash." + hex.EncodeToString(sum[:])
}

// indexEntry is a job's record in the index.
type indexEntry struct {
	ID         string               `json:"id"`
	Job        *jobRef              `json:"job,omitempty"`
	Checkpoint *CompletedCheckpoint `json:"checkpoint,omitempty"`
	Reserved   int64                `json:"reserved,omitempty"`
}

// jobRef is where a job graph is: a ConfigMap or a blob.
type jobRef struct {
	ConfigMap string `json:"configmap,omitempty"`
	Blob      string `json:"blob,omitempty"`
}

func (e indexEntry) empty() bool { return e.Job == nil && e.Checkpoint == nil && e.Reserved == 0 }

// readIndex returns the index, nil if there is none yet.
func (k *Kubernetes) readIndex(ctx context.Context) (*corev1.ConfigMap, error) {
	cm, err := k.cli.CoreV1().ConfigMaps(k.ns).Get(ctx, k.indexName(), metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("ha: reading ConfigMap %s/%s: %w", k.ns, k.indexName(), err)
	}
	return cm, nil
}

// indexEpoch is the epoch of the leader that last claimed the index (0:
// none).
func indexEpoch(cm *corev1.ConfigMap) (int64, error) {
	if cm == nil {
		return 0, nil
	}
	v, ok := cm.Annotations[annotationEpoch]
	if !ok {
		return 0, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("ha: ConfigMap %s annotation %s=%q: %w", cm.Name, annotationEpoch, v, err)
	}
	return n, nil
}

// entries decodes the index, by job id.
func entries(cm *corev1.ConfigMap) (map[string]indexEntry, error) {
	out := map[string]indexEntry{}
	if cm == nil {
		return out, nil
	}
	for key, v := range cm.Data {
		var e indexEntry
		if err := json.Unmarshal([]byte(v), &e); err != nil || indexKey(e.ID) != key {
			return nil, fmt.Errorf("ha: ConfigMap %s: the record %s does not decode (%v)", cm.Name, key, err)
		}
		out[e.ID] = e
	}
	return out, nil
}

func (k *Kubernetes) entry(ctx context.Context, id string) (indexEntry, error) {
	cm, err := k.readIndex(ctx)
	if err != nil {
		return indexEntry{}, err
	}
	all, err := entries(cm)
	if err != nil {
		return indexEntry{}, err
	}
	return all[id], nil
}

func holderOf(l *coordinationv1.Lease) string {
	if l.Spec.HolderIdentity == nil {
		return ""
	}
	return *l.Spec.HolderIdentity
}

func epochOf(l *coordinationv1.Lease) int64 {
	if l.Spec.LeaseTransitions == nil {
		return 0
	}
	return int64(*l.Spec.LeaseTransitions)
}

// Leader implements Services: the Lease's holder, unless it was released.
func (k *Kubernetes) Leader(ctx context.Context) (LeaderInfo, bool, error) {
	l, err := k.cli.CoordinationV1().Leases(k.ns).Get(ctx, k.leaseName(), metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return LeaderInfo{}, false, nil
	}
	if err != nil {
		return LeaderInfo{}, false, fmt.Errorf("ha: reading Lease %s/%s: %w", k.ns, k.leaseName(), err)
	}
	if holderOf(l) == "" {
		return LeaderInfo{}, false, nil
	}
	var info LeaderInfo
	if err := json.Unmarshal([]byte(l.Annotations[annotationLeader]), &info); err != nil {
		return LeaderInfo{}, false, fmt.Errorf("ha: Lease %s annotation %s: %w", l.Name, annotationLeader, err)
	}
	info.Epoch = epochOf(l)
	return info, true, nil
}

// WatchLeader implements Services: each change of the Lease sends the
// leader again if it changed; a broken watch is reopened. The Lease is
// also read every retry period, so that a watch that stalls without
// closing (a connection that died quietly) cannot hide a new leader.
func (k *Kubernetes) WatchLeader(ctx context.Context) <-chan LeaderInfo {
	ch := make(chan LeaderInfo, 1)
	go func() {
		defer close(ch)
		var last int64
		for ctx.Err() == nil {
			w, err := k.cli.CoordinationV1().Leases(k.ns).Watch(ctx, metav1.ListOptions{
				FieldSelector: fields.OneTermEqualSelector("metadata.name", k.leaseName()).String()})
			if err != nil {
				sleep(ctx, 500*time.Millisecond)
				continue
			}
			for {
				info, ok, err := k.Leader(ctx)
				if err == nil && ok && info.Epoch != last {
					last = info.Epoch
					select {
					case ch <- info:
					case <-ctx.Done():
						w.Stop()
						return
					}
				}
				if err != nil {
					break
				}
				// A fake API's watch outlives ctx: wait for either.
				t := time.NewTimer(k.retryPeriod)
				select {
				case _, open := <-w.ResultChan():
					t.Stop()
					if open {
						continue
					}
				case <-t.C:
					continue
				case <-ctx.Done():
					t.Stop()
				}
				break
			}
			w.Stop()
			sleep(ctx, 500*time.Millisecond)
		}
	}()
	return ch
}

// jitter stretches d by up to a fifth.
func jitter(d time.Duration) time.Duration {
	return d + time.Duration(mrand.Int64N(int64(d)/5+1))
}

func newIdentity() string {
	host, _ := os.Hostname()
	var b [8]byte
	_, _ = rand.Read(b[:])
	return host + "-" + hex.EncodeToString(b[:])
}

// Campaign implements Services. The campaign takes the Lease when it is
// free (never held, or released) or when it has not changed for its
// lease duration, as this process measures it: clocks of different
// machines are never compared.
func (k *Kubernetes) Campaign(ctx context.Context, info LeaderInfo) (Leadership, error) {
	val, err := json.Marshal(info)
	if err != nil {
		return nil, err
	}
	c := campaign{k: k, id: newIdentity(), info: string(val)}
	for {
		epoch, won, err := c.try(ctx)
		if err != nil && ctx.Err() == nil {
			k.log.Warn("ha: cannot take the Kubernetes Lease; retrying", "lease", k.leaseName(), "err", err)
		}
		if won {
			l := &kubeLeadership{k: k, id: c.id, epoch: epoch, lost: make(chan struct{}), stop: make(chan struct{}), done: make(chan struct{})}
			go l.renew(ctx)
			err := l.claim(ctx)
			if err == nil {
				l.collectGarbage(ctx)
				return l, nil
			}
			l.halt()
			if !errors.Is(err, ErrNotLeader) {
				rctx, cancel := context.WithTimeout(context.Background(), k.retryPeriod)
				l.release(rctx)
				cancel()
			}
			k.log.Warn("ha: elected, but cannot claim the job index; campaigning again", "epoch", epoch, "err", err)
		}
		if !sleep(ctx, jitter(k.retryPeriod)) {
			return nil, ctx.Err()
		}
	}
}

// campaign is one process's attempts at the Lease: what it last saw.
type campaign struct {
	k          *Kubernetes
	id, info   string
	observedRV string
	observedAt time.Time
}

func (k *Kubernetes) leaseSeconds() int32 { return int32(math.Ceil(k.leaseDuration.Seconds())) }

// try takes the Lease if it may, returning the new epoch.
func (c *campaign) try(ctx context.Context) (int64, bool, error) {
	k := c.k
	leases := k.cli.CoordinationV1().Leases(k.ns)
	l, err := leases.Get(ctx, k.leaseName(), metav1.GetOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return 0, false, err
	}
	now := time.Now()
	var lastEpoch int64
	if err == nil {
		if l.ResourceVersion != c.observedRV {
			c.observedRV, c.observedAt = l.ResourceVersion, now
		}
		d := k.leaseDuration
		if s := l.Spec.LeaseDurationSeconds; s != nil {
			d = time.Duration(*s) * time.Second
		}
		if holderOf(l) != "" && now.Before(c.observedAt.Add(d)) {
			return 0, false, nil
		}
		lastEpoch = epochOf(l)
	}
	// The epoch is above both the Lease's and the index's: a Lease deleted
	// by hand starts again above every epoch that ever wrote.
	idx, err2 := k.readIndex(ctx)
	if err2 != nil {
		return 0, false, err2
	}
	ie, err2 := indexEpoch(idx)
	if err2 != nil {
		return 0, false, err2
	}
	epoch := max(lastEpoch, ie) + 1
	if epoch > math.MaxInt32 {
		return 0, false, fmt.Errorf("ha: Lease %s: the epoch %d overflows spec.leaseTransitions", k.leaseName(), epoch)
	}
	t := metav1.NewMicroTime(now)
	spec := coordinationv1.LeaseSpec{
		HolderIdentity:       &c.id,
		LeaseDurationSeconds: ptr(k.leaseSeconds()),
		AcquireTime:          &t,
		RenewTime:            &t,
		LeaseTransitions:     ptr(int32(epoch)),
	}
	if apierrors.IsNotFound(err) {
		_, err = leases.Create(ctx, &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Name: k.leaseName(), Labels: k.labels(), Annotations: map[string]string{annotationLeader: c.info}},
			Spec:       spec,
		}, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			return 0, false, nil
		}
		return epoch, err == nil, err
	}
	l.Spec = spec
	if l.Annotations == nil {
		l.Annotations = map[string]string{}
	}
	l.Annotations[annotationLeader] = c.info
	// Guarded by the resourceVersion the Get returned: another campaign
	// that got there first makes this one conflict.
	if _, err := leases.Update(ctx, l, metav1.UpdateOptions{}); err != nil {
		if apierrors.IsConflict(err) {
			return 0, false, nil
		}
		return 0, false, err
	}
	return epoch, true, nil
}

func ptr[T any](v T) *T { return &v }

// kubeLeadership is a held Lease.
type kubeLeadership struct {
	k        *Kubernetes
	id       string
	epoch    int64
	lost     chan struct{}
	lostOnce sync.Once
	stop     chan struct{}
	stopOnce sync.Once
	done     chan struct{}
}

func (l *kubeLeadership) Epoch() int64                 { return l.epoch }
func (l *kubeLeadership) Lost() <-chan struct{}        { return l.lost }
func (l *kubeLeadership) Jobs() JobGraphStore          { return kubeJobs{l} }
func (l *kubeLeadership) Checkpoints() CheckpointStore { return kubeCheckpoints{l} }

func (l *kubeLeadership) markLost() { l.lostOnce.Do(func() { close(l.lost) }) }

// halt stops the renewals and waits for them; the leadership is lost.
func (l *kubeLeadership) halt() {
	l.stopOnce.Do(func() { close(l.stop) })
	<-l.done
	l.markLost()
}

// renew renews the Lease every retry period until it fails for the renew
// deadline, finds another holder, or ctx is done or the services closed.
func (l *kubeLeadership) renew(ctx context.Context) {
	defer close(l.done)
	k := l.k
	last := time.Now()
	for {
		t := time.NewTimer(jitter(k.retryPeriod))
		select {
		case <-ctx.Done():
			t.Stop()
			l.markLost()
			return
		case <-k.closed:
			t.Stop()
			l.markLost()
			return
		case <-l.stop:
			t.Stop()
			return
		case <-t.C:
		}
		rctx, cancel := context.WithDeadline(ctx, last.Add(k.renewDeadline))
		err := l.renewOnce(rctx)
		cancel()
		switch {
		case err == nil:
			last = time.Now()
		case errors.Is(err, ErrNotLeader):
			k.log.Error("ha: the Lease has another holder", "lease", k.leaseName(), "epoch", l.epoch, "err", err)
			l.markLost()
			return
		case time.Since(last) >= k.renewDeadline:
			k.log.Error("ha: could not renew the Lease within the renew deadline", "lease", k.leaseName(), "epoch", l.epoch, "err", err)
			l.markLost()
			return
		default:
			k.log.Warn("ha: renewing the Lease failed; retrying", "lease", k.leaseName(), "err", err)
		}
	}
}

// holds returns the Lease if this leadership still holds it, and
// ErrNotLeader otherwise.
func (l *kubeLeadership) holds(ctx context.Context) (*coordinationv1.Lease, error) {
	select {
	case <-l.lost:
		return nil, fmt.Errorf("%w (epoch %d: the Lease was lost)", ErrNotLeader, l.epoch)
	default:
	}
	lease, err := l.k.cli.CoordinationV1().Leases(l.k.ns).Get(ctx, l.k.leaseName(), metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("%w (epoch %d: Lease %s is gone)", ErrNotLeader, l.epoch, l.k.leaseName())
	}
	if err != nil {
		return nil, err
	}
	if holderOf(lease) != l.id || epochOf(lease) != l.epoch {
		return nil, fmt.Errorf("%w (epoch %d: Lease %s is at epoch %d)", ErrNotLeader, l.epoch, l.k.leaseName(), epochOf(lease))
	}
	return lease, nil
}

func (l *kubeLeadership) renewOnce(ctx context.Context) error {
	lease, err := l.holds(ctx)
	if err != nil {
		return err
	}
	t := metav1.NewMicroTime(time.Now())
	lease.Spec.RenewTime = &t
	_, err = l.k.cli.CoordinationV1().Leases(l.k.ns).Update(ctx, lease, metav1.UpdateOptions{})
	return err
}

// release gives the Lease up if this leadership still holds it: it has no
// holder then, and a standby takes it at once.
func (l *kubeLeadership) release(ctx context.Context) error {
	lease, err := l.holds(ctx)
	if err != nil {
		if errors.Is(err, ErrNotLeader) {
			return nil
		}
		return err
	}
	lease.Spec.HolderIdentity = nil
	lease.Spec.LeaseDurationSeconds = ptr(int32(1))
	_, err = l.k.cli.CoordinationV1().Leases(l.k.ns).Update(ctx, lease, metav1.UpdateOptions{})
	if apierrors.IsConflict(err) {
		return fmt.Errorf("ha: releasing Lease %s: it changed (another holder?): %w", l.k.leaseName(), err)
	}
	return err
}

// Resign implements Leadership.
func (l *kubeLeadership) Resign(ctx context.Context) error {
	l.stopOnce.Do(func() { close(l.stop) })
	<-l.done
	// Released while still marked held, so that the check in release
	// passes; lost from then on.
	err := l.release(ctx)
	l.markLost()
	return err
}

// claim makes the index this leadership's: weir.dev/epoch becomes its
// epoch, unless a later leader has claimed it.
func (l *kubeLeadership) claim(ctx context.Context) error {
	cms := l.k.cli.CoreV1().ConfigMaps(l.k.ns)
	for {
		if _, err := l.holds(ctx); err != nil {
			return err
		}
		cm, err := l.k.readIndex(ctx)
		if err != nil {
			return err
		}
		if cm == nil {
			_, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{
				Name: l.k.indexName(), Labels: l.k.labels(),
				Annotations: map[string]string{annotationEpoch: strconv.FormatInt(l.epoch, 10)},
			}}, metav1.CreateOptions{})
			if apierrors.IsAlreadyExists(err) {
				continue
			}
			return err
		}
		cur, err := indexEpoch(cm)
		if err != nil {
			return err
		}
		if cur > l.epoch {
			return fmt.Errorf("%w (epoch %d: the index is claimed at epoch %d)", ErrNotLeader, l.epoch, cur)
		}
		if cm.Annotations == nil {
			cm.Annotations = map[string]string{}
		}
		cm.Annotations[annotationEpoch] = strconv.FormatInt(l.epoch, 10)
		if _, err := cms.Update(ctx, cm, metav1.UpdateOptions{}); apierrors.IsConflict(err) {
			continue
		} else if err != nil {
			return err
		}
		return nil
	}
}

// update changes job id's entry of the index if this leadership still
// holds the Lease and the index, and returns the entry as it was. A
// conflict (another write of this leader, or a successor's claim) reads
// the index again.
func (l *kubeLeadership) update(ctx context.Context, what, id string, change func(*indexEntry) error) (indexEntry, error) {
	cms := l.k.cli.CoreV1().ConfigMaps(l.k.ns)
	for {
		if _, err := l.holds(ctx); err != nil {
			return indexEntry{}, fmt.Errorf("ha: %s: %w", what, err)
		}
		cm, err := l.k.readIndex(ctx)
		if err != nil {
			return indexEntry{}, fmt.Errorf("ha: %s: %w", what, err)
		}
		if cm == nil {
			return indexEntry{}, fmt.Errorf("ha: %s: %w (ConfigMap %s is gone)", what, ErrNotLeader, l.k.indexName())
		}
		if e, err := indexEpoch(cm); err != nil || e != l.epoch {
			return indexEntry{}, fmt.Errorf("ha: %s: %w (epoch %d; the index is claimed at epoch %d)", what, ErrNotLeader, l.epoch, e)
		}
		all, err := entries(cm)
		if err != nil {
			return indexEntry{}, err
		}
		old := all[id]
		e := old
		e.ID = id
		if err := change(&e); err != nil {
			return indexEntry{}, err
		}
		key := indexKey(id)
		if e.empty() {
			delete(cm.Data, key)
		} else {
			b, err := json.Marshal(e)
			if err != nil {
				return indexEntry{}, err
			}
			if cm.Data == nil {
				cm.Data = map[string]string{}
			}
			cm.Data[key] = string(b)
		}
		if _, err := cms.Update(ctx, cm, metav1.UpdateOptions{}); apierrors.IsConflict(err) {
			continue
		} else if err != nil {
			return indexEntry{}, fmt.Errorf("ha: %s: %w", what, err)
		}
		return old, nil
	}
}

// dropJob deletes a job graph no entry points at any more. A failure
// leaves it behind, unread.
func (l *kubeLeadership) dropJob(ctx context.Context, ref *jobRef) {
	var err error
	switch {
	case ref == nil:
		return
	case ref.ConfigMap != "":
		err = l.k.cli.CoreV1().ConfigMaps(l.k.ns).Delete(ctx, ref.ConfigMap, metav1.DeleteOptions{})
		if apierrors.IsNotFound(err) {
			err = nil
		}
	case ref.Blob != "":
		err = l.k.storageDir.remove(ctx, ref.Blob)
	}
	if err != nil {
		l.k.log.Warn("ha: cannot delete a job graph no longer recorded", "configmap", ref.ConfigMap, "blob", ref.Blob, "err", err)
	}
}

// collectGarbage deletes the job graphs that earlier leaders wrote but
// never recorded in the index, as a leader that loses its Lease between
// writing a graph and recording it leaves them: ConfigMaps of this
// cluster, and blobs in high-availability.storageDir, named as job graphs
// of an earlier epoch that no entry points at. A deposed leader cannot
// record anything any more (every index write is fenced by the epoch), so
// these are never read; graphs of this epoch are this leader's own. A
// failure leaves them to the next leader.
func (l *kubeLeadership) collectGarbage(ctx context.Context) {
	k := l.k
	cm, err := k.readIndex(ctx)
	if err != nil {
		k.log.Warn("ha: cannot read the job index to delete unrecorded job graphs", "err", err)
		return
	}
	all, err := entries(cm)
	if err != nil {
		k.log.Warn("ha: cannot read the job index to delete unrecorded job graphs", "err", err)
		return
	}
	recorded := map[jobRef]bool{}
	for _, e := range all {
		if e.Job != nil {
			recorded[*e.Job] = true
		}
	}
	stale := func(name, prefix string) bool {
		rest, ok := strings.CutPrefix(name, prefix)
		if !ok {
			return false
		}
		i := strings.LastIndexByte(rest, '-')
		epoch, err := strconv.ParseInt(rest[i+1:], 10, 64)
		return err == nil && epoch < l.epoch
	}

	cms := k.cli.CoreV1().ConfigMaps(k.ns)
	list, err := cms.List(ctx, metav1.ListOptions{LabelSelector: labelClusterID + "=" + k.clusterID + "," + labelManagedBy + "=weir"})
	if err != nil {
		k.log.Warn("ha: cannot list ConfigMaps to delete unrecorded job graphs", "err", err)
		return
	}
	prefix := "weir-" + k.clusterID + "-job-"
	for _, c := range list.Items {
		if recorded[jobRef{ConfigMap: c.Name}] || !stale(c.Name, prefix) {
			continue
		}
		if err := cms.Delete(ctx, c.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			k.log.Warn("ha: cannot delete an unrecorded job graph", "configmap", c.Name, "err", err)
			continue
		}
		k.log.Info("ha: deleted a job graph an earlier leader wrote but never recorded", "configmap", c.Name)
	}

	if !k.storageDir.set() {
		return
	}
	dir := path.Join(k.clusterID, "jobs") + "/"
	keys, err := k.storageDir.list(ctx, dir)
	if err != nil {
		k.log.Warn("ha: cannot list high-availability.storageDir to delete unrecorded job graphs", "err", err)
		return
	}
	for _, key := range keys {
		if recorded[jobRef{Blob: key}] || !stale(key, dir) {
			continue
		}
		if err := k.storageDir.remove(ctx, key); err != nil {
			k.log.Warn("ha: cannot delete an unrecorded job graph", "blob", key, "err", err)
			continue
		}
		k.log.Info("ha: deleted a job graph an earlier leader wrote but never recorded", "blob", key)
	}
}

type kubeJobs struct{ l *kubeLeadership }

func (s kubeJobs) Put(ctx context.Context, id string, job []byte) error {
	l, k := s.l, s.l.k
	what := "recording job " + id
	if _, err := l.holds(ctx); err != nil {
		return fmt.Errorf("ha: %s: %w", what, err)
	}
	var ref jobRef
	if len(job) > maxInline {
		if !k.storageDir.set() {
			return fmt.Errorf("ha: job %s takes %d bytes, more than a ConfigMap keeps (%d); set high-availability.storageDir", id, len(job), maxInline)
		}
		ref.Blob = path.Join(k.clusterID, "jobs", fmt.Sprintf("%s-%d", id, l.epoch))
		if err := k.storageDir.write(ctx, ref.Blob, job); err != nil {
			return err
		}
	} else {
		ref.ConfigMap = k.jobObject(id, l.epoch)
		cms := k.cli.CoreV1().ConfigMaps(k.ns)
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: ref.ConfigMap, Labels: k.labels()},
			BinaryData: map[string][]byte{"job": job}}
		_, err := cms.Create(ctx, cm, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			// This leader recorded the job before: only it writes names
			// of its epoch.
			var cur *corev1.ConfigMap
			if cur, err = cms.Get(ctx, ref.ConfigMap, metav1.GetOptions{}); err == nil {
				cur.BinaryData = cm.BinaryData
				_, err = cms.Update(ctx, cur, metav1.UpdateOptions{})
			}
		}
		if err != nil {
			return fmt.Errorf("ha: %s in ConfigMap %s: %w", what, ref.ConfigMap, err)
		}
	}
	old, err := l.update(ctx, what, id, func(e *indexEntry) error { e.Job = &ref; return nil })
	if err != nil {
		return err
	}
	if old.Job != nil && *old.Job != ref {
		l.dropJob(ctx, old.Job)
	}
	return nil
}

func (s kubeJobs) Remove(ctx context.Context, id string) error {
	old, err := s.l.update(ctx, "removing job "+id, id, func(e *indexEntry) error { e.Job = nil; return nil })
	if err != nil {
		return err
	}
	s.l.dropJob(ctx, old.Job)
	return nil
}

func (s kubeJobs) List(ctx context.Context) (map[string][]byte, error) { return s.l.k.Jobs(ctx) }

// Jobs returns the recorded jobs, by id.
func (k *Kubernetes) Jobs(ctx context.Context) (map[string][]byte, error) {
	cm, err := k.readIndex(ctx)
	if err != nil {
		return nil, fmt.Errorf("ha: listing jobs: %w", err)
	}
	all, err := entries(cm)
	if err != nil {
		return nil, err
	}
	out := map[string][]byte{}
	for id, e := range all {
		switch {
		case e.Job == nil:
		case e.Job.ConfigMap != "":
			jc, err := k.cli.CoreV1().ConfigMaps(k.ns).Get(ctx, e.Job.ConfigMap, metav1.GetOptions{})
			if err != nil {
				return nil, fmt.Errorf("ha: job %s: ConfigMap %s: %w", id, e.Job.ConfigMap, err)
			}
			b, ok := jc.BinaryData["job"]
			if !ok {
				return nil, fmt.Errorf("ha: job %s: ConfigMap %s has no key job", id, e.Job.ConfigMap)
			}
			out[id] = b
		default:
			b, err := k.storageDir.read(ctx, e.Job.Blob)
			if err != nil {
				return nil, fmt.Errorf("ha: job %s: %w", id, err)
			}
			out[id] = b
		}
	}
	return out, nil
}

type kubeCheckpoints struct{ l *kubeLeadership }

func (s kubeCheckpoints) Put(ctx context.Context, id string, cp CompletedCheckpoint) error {
	_, err := s.l.update(ctx, fmt.Sprintf("recording checkpoint %d of job %s", cp.ID, id), id, func(e *indexEntry) error {
		if e.Checkpoint != nil && e.Checkpoint.ID > cp.ID {
			return fmt.Errorf("ha: checkpoint %d of job %s is older than the recorded %d", cp.ID, id, e.Checkpoint.ID)
		}
		e.Checkpoint = &cp
		return nil
	})
	return err
}

func (s kubeCheckpoints) Latest(ctx context.Context, id string) (CompletedCheckpoint, bool, error) {
	return s.l.k.LatestCheckpoint(ctx, id)
}

func (s kubeCheckpoints) Reserve(ctx context.Context, id string, upTo int64) error {
	_, err := s.l.update(ctx, fmt.Sprintf("reserving checkpoint ids up to %d for job %s", upTo, id), id, func(e *indexEntry) error {
		e.Reserved = upTo
		return nil
	})
	return err
}

func (s kubeCheckpoints) Reserved(ctx context.Context, id string) (int64, error) {
	return s.l.k.ReservedIDs(ctx, id)
}

func (s kubeCheckpoints) Remove(ctx context.Context, id string) error {
	_, err := s.l.update(ctx, "removing the checkpoints of job "+id, id, func(e *indexEntry) error {
		e.Checkpoint, e.Reserved = nil, 0
		return nil
	})
	return err
}

// LatestCheckpoint returns job id's latest completed checkpoint, and
// false if it has none.
func (k *Kubernetes) LatestCheckpoint(ctx context.Context, id string) (CompletedCheckpoint, bool, error) {
	e, err := k.entry(ctx, id)
	if err != nil || e.Checkpoint == nil {
		return CompletedCheckpoint{}, false, err
	}
	return *e.Checkpoint, true, nil
}

// ReservedIDs returns the highest checkpoint id reserved for job id (0:
// none).
func (k *Kubernetes) ReservedIDs(ctx context.Context, id string) (int64, error) {
	e, err := k.entry(ctx, id)
	return e.Reserved, err
}
