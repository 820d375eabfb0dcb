package cluster_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/weirstream/weir/internal/checkpoint"
	"github.com/weirstream/weir/internal/cluster"
	"github.com/weirstream/weir/stream"
	"github.com/weirstream/weir/streamtest"
)

// TestClusterSavepointResumes takes a savepoint of a job whose keyed sum
// runs on two task managers (the savepoint's barrier, with its
// directory, crosses the data plane between them), cancels the job with
// it as a client's Savepoint does, and submits the job again from the
// savepoint. The first job completes no checkpoint, so every result
// committed is the savepoint's: the output must hold each record's sum
// exactly once, and the savepoint must hold the keyed state of every sum
// subtask, written by the task managers into its own directory.
func TestClusterSavepointResumes(t *testing.T) {
	ev := newEvents()
	spDir := t.TempDir()
	base := []string{"parallelism.default=4", "execution.checkpointing.interval=1 h",
		"execution.checkpointing.dir=" + t.TempDir(), "execution.checkpointing.savepoint-dir=" + spDir,
		"execution.checkpointing.data-inline-threshold=0 b"}
	sj := &sumJobs{sink: streamtest.NewCollector[keyedSum](true), cfg: base}
	jobs := newEnvJobs(sj.env, stream.WithEvents(ev.Record))
	_, addr := startJobManager(t, jobs)
	for i := range 2 {
		startTaskManager(t, fmt.Sprintf("tm-%d", i), addr, 2, jobs)
	}
	c, err := cluster.Dial(addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	waitTaskManagers(t, c, 2)
	slow, _ := json.Marshal(sumArgs{Rate: 2000})
	if _, err := c.Submit(context.Background(), cluster.Submission{JobID: "before", Job: "sum", Args: slow}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for ev.Count(stream.EventRunning) == 0 || jobs.job().Master().Metrics().RecordsIn < 1000 {
		if time.Now().After(deadline) {
			t.Fatal("the job read too little in 30 s")
		}
		time.Sleep(time.Millisecond)
	}
	path, err := c.Savepoint(context.Background(), "before", "", true, checkpoint.FormatCanonical)
	if err != nil {
		t.Fatalf("savepoint: %v", err)
	}
	if filepath.Dir(path) != spDir {
		t.Fatalf("savepoint at %s, want it in %s", path, spDir)
	}
	if st := waitJob(t, c, "before"); st.State != "CANCELED" {
		t.Fatalf("the job the savepoint canceled ended %s: %s", st.State, st.Error)
	}
	if n := len(sj.sink.Results()); n != 0 {
		t.Fatalf("%d results committed before the resume: a savepoint commits nothing", n)
	}
	entries, err := os.ReadDir(path)
	if err != nil {
		t.Fatal(err)
	}
	var files []string
	for _, e := range entries {
		files = append(files, e.Name())
	}
	for i := range 4 {
		if !slices.Contains(files, fmt.Sprintf("sum-%d-keyed", i)) {
			t.Fatalf("the savepoint holds %v: no keyed state of sum subtask %d", files, i)
		}
	}

	sj.setConfig(append(base, "execution.state-recovery.path="+path))
	fast, _ := json.Marshal(sumArgs{})
	if _, err := c.Submit(context.Background(), cluster.Submission{JobID: "after", Job: "sum", Args: fast}); err != nil {
		t.Fatal(err)
	}
	if st := waitJob(t, c, "after"); st.State != "FINISHED" {
		t.Fatalf("the job resumed from the savepoint ended %s: %s", st.State, st.Error)
	}
	check(t, sj.sink.Results())
}
