package clustercli

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync/atomic"
	"time"

	"github.com/weirstream/weir/config"
	"github.com/weirstream/weir/internal/cluster"
	"github.com/weirstream/weir/internal/ha"
	"github.com/weirstream/weir/internal/objstore"
	"k8s.io/client-go/kubernetes"
)

// openHA connects to the high availability services cfg configures
// (high-availability.type etcd or kubernetes), or returns nil with none.
func openHA(ctx context.Context, cfg *config.Configuration, logger *slog.Logger) (ha.Services, error) {
	hc, err := cfg.HighAvailability()
	if err != nil {
		return nil, err
	}
	switch hc.Type {
	case config.HAEtcd:
		return ha.NewEtcd(hc.EtcdEndpoints, ha.WithClusterID(hc.ClusterID), ha.WithLeaseTTL(hc.LeaseTTL),
			ha.WithStorageDir(hc.StorageDir), ha.WithURLMux(objstore.URLMux(cfg)), ha.WithLogger(logger))
	case config.HAKubernetes:
		k := hc.Kubernetes
		cli, ns := kubeClientFrom(ctx)
		if cli == nil {
			if cli, ns, err = ha.KubernetesClient(k.ConfigFile); err != nil {
				return nil, fmt.Errorf("%s kubernetes: %w", config.KeyHAType, err)
			}
		}
		if k.Namespace != "" {
			ns = k.Namespace
		}
		return ha.NewKubernetes(cli, ns, ha.WithKubernetesClusterID(k.ClusterID),
			ha.WithLeaseDuration(k.LeaseDuration), ha.WithRenewDeadline(k.RenewDeadline), ha.WithRetryPeriod(k.RetryPeriod),
			ha.WithKubernetesStorageDir(hc.StorageDir), ha.WithKubernetesURLMux(objstore.URLMux(cfg)), ha.WithKubernetesLogger(logger))
	}
	return nil, nil
}

// kubeClientKey carries, in tests, the Kubernetes API that
// high-availability.type kubernetes uses instead of the pod's or the
// kubeconfig's.
type kubeClientKey struct{}

type kubeClient struct {
	cli kubernetes.Interface
	ns  string
}

// withKubeClient makes openHA use cli, in namespace ns (unless
// kubernetes.namespace is set).
func withKubeClient(ctx context.Context, cli kubernetes.Interface, ns string) context.Context {
	return context.WithValue(ctx, kubeClientKey{}, kubeClient{cli, ns})
}

func kubeClientFrom(ctx context.Context) (kubernetes.Interface, string) {
	if ctx == nil {
		return nil, ""
	}
	c, _ := ctx.Value(kubeClientKey{}).(kubeClient)
	return c.cli, c.ns
}

// haWhere names where the leader is found, for messages.
func haWhere(cfg *config.Configuration) string {
	hc, _ := cfg.HighAvailability()
	if hc.Type == config.HAKubernetes {
		return "the Kubernetes Lease weir-" + hc.Kubernetes.ClusterID + "-leader"
	}
	return "etcd " + cfg.String(config.KeyHAEtcdEndpoints)
}

// leaderWait bounds how long a client waits for a leader to be elected.
const leaderWait = time.Minute

// resolver returns how a client finds the job manager: at jmAddr, or,
// with high availability, wherever the leader is, as etcd or the
// Kubernetes Lease says (waiting
// up to a minute for an election). The function it returns is asked again
// when a call fails, to follow a new leader.
func resolver(ctx context.Context, cfg *config.Configuration, jmAddr string) (resolve func(ctx context.Context) (string, error), closeFn func(), err error) {
	svc, err := openHA(ctx, cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		return nil, nil, err
	}
	if svc == nil {
		return func(context.Context) (string, error) { return jmAddr, nil }, func() {}, nil
	}
	return func(ctx context.Context) (string, error) {
		ctx, cancel := context.WithTimeout(ctx, leaderWait)
		defer cancel()
		for {
			info, ok, err := svc.Leader(ctx)
			if err == nil && ok {
				return info.Addr, nil
			}
			select {
			case <-ctx.Done():
				if err != nil {
					return "", fmt.Errorf("finding the leading job manager in %s: %w", haWhere(cfg), err)
				}
				return "", fmt.Errorf("no job manager leads the cluster (%s %s): none was elected within %s", config.KeyHAClusterID, cfg.String(config.KeyHAClusterID), leaderWait)
			case <-time.After(200 * time.Millisecond):
			}
		}
	}, func() { svc.Close() }, nil
}

