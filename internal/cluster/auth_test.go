package cluster_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/weirstream/weir/internal/cluster"
	"github.com/weirstream/weir/stream"
	"github.com/weirstream/weir/streamtest"
)

const clusterToken = "cluster-s3cret"

// logBuffer collects a logger's lines.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestClusterAuthRefusesCallsWithoutTheToken: a job manager with a token
// refuses Submit, List and Cancel from a client without it or with another
// one, with an error wrapping ErrAuth that names cluster.auth-token, logs
// each refusal without any token, and serves a client holding it.
func TestClusterAuthRefusesCallsWithoutTheToken(t *testing.T) {
	logs := &logBuffer{}
	jobs := (&sumJobs{sink: streamtest.NewCollector[keyedSum](true), cfg: []string{"parallelism.default=1"}}).jobs(func(stream.JobEvent) {})
	_, addr := startJobManager(t, jobs, cluster.WithAuthToken(clusterToken), cluster.WithLogger(slog.New(slog.NewTextHandler(logs, nil))))
	args, _ := json.Marshal(sumArgs{Rate: 10})
	for _, tok := range []string{"", "wrong", clusterToken + "x"} {
		c, err := cluster.Dial(addr, cluster.WithToken(tok))
		if err != nil {
			t.Fatal(err)
		}
		calls := map[string]func() error{
			"Submit": func() error {
				_, err := c.Submit(context.Background(), cluster.Submission{JobID: "j-" + tok, Job: "sum", Args: args})
				return err
			},
			"List": func() error {
				_, err := c.List(context.Background())
				return err
			},
			"Cancel": func() error { return c.Cancel(context.Background(), "j") },
		}
		for name, call := range calls {
			err := call()
			if !errors.Is(err, cluster.ErrAuth) || !strings.Contains(err.Error(), "authentication failed") || !strings.Contains(err.Error(), "cluster.auth-token") {
				t.Errorf("%s with token %q: %v, want an authentication failure naming cluster.auth-token", name, tok, err)
			}
			if tok != "" && strings.Contains(err.Error(), tok) {
				t.Errorf("%s: the error shows the token: %v", name, err)
			}
		}
		c.Close()
	}
	log := logs.String()
	if n := strings.Count(log, "refused a call that failed authentication"); n != 9 {
		t.Errorf("%d refusals logged, want 9:\n%s", n, log)
	}
	if strings.Contains(log, clusterToken) || strings.Contains(log, "wrong") {
		t.Errorf("the log shows a token:\n%s", log)
	}

	c, err := cluster.Dial(addr, cluster.WithToken(clusterToken))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Submit(context.Background(), cluster.Submission{JobID: "ok", Job: "sum", Args: args}); err != nil {
		t.Fatalf("Submit with the token: %v", err)
	}
	if ov, err := c.List(context.Background()); err != nil || len(ov.Jobs) != 1 {
		t.Fatalf("List with the token: %+v, %v", ov, err)
	}
	if err := c.Cancel(context.Background(), "ok"); err != nil {
		t.Fatalf("Cancel with the token: %v", err)
	}
}

// TestClusterAuthClientChecksTheJobManager: a client holding a token
// refuses the answers of a job manager that cannot prove it holds the
// same one.
func TestClusterAuthClientChecksTheJobManager(t *testing.T) {
	jobs := (&sumJobs{sink: streamtest.NewCollector[keyedSum](true)}).jobs(func(stream.JobEvent) {})
	_, addr := startJobManager(t, jobs)
	c, err := cluster.Dial(addr, cluster.WithToken(clusterToken))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.List(context.Background()); !errors.Is(err, cluster.ErrAuth) || !strings.Contains(err.Error(), "did not prove") {
		t.Fatalf("List from a job manager without the token: %v, want an authentication failure", err)
	}
}

// TestClusterAuthTaskManagers: a task manager without the job manager's
// token, or with another one, is refused and stops with an error wrapping
// ErrAuth; task managers holding it register, exchange records over
// authenticated data connections and run a job to the exact result.
func TestClusterAuthTaskManagers(t *testing.T) {
	logs := &logBuffer{}
	sj := &sumJobs{sink: streamtest.NewCollector[keyedSum](true), cfg: []string{"parallelism.default=4", "execution.checkpointing.interval=50 ms"}}
	jobs := sj.jobs(func(stream.JobEvent) {})
	_, addr := startJobManager(t, jobs, cluster.WithAuthToken(clusterToken), cluster.WithLogger(slog.New(slog.NewTextHandler(logs, nil))))
	for _, tok := range []string{"", "wrong"} {
		x := startTaskManagerWithToken(t, "tm-bad", addr, 2, jobs, tok)
		select {
		case <-x.done:
		case <-time.After(30 * time.Second):
			t.Fatalf("a task manager with token %q is still trying to register after 30 s", tok)
		}
		if !errors.Is(x.err, cluster.ErrAuth) || !strings.Contains(x.err.Error(), "cluster.auth-token") {
			t.Fatalf("task manager with token %q: Run returned %v, want an authentication failure naming cluster.auth-token", tok, x.err)
		}
	}
	if log := logs.String(); strings.Count(log, "refused a call that failed authentication") != 2 || strings.Contains(log, clusterToken) {
		t.Errorf("the job manager's log of the refused task managers:\n%s", log)
	}

	c, err := cluster.Dial(addr, cluster.WithToken(clusterToken))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for i := range 2 {
		startTaskManagerWithToken(t, []string{"tm-a", "tm-b"}[i], addr, 2, jobs, clusterToken)
	}
	waitTaskManagers(t, c, 2)
	args, _ := json.Marshal(sumArgs{Rate: 20_000})
	id, err := c.Submit(context.Background(), cluster.Submission{JobID: "job-auth", Job: "sum", Args: args})
	if err != nil {
		t.Fatal(err)
	}
	if st := waitJob(t, c, id); st.State != "FINISHED" {
		t.Fatalf("job ended %s: %s", st.State, st.Error)
	}
	check(t, sj.sink.Results())
}

// TestClusterListenOffLoopbackNeedsAToken: without a token the job manager
// refuses a listener reachable from other machines, naming the option.
func TestClusterListenOffLoopbackNeedsAToken(t *testing.T) {
	ln, err := net.Listen("tcp", "0.0.0.0:0")
	if err != nil {
		t.Fatal(err)
	}
	jm := cluster.NewJobManager((&sumJobs{}).jobs(func(stream.JobEvent) {}), cluster.WithLogger(quiet))
	err = jm.Serve(context.Background(), ln)
	if err == nil || !strings.Contains(err.Error(), "cluster.auth-token") || !strings.Contains(err.Error(), "reachable from other machines") {
		t.Fatalf("Serve on %s without a token: %v, want a refusal naming cluster.auth-token", ln.Addr(), err)
	}
	if err := cluster.CheckListen(ln.Addr(), clusterToken); err != nil {
		t.Errorf("with a token: %v", err)
	}
	for _, a := range []string{"127.0.0.1:6123", "[::1]:6123"} {
		addr, _ := net.ResolveTCPAddr("tcp", a)
		if err := cluster.CheckListen(addr, ""); err != nil {
			t.Errorf("loopback %s: %v", a, err)
		}
	}
}
