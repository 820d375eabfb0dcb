package ha

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"path"
	"strconv"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
	"gocloud.dev/blob"
)

// EtcdOption configures Etcd.
type EtcdOption func(*Etcd)

// WithClusterID sets the cluster's name in etcd (high-availability.cluster-id;
// default "default"): its keys live under /weir/<id>/.
func WithClusterID(id string) EtcdOption { return func(e *Etcd) { e.clusterID = id } }

// WithLeaseTTL sets the leader's lease (default 15 s, at least 1 s; etcd
// counts it in whole seconds, rounded up).
func WithLeaseTTL(d time.Duration) EtcdOption { return func(e *Etcd) { e.ttl = d } }

// WithStorageDir sets where jobs too big for etcd go, a path or a
// gocloud.dev/blob URL (high-availability.storageDir; default: none, and
// such a job is refused).
func WithStorageDir(dir string) EtcdOption { return func(e *Etcd) { e.storageDir.path = dir } }

// WithURLMux opens a storage directory given as a URL; without it,
// gocloud.dev/blob's default mux does, which knows no object store
// options (s3.endpoint, gs.storage.root.url, ...).
func WithURLMux(m *blob.URLMux) EtcdOption { return func(e *Etcd) { e.storageDir.mux = m } }

// WithLogger sets the logger (default slog.Default()).
func WithLogger(l *slog.Logger) EtcdOption { return func(e *Etcd) { e.log = l } }

// WithDialTimeout bounds each connection attempt to etcd (default 5 s).
func WithDialTimeout(d time.Duration) EtcdOption { return func(e *Etcd) { e.dialTimeout = d } }

// maxInline is the largest job kept in etcd itself; a larger one goes to
// the storage directory (etcd's requests are limited to 1.5 MiB).
const maxInline = 512 << 10

// Etcd implements Services with etcd.
type Etcd struct {
	cli         *clientv3.Client
	clusterID   string
	ttl         time.Duration
	storageDir  blobDir
	dialTimeout time.Duration
	log         *slog.Logger
}

// NewEtcd connects to etcd at endpoints. It does not wait for etcd: calls
// wait, within their context, for it to answer.
func NewEtcd(endpoints []string, opts ...EtcdOption) (*Etcd, error) {
	e := &Etcd{clusterID: "default", ttl: 15 * time.Second, dialTimeout: 5 * time.Second, log: slog.Default()}
	for _, o := range opts {
		o(e)
	}
	if len(endpoints) == 0 {
		return nil, errors.New("ha: no etcd endpoints")
	}
	if e.ttl < time.Second {
		return nil, fmt.Errorf("ha: lease TTL %s is below 1 s", e.ttl)
	}
	if strings.Trim(e.clusterID, "/") == "" {
		return nil, fmt.Errorf("ha: cluster id %q is empty", e.clusterID)
	}
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:   endpoints,
		DialTimeout: e.dialTimeout,
		// Keep-alive pings notice a dead connection while a watch is idle.
		DialKeepAliveTime:    5 * time.Second,
		DialKeepAliveTimeout: 5 * time.Second,
		Logger:               quietZap(),
	})
	if err != nil {
		return nil, fmt.Errorf("ha: connecting to etcd %s: %w", strings.Join(endpoints, ","), err)
	}
	e.cli = cli
	return e, nil
}

// Close implements Services.
func (e *Etcd) Close() error { return e.cli.Close() }

func (e *Etcd) prefix() string                 { return "/weir/" + strings.Trim(e.clusterID, "/") + "/" }
func (e *Etcd) leaderPrefix() string           { return e.prefix() + "leader/" }
func (e *Etcd) jobKey(id string) string        { return e.prefix() + "jobs/" + id }
func (e *Etcd) checkpointKey(id string) string { return e.prefix() + "checkpoints/" + id }
func (e *Etcd) idsKey(id string) string        { return e.prefix() + "checkpoint-ids/" + id }

// Campaign implements Services.
func (e *Etcd) Campaign(ctx context.Context, info LeaderInfo) (Leadership, error) {
	val, err := json.Marshal(info)
	if err != nil {
		return nil, err
	}
	ttl := int(math.Ceil(e.ttl.Seconds()))
	for {
		sess, err := concurrency.NewSession(e.cli, concurrency.WithTTL(ttl), concurrency.WithContext(ctx))
		if err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			e.log.Warn("ha: cannot open an etcd session; retrying", "err", err)
			if !sleep(ctx, time.Second) {
				return nil, ctx.Err()
			}
			continue
		}
		el := concurrency.NewElection(sess, e.leaderPrefix())
		if err := el.Campaign(ctx, string(val)); err != nil {
			sess.Close()
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			e.log.Warn("ha: campaign failed; retrying", "err", err)
			if !sleep(ctx, time.Second) {
				return nil, ctx.Err()
			}
			continue
		}
		l := &etcdLeadership{e: e, sess: sess, el: el, key: el.Key(), rev: el.Rev()}
		// The lease may have expired while the campaign waited: then the
		// key is gone and so is the leadership.
		if ok, err := l.holds(ctx); err != nil || !ok {
			sess.Close()
			e.log.Warn("ha: the election key vanished as the campaign ended; campaigning again", "err", err)
			continue
		}
		return l, nil
	}
}