// standbyState is what a job manager knows of the leader while it is a
// standby, and whether it leads.
type standbyState struct {
	leader  atomic.Pointer[ha.LeaderInfo]
	leading atomic.Bool
}

// watchLeader follows the cluster's leader.
func watchLeader(ctx context.Context, svc ha.Services) *standbyState {
	s := &standbyState{}
	go func() {
		for info := range svc.WatchLeader(ctx) {
			s.leader.Store(&info)
		}
	}()
	return s
}

// rpc returns the leader's RPC address ("" while none is known).
func (s *standbyState) rpc() string {
	if l := s.leader.Load(); l != nil {
		return l.Addr
	}
	return ""
}

// rest reports whether this job manager is a standby, and the leader's
// REST address.
func (s *standbyState) rest() (string, bool) {
	if s.leading.Load() {
		return "", false
	}
	if l := s.leader.Load(); l != nil {
		return l.RESTAddr, true
	}
	return "", true
}

// leadWhenElected campaigns for the leadership and, once elected, makes
// jm lead: it recovers the jobs of the job graph store. The process exits
// (exit) when the leadership is lost, or when ctx is done (the job
// manager is stopped), after resigning: the jobs are not canceled, for
// the successor recovers them, and canceling would discard their
// checkpoints. served receives what jm.Serve returns.
func leadWhenElected(ctx context.Context, logger *slog.Logger, svc ha.Services, jm *cluster.JobManager, standby *standbyState,
	me ha.LeaderInfo, served <-chan error, exit func(int)) error {
	type won struct {
		l   ha.Leadership
		err error
	}
	elected := make(chan won, 1)
	go func() {
		l, err := svc.Campaign(ctx, me)
		elected <- won{l, err}
	}()
	var l ha.Leadership
	select {
	case err := <-served:
		return err
	case w := <-elected:
		if w.err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return w.err
		}
		l = w.l
	}
	standby.leading.Store(true)
	lost := func(err error) {
		logger.Error("exiting: this job manager no longer leads the cluster; its successor recovers the jobs", "err", err)
		exit(1)
	}
	if err := jm.Lead(ctx, l, lost); err != nil {
		logger.Error("recovering the jobs", "err", err)
		lost(err)
	}
	select {
	case <-l.Lost():
		lost(errors.New("the leader's lease expired or could not be renewed"))
		return nil
	case <-ctx.Done():
	case err := <-served:
		// Serve returns when ctx is done too: a stop that it reports
		// first is still a stop, which resigns.
		if ctx.Err() == nil {
			return err
		}
	}
	rctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	err := l.Resign(rctx)
	cancel()
	logger.Info("stopped: leadership handed over to a standby; the jobs are not canceled", "resign_err", err)
	exit(0)
	return nil
}

// advertisedREST is the REST address a leader publishes: host (rest.address)
// with the port the REST API listens on at listening, or listening
// itself. A wildcard host (0.0.0.0, ::) no client can reach is refused.
func advertisedREST(listening, host string) (string, error) {
	if listening == "" {
		return "", nil
	}
	lh, port, err := net.SplitHostPort(listening)
	if err != nil {
		return "", fmt.Errorf("the REST API's address %s: %w", listening, err)
	}
	if host != "" {
		return net.JoinHostPort(host, port), nil
	}
	if ip := net.ParseIP(lh); ip != nil && ip.IsUnspecified() {
		return "", fmt.Errorf("the REST API listens on every interface (%s %s), which a standby cannot redirect clients to: set %s to the address they reach this job manager at (in Kubernetes, the pod's IP)", config.KeyRESTBindAddress, lh, config.KeyRESTAddress)
	}
	return listening, nil
}
