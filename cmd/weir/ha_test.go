package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/weirstream/weir/internal/cluster"
	"github.com/weirstream/weir/internal/clustercli"
	"github.com/weirstream/weir/internal/ha"
)

// The high availability tests run a real etcd in the test process
// (go.etcd.io/etcd/server/v3/embed on loopback) and weir's job managers
// and task managers as processes: two job managers, one the leader and
// one a standby, with a lease of 2 s, and four task managers following
// the leader through etcd. The leader dies (SIGKILL), is paused past its
// lease (SIGSTOP, SIGCONT), or exits between recording a checkpoint and
// its sinks committing it; etcd itself is stopped and started again. The
// job continues without a person and GatewayMeter's outputs must match
// the oracle exactly.

// haCluster is etcd, job managers and task managers.
type haCluster struct {
	dir      string
	etcdDir  string
	etcd     *ha.Server
	peer     string
	haArgs   []string
	jms      []*proc
	jmAddrs  []string
	tms      []*proc
	services *ha.Etcd
}

var haListeningRE = regexp.MustCompile(`job manager listening on (\S+) \(advertised`)

func startHACluster(t *testing.T, jobManagers, taskManagers int, jmArgs ...[]string) *haCluster {
	t.Helper()
	c := &haCluster{dir: t.TempDir()}
	c.etcdDir = filepath.Join(c.dir, "etcd")
	peer, err := freePort()
	if err != nil {
		t.Fatal(err)
	}
	c.peer = peer
	c.etcd, err = ha.StartServer(c.etcdDir, "127.0.0.1:0", peer, ha.ServerLogLevel("panic"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if c.etcd != nil {
			c.etcd.Close()
		}
	})
	c.haArgs = []string{"-D", "high-availability.type=etcd", "-D", "high-availability.etcd.endpoints=" + c.etcd.Endpoint,
		"-D", "high-availability.etcd.lease-ttl=2 s", "-D", "high-availability.cluster-id=" + filepath.Base(c.dir)}
	c.services, err = ha.NewEtcd([]string{c.etcd.Endpoint}, ha.WithClusterID(filepath.Base(c.dir)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.services.Close() })
	for i := range jobManagers {
		var extra []string
		if i < len(jmArgs) {
			extra = jmArgs[i]
		}
		p := c.addJobManager(t, extra...)
		if i == 0 {
			// The first job manager leads: the tests know which.
			p.waitLog(t, leadingRE, 1)
		}
	}
	for i := range taskManagers {
		p := startProc(t, c.dir, fmt.Sprintf("taskmanager-%d", i+1), append([]string{"taskmanager", "--slots", "2", "--id", fmt.Sprintf("tm-%02d", i+1),
			"-D", "heartbeat.interval=200 ms", "-D", "heartbeat.timeout=10 s"}, c.haArgs...)...)
		c.tms = append(c.tms, p)
	}
	c.waitTaskManagers(t, taskManagers)
	return c
}

func freePort() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

func (c *haCluster) addJobManager(t *testing.T, extra ...string) *proc {
	t.Helper()
	n := len(c.jms) + 1
	args := append([]string{"jobmanager", "--listen", "127.0.0.1:0", "-D", "heartbeat.interval=200 ms", "-D", "heartbeat.timeout=10 s", "-D", "rest.port=0"}, c.haArgs...)
	p := startProc(t, c.dir, fmt.Sprintf("jobmanager-%d", n), append(args, extra...)...)
	c.jms = append(c.jms, p)
	c.jmAddrs = append(c.jmAddrs, p.waitLog(t, haListeningRE, 1)[0][1])
	return p
}