func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// Leader implements Services: the owner of the oldest key under the
// election prefix, as the election itself decides.
func (e *Etcd) Leader(ctx context.Context) (LeaderInfo, bool, error) {
	resp, err := e.cli.Get(ctx, e.leaderPrefix(), clientv3.WithFirstCreate()...)
	if err != nil {
		return LeaderInfo{}, false, fmt.Errorf("ha: reading the leader: %w", err)
	}
	if len(resp.Kvs) == 0 {
		return LeaderInfo{}, false, nil
	}
	kv := resp.Kvs[0]
	var info LeaderInfo
	if err := json.Unmarshal(kv.Value, &info); err != nil {
		return LeaderInfo{}, false, fmt.Errorf("ha: the leader's record %s: %w", kv.Key, err)
	}
	info.Epoch = kv.CreateRevision
	return info, true, nil
}

// WatchLeader implements Services. A change of the election keys sends
// the leader again if it changed; a broken watch is reopened.
func (e *Etcd) WatchLeader(ctx context.Context) <-chan LeaderInfo {
	ch := make(chan LeaderInfo, 1)
	go func() {
		defer close(ch)
		var last int64
		for ctx.Err() == nil {
			wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
			w := e.cli.Watch(wctx, e.leaderPrefix(), clientv3.WithPrefix())
			for {
				info, ok, err := e.Leader(ctx)
				if err == nil && ok && info.Epoch != last {
					last = info.Epoch
					select {
					case ch <- info:
					case <-ctx.Done():
						cancel()
						return
					}
				}
				if err != nil {
					break
				}
				resp, open := <-w
				if !open || resp.Err() != nil {
					break
				}
			}
			cancel()
			sleep(ctx, 500*time.Millisecond)
		}
	}()
	return ch
}

// etcdLeadership is a won election.
type etcdLeadership struct {
	e    *Etcd
	sess *concurrency.Session
	el   *concurrency.Election
	key  string
	rev  int64
}

func (l *etcdLeadership) Epoch() int64                 { return l.rev }
func (l *etcdLeadership) Lost() <-chan struct{}        { return l.sess.Done() }
func (l *etcdLeadership) Jobs() JobGraphStore          { return jobStore{l} }
func (l *etcdLeadership) Checkpoints() CheckpointStore { return checkpointStore{l} }

// Resign implements Leadership.
func (l *etcdLeadership) Resign(ctx context.Context) error {
	err := l.el.Resign(ctx)
	l.sess.Close()
	return err
}

// held is the fence of every write: the election key still exists with
// the revision it was created at.
func (l *etcdLeadership) held() clientv3.Cmp {
	return clientv3.Compare(clientv3.CreateRevision(l.key), "=", l.rev)
}

func (l *etcdLeadership) holds(ctx context.Context) (bool, error) {
	resp, err := l.e.cli.Txn(ctx).If(l.held()).Commit()
	if err != nil {
		return false, err
	}
	return resp.Succeeded, nil
}

// fenced runs ops if the leadership still holds, and extra conditions.
func (l *etcdLeadership) fenced(ctx context.Context, what string, cmps []clientv3.Cmp, ops ...clientv3.Op) error {
	resp, err := l.e.cli.Txn(ctx).If(append([]clientv3.Cmp{l.held()}, cmps...)...).Then(ops...).Commit()
	if err != nil {
		return fmt.Errorf("ha: %s: %w", what, err)
	}
	if !resp.Succeeded {
		return fmt.Errorf("ha: %s: %w (epoch %d)", what, ErrNotLeader, l.rev)
	}
	return nil
}

// A job's record in etcd is a tag byte and either the job itself or the
// key of the blob holding it under the storage directory.
const (
	tagInline = 'i'
	tagBlob   = 'b'
)

type jobStore struct{ l *etcdLeadership }

func (s jobStore) Put(ctx context.Context, id string, job []byte) error {
	e := s.l.e
	rec := append([]byte{tagInline}, job...)
	if len(job) > maxInline {
		if !e.storageDir.set() {
			return fmt.Errorf("ha: job %s takes %d bytes, more than etcd keeps (%d); set high-availability.storageDir", id, len(job), maxInline)
		}
		key := path.Join(strings.Trim(e.clusterID, "/"), "jobs", fmt.Sprintf("%s-%d", id, s.l.rev))
		if err := e.storageDir.write(ctx, key, job); err != nil {
			return err
		}
		rec = append([]byte{tagBlob}, key...)
	}
	return s.l.fenced(ctx, "recording job "+id, nil, clientv3.OpPut(e.jobKey(id), string(rec)))
}

func (s jobStore) Remove(ctx context.Context, id string) error {
	return s.l.fenced(ctx, "removing job "+id, nil, clientv3.OpDelete(s.l.e.jobKey(id)))
}

