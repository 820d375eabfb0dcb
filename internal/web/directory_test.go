package web_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/weirstream/weir/internal/launch"
	"github.com/weirstream/weir/internal/web"
)

// TestDirectoryServesEveryJob serves two running jobs from one Directory,
// as the cluster's job manager does: the overview counts both, the job
// lists hold both with the newest first, each job's paths answer for that
// job, an unknown job is 404, a malformed id 400, and /metrics carries
// both jobs' samples.
func TestDirectoryServesEveryJob(t *testing.T) {
	first := startJob(t, []string{"execution.checkpointing.interval=50 ms"})
	second := startJob(t, []string{"execution.checkpointing.interval=50 ms"})
	dir := web.NewDirectory(func() web.ClusterInfo { return web.ClusterInfo{TaskManagers: 3, SlotsTotal: 6, SlotsAvailable: 2} },
		web.WithSampleInterval(10*time.Millisecond), web.WithLogger(quiet))
	for _, f := range []*fixture{first, second} {
		if err := dir.Add(web.Job{Master: launch.MasterOf(f.client), Done: f.client.Done(), Err: f.client.Wait, Config: f.env.Config(), Cancel: f.cancel}); err != nil {
			t.Fatal(err)
		}
	}
	if err := dir.Add(web.Job{Master: launch.MasterOf(first.client)}); err == nil {
		t.Fatal("a job was added twice")
	}
	addr, stop, err := dir.Listen(context.Background(), "127.0.0.1", 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		stop()
		dir.Close()
	})
	f := &fixture{t: t, base: "http://" + addr}

	ov := f.obj("/overview")
	if num(ov["taskmanagers"]) != 3 || num(ov["slots-total"]) != 6 || num(ov["slots-available"]) != 2 || num(ov["jobs-running"]) != 2 {
		t.Fatalf("overview %v: want 3 task managers, 6 slots (2 free), 2 running jobs", ov)
	}
	var jobs struct {
		Jobs []struct {
			JID   string `json:"jid"`
			State string `json:"state"`
		} `json:"jobs"`
	}
	f.decode("/jobs/overview", &jobs)
	if len(jobs.Jobs) != 2 || jobs.Jobs[0].JID != second.jobID() || jobs.Jobs[1].JID != first.jobID() {
		t.Fatalf("jobs overview %+v: want %s then %s", jobs.Jobs, second.jobID(), first.jobID())
	}
	for _, x := range []*fixture{first, second} {
		if got := f.obj("/jobs/" + x.jobID())["jid"]; got != x.jobID() {
			t.Fatalf("GET /jobs/%s answered for %v", x.jobID(), got)
		}
		waitFor(t, "a completed checkpoint of "+x.jobID(), func() bool {
			return at(f.obj("/jobs/"+x.jobID()+"/checkpoints"), "latest", "completed") != nil
		})
	}
	if code, _ := f.get("/jobs/0123456789abcdef0123456789abcdef"); code != http.StatusNotFound {
		t.Fatalf("unknown job: %d, want 404", code)
	}
	if code, _ := f.get("/jobs/no%20such"); code != http.StatusBadRequest {
		t.Fatalf("malformed job id: %d, want 400", code)
	}
	code, body := f.get("/metrics")
	if code != http.StatusOK {
		t.Fatalf("/metrics: %d", code)
	}
	for _, x := range []*fixture{first, second} {
		if !strings.Contains(string(body), `job_id="`+x.jobID()+`"`) {
			t.Fatalf("/metrics has no samples of job %s", x.jobID())
		}
	}
	if code, _ := f.get("/"); code != http.StatusOK {
		t.Fatalf("the web UI: %d", code)
	}
	if code, _ := f.do("POST", "/overview", nil); code != http.StatusMethodNotAllowed {
		t.Fatalf("POST /overview: %d, want 405", code)
	}

	// A cancel reaches the job it names, and only that one.
	if at(f.obj("/config"), "features", "web-cancel") != true {
		t.Error("the directory does not offer to cancel jobs")
	}
	if code, body := f.do("PATCH", "/jobs/"+first.jobID()+"?mode=cancel", nil); code != http.StatusAccepted {
		t.Fatalf("PATCH ?mode=cancel: %d %s", code, body)
	}
	<-first.client.Done()
	waitFor(t, "the first job canceled", func() bool { return at(f.obj("/jobs/"+first.jobID()), "state") == "CANCELED" })
	if st := at(f.obj("/jobs/"+second.jobID()), "state"); st != "RUNNING" {
		t.Fatalf("the second job is %v after a cancel of the first", st)
	}
}