// leader returns the leading job manager's process and address, waiting
// for one to be elected.
func (c *haCluster) leader(t *testing.T) (*proc, ha.LeaderInfo) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		info, ok, err := c.services.Leader(ctx)
		cancel()
		if err == nil && ok {
			for i, a := range c.jmAddrs {
				if a == info.Addr {
					return c.jms[i], info
				}
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no job manager leads within 60 s (%v)", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// list lists the cluster at its current leader.
func (c *haCluster) list(t *testing.T) (cluster.Overview, error) {
	t.Helper()
	_, info := c.leader(t)
	cl, err := cluster.Dial(info.Addr, cluster.WithToken(os.Getenv(clustercli.EnvClusterAuthToken)))
	if err != nil {
		return cluster.Overview{}, err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return cl.List(ctx)
}

func (c *haCluster) waitTaskManagers(t *testing.T, n int) {
	t.Helper()
	waitForTaskManagers(t, n, func() (cluster.Overview, error) { return c.list(t) })
}

// haJob is GatewayMeter submitted to the cluster.
type haJob struct {
	id, trace, out, ckpt string
}

// submit submits GatewayMeter through the standby's address: the client
// finds the leader in etcd.
func (c *haCluster) submit(t *testing.T) *haJob {
	t.Helper()
	j := &haJob{trace: filepath.Join(c.dir, "trace"), out: filepath.Join(c.dir, "out"), ckpt: filepath.Join(c.dir, "checkpoints")}
	gen := exec.Command(weirBinary(t), "gen", "gatewaymeter", "--seed", "11", "--requests", "6000", "--partitions", "8",
		"--tenants", "20", "--bad-rate", "0.01", "--out", j.trace)
	if out, err := gen.CombinedOutput(); err != nil {
		t.Fatalf("weir gen: %v\n%s", err, out)
	}
	leader, _ := c.leader(t)
	via := ""
	for i, p := range c.jms {
		if p != leader {
			via = c.jmAddrs[i]
		}
	}
	args := append([]string{"run", "-m", via, "-d", "gatewaymeter", "--input", j.trace, "--output", j.out,
		"--checkpoint-dir", j.ckpt, "--input-rate", "200",
		"-D", "execution.checkpointing.interval=1 s",
		"-D", "restart-strategy.type=fixed-delay", "-D", "restart-strategy.fixed-delay.attempts=10",
		"-D", "restart-strategy.fixed-delay.delay=200 ms"}, c.haArgs...)
	out, err := exec.Command(weirBinary(t), args...).CombinedOutput()
	if err != nil {
		t.Fatalf("weir run -m: %v\n%s", err, out)
	}
	m := regexp.MustCompile(`as job ([0-9a-f]+) to (\S+)`).FindSubmatch(out)
	if m == nil {
		t.Fatalf("weir run -m printed no job id:\n%s", out)
	}
	if _, info := c.leader(t); string(m[2]) != info.Addr {
		t.Fatalf("submitted to %s, not to the leader %s", m[2], info.Addr)
	}
	j.id = string(m[1])
	return j
}

var recordedRE = regexp.MustCompile(`time=(\S+) level=INFO msg="recorded completed checkpoint" job_id=\S+ checkpoint=(\d+)`)

// waitRecorded waits until p has recorded n completed checkpoints.
func waitRecorded(t *testing.T, p *proc, n int) {
	t.Helper()
	p.waitLog(t, recordedRE, n)
}

// finish waits for the job to finish at whichever job manager leads and
// verifies the outputs against the oracle.
func (c *haCluster) finish(t *testing.T, j *haJob) {
	t.Helper()
	c.waitFinished(t, j.id)
	out, err := exec.Command(weirBinary(t), "verify", "gatewaymeter", "--input", j.trace, "--output", j.out).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "exact match") {
		t.Fatalf("weir verify: %v\n%s", err, out)
	}
}

// waitFinished waits for job id to end at whichever job manager leads,
// and requires FINISHED.
func (c *haCluster) waitFinished(t *testing.T, id string) {
	t.Helper()
	deadline := time.Now().Add(3 * time.Minute)
	for {
		ov, err := c.list(t)
		var st cluster.JobStatus
		for _, js := range ov.Jobs {
			if js.JobID == id {
				st = js
			}
		}
		if err == nil && st.Ended() {
			if st.State != "FINISHED" {
				t.Fatalf("job ended %s: %s", st.State, st.Error)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("job %s still %q after 3 minutes (%v)", id, st.State, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// logTime returns the time of the first line of p's log matching re.
func logTime(t *testing.T, p *proc, re *regexp.Regexp) time.Time {
	t.Helper()
	m := p.waitLog(t, re, 1)
	ts, err := time.Parse(time.RFC3339Nano, m[0][1])
	if err != nil {
		t.Fatal(err)
	}
	return ts
}

var (
	leadingRE       = regexp.MustCompile(`time=(\S+) level=INFO msg="leading the cluster"`)
	haRestoredRE    = regexp.MustCompile(`time=(\S+) level=INFO msg="restored from checkpoint" job_id=\S+ checkpoint=(\d+)`)
	recoveringJobRE = regexp.MustCompile(`msg="recovering job" job_id=(\S+) job=\S+ checkpoint=(\d+)`)
	deployingRE     = regexp.MustCompile(`msg=deploying `)
	recordedAnyRE   = regexp.MustCompile(`msg="recorded completed checkpoint"`)
)

var restListeningRE = regexp.MustCompile(`msg="REST API listening" addr=(\S+)`)

// checkStandby checks that the standby answers clients with the leader:
// its RPC refuses with the leader's address, its REST API redirects to
// the leader's.
func (c *haCluster) checkStandby(t *testing.T, leader ha.LeaderInfo) {
	t.Helper()
	lp, _ := c.leader(t)
	standby := c.other(lp)
	addr := ""
	for i, p := range c.jms {
		if p == standby {
			addr = c.jmAddrs[i]
		}
	}
	cl, err := cluster.Dial(addr)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if _, err := cl.List(context.Background()); err == nil || !strings.Contains(err.Error(), "standby") || !strings.Contains(err.Error(), leader.Addr) {
		t.Errorf("the standby's List: %v, want a refusal naming the leader %s", err, leader.Addr)
	}
	rest := standby.waitLog(t, restListeningRE, 1)[0][1]
	hc := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := hc.Get("http://" + rest + "/jobs/overview")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if want := "http://" + leader.RESTAddr + "/jobs/overview"; resp.StatusCode != http.StatusTemporaryRedirect || resp.Header.Get("Location") != want ||
		!strings.Contains(string(body), `"errors"`) || !strings.Contains(string(body), leader.RESTAddr) {
		t.Errorf("the standby's REST API answered %s, Location %q, %s; want a redirect to %s", resp.Status, resp.Header.Get("Location"), body, want)
	}
}

func (c *haCluster) other(p *proc) *proc {
	for _, q := range c.jms {
		if q != p {
			return q
		}
	}
	return nil
}

// TestHAKillLeader: SIGKILL the leading job manager once it has recorded
// two checkpoints; the standby takes over when the lease expires,
// recovers the job from its latest completed checkpoint and the outputs
// match the oracle exactly. It reports the takeover time: detection (the
// lease expiring and the standby winning), recovery (the job restored)
// and replay (the first checkpoint completed by the new leader).
func TestHAKillLeader(t *testing.T) {
	skipClusterUnlessEnabled(t)
	c := startHACluster(t, 2, 4)
	j := c.submit(t)
	old, info := c.leader(t)
	c.checkStandby(t, info)
	waitRecorded(t, old, 2)
	reserved, err := c.services.ReservedIDs(context.Background(), j.id)
	if err != nil || reserved == 0 {
		t.Fatalf("no checkpoint ids reserved for the job: %d, %v", reserved, err)
	}
	old.kill(t)
	killed := time.Now()
	next := c.other(old)
	c.finish(t, j)
	won := logTime(t, next, leadingRE)
	restored := logTime(t, next, haRestoredRE)
	replayed := logTime(t, next, recordedRE)
	if first, _ := strconv.ParseInt(next.waitLog(t, recordedRE, 1)[0][2], 10, 64); first <= reserved {
		t.Errorf("the new leader's first checkpoint is %d, within the ids its predecessor reserved (up to %d)", first, reserved)
	}
	rec := next.waitLog(t, recoveringJobRE, 1)[0]
	if rec[1] != j.id || rec[2] == "0" {
		t.Fatalf("the new leader recovered %q from checkpoint %s, want job %s from a completed checkpoint", rec[1], rec[2], j.id)
	}
	// The recovered checkpoint is the job's own: once the new leader
	// has completed a newer one (num-retained is 1) it is deleted, as it
	// would have been under the old leader.
	if _, err := os.Stat(filepath.Join(j.ckpt, j.id, "chk-"+rec[2], "_metadata")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the recovered checkpoint %s is still complete after the job finished (%v): the new leader did not take it over", rec[2], err)
	}
	// A client given the dead leader's address finds the new one in etcd.
	dead := c.jmAddrs[0]
	if old == c.jms[1] {
		dead = c.jmAddrs[1]
	}
	out, err := exec.Command(weirBinary(t), append([]string{"list", "-m", dead}, c.haArgs...)...).CombinedOutput()
	if err != nil || !regexp.MustCompile(j.id+`\s+gatewaymeter\s+FINISHED`).Match(out) {
		t.Errorf("weir list after the takeover: %v\n%s", err, out)
	}
	t.Logf("takeover after SIGKILL of the leader (lease 2 s): detection %v, recovery %v, first checkpoint %v after the kill; recovered from checkpoint %s",
		won.Sub(killed).Round(time.Millisecond), restored.Sub(killed).Round(time.Millisecond), replayed.Sub(killed).Round(time.Millisecond), rec[2])
}

// TestHALeaderDiesBeforeSinkCommit: the leader exits, as if killed, right
// after recording checkpoint 3 in etcd and before notifying the subtasks,
// so no sink committed checkpoint 3's transactions. The new leader
// restores checkpoint 3, whose sinks commit them on restore; the outputs
// are exact (no loss, no duplicate).
func TestHALeaderDiesBeforeSinkCommit(t *testing.T) {
	skipClusterUnlessEnabled(t)
	c := startHACluster(t, 2, 4, []string{"--exit-after-recording", "3"})
	first := c.jms[0]
	// The first job manager leads: the second waits until it does.
	if p, _ := c.leader(t); p != first {
		t.Fatalf("job manager %s leads; the test needs the first", p.name)
	}
	j := c.submit(t)
	<-first.done
	if !strings.Contains(first.output(), "exiting at once after recording checkpoint 3") {
		t.Fatalf("the leader ended without the injected exit:\n%s", tail([]byte(first.output()), 2000))
	}
	c.finish(t, j)
	rec := c.jms[1].waitLog(t, recoveringJobRE, 1)[0]
	if rec[2] != "3" {
		t.Fatalf("the new leader recovered from checkpoint %s, want 3", rec[2])
	}
}

// TestHAPausedLeaderIsFenced: SIGSTOP the leader past its lease; the
// standby takes over and the job runs on under it; then SIGCONT the old
// leader. It must not act: it deploys nothing, records no checkpoint
// (so no sink commits for it) and exits, its leadership lost. The outputs
// are exact.
func TestHAPausedLeaderIsFenced(t *testing.T) {
	skipClusterUnlessEnabled(t)
	c := startHACluster(t, 2, 4)
	j := c.submit(t)
	old, _ := c.leader(t)
	waitRecorded(t, old, 2)
	if err := old.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	next := c.other(old)
	waitRecorded(t, next, 1)
	before := len(old.output())
	if err := old.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	select {
	case <-old.done:
	case <-time.After(60 * time.Second):
		t.Fatal("the deposed leader did not exit within 60 s of SIGCONT")
	}
	after := old.output()[before:]
	if deployingRE.MatchString(after) || recordedAnyRE.MatchString(after) {
		t.Fatalf("the deposed leader acted after SIGCONT:\n%s", after)
	}
	if !strings.Contains(after, "no longer leads the cluster") {
		t.Fatalf("the deposed leader did not report its lost leadership:\n%s", after)
	}
	c.finish(t, j)
	t.Logf("the deposed leader's log after SIGCONT:\n%s", after)
}

// TestHAEtcdRestart stops etcd for longer than the lease while the job
// runs, then starts it again on the same data and ports: the cluster
// waits, a job manager leads again, and the job finishes exactly.
func TestHAEtcdRestart(t *testing.T) {
	skipClusterUnlessEnabled(t)
	c := startHACluster(t, 2, 4)
	j := c.submit(t)
	old, _ := c.leader(t)
	waitRecorded(t, old, 2)
	endpoint := c.etcd.Endpoint
	c.etcd.Close()
	c.etcd = nil
	// The outage is the fault injected: longer than the 2 s lease.
	time.Sleep(4 * time.Second)
	s, err := ha.StartServer(c.etcdDir, endpoint, c.peer, ha.ServerLogLevel("panic"))
	if err != nil {
		t.Fatal(err)
	}
	c.etcd = s
	c.finish(t, j)
	now, info := c.leader(t)
	t.Logf("%s led before the outage, %s (epoch %d) after", old.name, now.name, info.Epoch)
}

// TestHAKafkaLeaderDiesBeforeSinkCommit runs GatewayMeter from Kafka to
// Kafka exactly-once (a transaction per checkpoint and subtask) while the
// leader exits right after recording checkpoint 2, before any
// transaction of it is committed. The new leader restores checkpoint 2,
// whose transactions its sinks commit on restore; read back
// read_committed, the outputs equal the oracle exactly.
func TestHAKafkaLeaderDiesBeforeSinkCommit(t *testing.T) {
	skipClusterUnlessEnabled(t)
	bs := kafkaBrokers(t)
	c := startHACluster(t, 2, 4, []string{"--exit-after-recording", "2"})
	first := c.jms[0]
	if p, _ := c.leader(t); p != first {
		t.Fatalf("job manager %s leads; the test needs the first", p.name)
	}
	bin := weirBinary(t)
	prefix := fmt.Sprintf("ha-%d-", time.Now().UnixNano())
	gen := exec.Command(bin, "gen", "gatewaymeter", "--seed", "5", "--requests", "100000", "--partitions", "8",
		"--tenants", "20", "--bad-rate", "0.01", "--out", filepath.Join(c.dir, "trace"), "--to-kafka", bs, "--topic-prefix", prefix)
	if out, err := gen.CombinedOutput(); err != nil {
		t.Fatalf("weir gen --to-kafka: %v\n%s", err, out)
	}
	run := exec.Command(bin, append([]string{"run", "-m", c.jmAddrs[1], "-d", "gatewaymeter", "--kafka", bs, "--topic-prefix", prefix, "--bounded",
		"--checkpoint-dir", filepath.Join(c.dir, "checkpoints"),
		"-D", "execution.checkpointing.interval=200 ms",
		"-D", "restart-strategy.type=fixed-delay", "-D", "restart-strategy.fixed-delay.attempts=10",
		"-D", "restart-strategy.fixed-delay.delay=200 ms"}, c.haArgs...)...)
	out, err := run.CombinedOutput()
	if err != nil {
		t.Fatalf("weir run -m --kafka: %v\n%s", err, out)
	}
	m := regexp.MustCompile(`as job ([0-9a-f]+) to`).FindSubmatch(out)
	if m == nil {
		t.Fatalf("weir run -m printed no job id:\n%s", out)
	}
	j := &haJob{id: string(m[1])}
	<-first.done
	if !strings.Contains(first.output(), "exiting at once after recording checkpoint 2") {
		t.Fatalf("the leader ended without the injected exit:\n%s", tail([]byte(first.output()), 2000))
	}
	c.waitFinished(t, j.id)
	if rec := c.jms[1].waitLog(t, recoveringJobRE, 1)[0]; rec[2] != "2" {
		t.Fatalf("the new leader recovered from checkpoint %s, want 2", rec[2])
	}
	vout, err := exec.Command(bin, "verify", "gatewaymeter", "--kafka", bs, "--topic-prefix", prefix).CombinedOutput()
	if err != nil || !strings.Contains(string(vout), "exact match") {
		t.Fatalf("weir verify --kafka: %v\n%s", err, vout)
	}
}

// TestHAKillLeaderMidCheckpoint freezes a task manager (SIGSTOP) so that
// the next checkpoint cannot complete, waits until the leader reports it
// in progress, then SIGKILLs the leader and thaws the task manager: the
// standby recovers the job from the last checkpoint that completed, and
// the outputs match the oracle exactly.
func TestHAKillLeaderMidCheckpoint(t *testing.T) {
	skipClusterUnlessEnabled(t)
	c := startHACluster(t, 2, 4)
	j := c.submit(t)
	old, info := c.leader(t)
	waitRecorded(t, old, 1)
	victim := c.tms[2]
	if err := victim.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	stopped := time.Now().UnixMilli()
	jb := &job{id: j.id, rest: info.RESTAddr}
	var pending int64
	deadline := time.Now().Add(30 * time.Second)
	for pending == 0 {
		for _, h := range jb.checkpoints(t).History {
			if h.Status == "IN_PROGRESS" && h.TriggerTimestamp > stopped {
				pending = h.ID
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("no checkpoint was triggered while the task manager was frozen")
		}
		time.Sleep(20 * time.Millisecond)
	}
	old.kill(t)
	if err := victim.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	c.finish(t, j)
	rec := c.other(old).waitLog(t, recoveringJobRE, 1)[0]
	got, _ := strconv.ParseInt(rec[2], 10, 64)
	if got == 0 || got >= pending {
		t.Fatalf("the new leader recovered from checkpoint %d; checkpoint %d was in progress at the kill", got, pending)
	}
	t.Logf("checkpoint %d in progress at the kill; recovered from checkpoint %d", pending, got)
}