func (s jobStore) List(ctx context.Context) (map[string][]byte, error) { return s.l.e.Jobs(ctx) }

// Jobs returns the recorded jobs, by id.
func (e *Etcd) Jobs(ctx context.Context) (map[string][]byte, error) {
	resp, err := e.cli.Get(ctx, e.prefix()+"jobs/", clientv3.WithPrefix())
	if err != nil {
		return nil, fmt.Errorf("ha: listing jobs: %w", err)
	}
	out := make(map[string][]byte, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		id := strings.TrimPrefix(string(kv.Key), e.prefix()+"jobs/")
		if len(kv.Value) == 0 {
			return nil, fmt.Errorf("ha: job %s: empty record", id)
		}
		switch kv.Value[0] {
		case tagInline:
			out[id] = bytes.Clone(kv.Value[1:])
		case tagBlob:
			b, err := e.storageDir.read(ctx, string(kv.Value[1:]))
			if err != nil {
				return nil, fmt.Errorf("ha: job %s: %w", id, err)
			}
			out[id] = b
		default:
			return nil, fmt.Errorf("ha: job %s: unknown record", id)
		}
	}
	return out, nil
}

type checkpointStore struct{ l *etcdLeadership }

func (s checkpointStore) Put(ctx context.Context, id string, cp CompletedCheckpoint) error {
	e := s.l.e
	key := e.checkpointKey(id)
	resp, err := e.cli.Get(ctx, key)
	if err != nil {
		return fmt.Errorf("ha: recording checkpoint %d of job %s: %w", cp.ID, id, err)
	}
	cmp := clientv3.Compare(clientv3.ModRevision(key), "=", 0)
	if len(resp.Kvs) > 0 {
		var old CompletedCheckpoint
		if err := json.Unmarshal(resp.Kvs[0].Value, &old); err == nil && old.ID > cp.ID {
			return fmt.Errorf("ha: checkpoint %d of job %s is older than the recorded %d", cp.ID, id, old.ID)
		}
		cmp = clientv3.Compare(clientv3.ModRevision(key), "=", resp.Kvs[0].ModRevision)
	}
	b, err := json.Marshal(cp)
	if err != nil {
		return err
	}
	// The record changing between the read and the write means another
	// writer, hence another leader: the failure reads ErrNotLeader.
	return s.l.fenced(ctx, fmt.Sprintf("recording checkpoint %d of job %s", cp.ID, id), []clientv3.Cmp{cmp}, clientv3.OpPut(key, string(b)))
}

func (s checkpointStore) Latest(ctx context.Context, id string) (CompletedCheckpoint, bool, error) {
	return s.l.e.LatestCheckpoint(ctx, id)
}

func (s checkpointStore) Remove(ctx context.Context, id string) error {
	return s.l.fenced(ctx, "removing the checkpoints of job "+id, nil,
		clientv3.OpDelete(s.l.e.checkpointKey(id)), clientv3.OpDelete(s.l.e.idsKey(id)))
}

func (s checkpointStore) Reserve(ctx context.Context, id string, upTo int64) error {
	return s.l.fenced(ctx, fmt.Sprintf("reserving checkpoint ids up to %d for job %s", upTo, id), nil,
		clientv3.OpPut(s.l.e.idsKey(id), strconv.FormatInt(upTo, 10)))
}

func (s checkpointStore) Reserved(ctx context.Context, id string) (int64, error) {
	return s.l.e.ReservedIDs(ctx, id)
}

// ReservedIDs returns the highest checkpoint id reserved for job id (0:
// none).
func (e *Etcd) ReservedIDs(ctx context.Context, id string) (int64, error) {
	resp, err := e.cli.Get(ctx, e.idsKey(id))
	if err != nil {
		return 0, fmt.Errorf("ha: reading the checkpoint ids reserved for job %s: %w", id, err)
	}
	if len(resp.Kvs) == 0 {
		return 0, nil
	}
	n, err := strconv.ParseInt(string(resp.Kvs[0].Value), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("ha: the checkpoint ids reserved for job %s: %w", id, err)
	}
	return n, nil
}

// LatestCheckpoint returns job id's latest completed checkpoint, and
// false if it has none.
func (e *Etcd) LatestCheckpoint(ctx context.Context, id string) (CompletedCheckpoint, bool, error) {
	resp, err := e.cli.Get(ctx, e.checkpointKey(id))
	if err != nil {
		return CompletedCheckpoint{}, false, fmt.Errorf("ha: reading the latest checkpoint of job %s: %w", id, err)
	}
	if len(resp.Kvs) == 0 {
		return CompletedCheckpoint{}, false, nil
	}
	var cp CompletedCheckpoint
	if err := json.Unmarshal(resp.Kvs[0].Value, &cp); err != nil {
		return CompletedCheckpoint{}, false, fmt.Errorf("ha: the latest checkpoint of job %s: %w", id, err)
	}
	return cp, true, nil
}
