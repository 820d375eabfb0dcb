package clustercli

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/weirstream/weir/config"
	"github.com/weirstream/weir/internal/cluster"
	"github.com/weirstream/weir/internal/ha"
)

// openHA connects to the high availability services cfg configures
// (high-availability.type etcd), or returns nil with none.
func openHA(cfg *config.Configuration, logger *slog.Logger) (*ha.Etcd, error) {
	hc, err := cfg.HighAvailability()
	if err != nil {
		return nil, err
	}
	if hc.Type != config.HAEtcd {
		return nil, nil
	}
	return ha.NewEtcd(hc.EtcdEndpoints, ha.WithClusterID(hc.ClusterID), ha.WithLeaseTTL(hc.LeaseTTL),
		ha.WithStorageDir(hc.StorageDir), ha.WithLogger(logger))
}

// leaderWait bounds how long a client waits for a leader to be elected.
const leaderWait = time.Minute

// resolver returns how a client finds the job manager: at jmAddr, or,
// with high availability, wherever the leader is, as etcd says (waiting
// up to a minute for an election). The function it returns is asked again
// when a call fails, to follow a new leader.
func resolver(cfg *config.Configuration, jmAddr string) (resolve func(ctx context.Context) (string, error), closeFn func(), err error) {
	svc, err := openHA(cfg, slog.New(slog.DiscardHandler))
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
					return "", fmt.Errorf("finding the leading job manager in etcd (%s): %w", config.KeyHAEtcdEndpoints, err)
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

// watchLeader follows the cluster's leader in etcd.
func watchLeader(ctx context.Context, svc *ha.Etcd) *standbyState {
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
func leadWhenElected(ctx context.Context, logger *slog.Logger, svc *ha.Etcd, jm *cluster.JobManager, standby *standbyState,
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
		lost(errors.New("the leader's lease in etcd expired or could not be renewed"))
	case <-ctx.Done():
		rctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		err := l.Resign(rctx)
		cancel()
		logger.Info("stopped: leadership handed over to a standby; the jobs are not canceled", "resign_err", err)
		exit(0)
	case err := <-served:
		return err
	}
	return nil
}
