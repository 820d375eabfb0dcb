package web_test

import (
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/weirstream/weir/internal/launch"
	"github.com/weirstream/weir/internal/web"
)

// do sends a request with method to path and returns the status and body;
// edit, if not nil, changes the request first.
func (f *fixture) do(method, path string, edit func(*http.Request)) (int, []byte) {
	f.t.Helper()
	req, err := http.NewRequest(method, f.base+path, nil)
	if err != nil {
		f.t.Fatal(err)
	}
	if f.token != "" {
		req.Header.Set("Authorization", "Bearer "+f.token)
	}
	if edit != nil {
		edit(req)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		f.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		f.t.Fatal(err)
	}
	return resp.StatusCode, b
}

// flinkError reports whether body is Flink's error body with a message
// containing want.
func flinkError(body []byte, want string) bool {
	var e struct{ Errors []string }
	return json.Unmarshal(body, &e) == nil && len(e.Errors) == 1 && strings.Contains(e.Errors[0], want)
}

// TestJobControl: the job control paths as Flink's clients call them. A
// cancel from another origin, or naming another host on a server without
// a token, is refused and the job runs on; a server without Stop and
// Savepoint answers stop and savepoints with 501; PATCH ?mode=cancel and the dashboard's GET
// yarn-cancel answer 202 and the job ends CANCELED; a cancel of a job
// that finished is a conflict.
func TestJobControl(t *testing.T) {
	f := startJob(t, []string{"execution.checkpointing.interval=50 ms"})
	f.serve(web.Job{Master: launch.MasterOf(f.client), Done: f.client.Done(), Err: f.client.Wait, Config: f.env.Config(), Cancel: f.cancel})
	jid := f.jobID()
	job := "/jobs/" + jid
	waitFor(t, "the job to run", func() bool { return at(f.obj(job), "state") == "RUNNING" })
	if c := f.obj("/config"); at(c, "features", "web-cancel") != true {
		t.Errorf("/config of a server that cancels: %v", c)
	}

	for _, tc := range []struct {
		method, path string
		code         int
		want         string
	}{
		{"PATCH", job + "?mode=stop", http.StatusBadRequest, `"stop" has been removed`},
		{"PATCH", job + "?mode=pause", http.StatusBadRequest, "unknown termination mode"},
		{"PATCH", "/jobs/0123456789abcdef0123456789abcdef?mode=cancel", http.StatusNotFound, "not found"},
		{"POST", job + "/stop", http.StatusNotImplemented, "cannot stop job"},
		{"POST", job + "/savepoints", http.StatusNotImplemented, "cannot take savepoints"},
		{"GET", job + "/savepoints/0123", http.StatusNotFound, "no savepoint operation 0123"},
		{"GET", job + "/stop", http.StatusMethodNotAllowed, "allowed are POST"},
		{"POST", job + "/yarn-cancel", http.StatusMethodNotAllowed, "allowed are GET"},
		{"DELETE", job, http.StatusMethodNotAllowed, "allowed are GET, HEAD"},
		{"POST", job + "/checkpoints", http.StatusNotImplemented, "cannot trigger checkpoints"},
		{"DELETE", job + "/checkpoints", http.StatusMethodNotAllowed, "allowed are GET, HEAD"},
		{"POST", "/", http.StatusMethodNotAllowed, "allowed are GET, HEAD"},
	} {
		if code, body := f.do(tc.method, tc.path, nil); code != tc.code || !flinkError(body, tc.want) {
			t.Errorf("%s %s: %d %s, want %d with an error saying %q", tc.method, tc.path, code, body, tc.code, tc.want)
		}
	}

	for what, edit := range map[string]func(*http.Request){
		"another origin":    func(r *http.Request) { r.Header.Set("Origin", "http://evil.example") },
		"another site":      func(r *http.Request) { r.Header.Set("Sec-Fetch-Site", "cross-site") },
		"a rebound host":    func(r *http.Request) { r.Host = "evil.example:8081" },
		"a rebound host, 2": func(r *http.Request) { r.Host = "evil.example" },
	} {
		for _, p := range []struct{ method, path string }{{"PATCH", job + "?mode=cancel"}, {"GET", job + "/yarn-cancel"}} {
			if code, body := f.do(p.method, p.path, edit); code != http.StatusForbidden || !flinkError(body, "cancel refused") {
				t.Errorf("%s %s from %s: %d %s, want 403", p.method, p.path, what, code, body)
			}
		}
	}
	if st := at(f.obj(job), "state"); st != "RUNNING" {
		t.Fatalf("after refused cancels the job is %v", st)
	}

	code, body := f.do("PATCH", job+"?mode=cancel", func(r *http.Request) {
		r.Header.Set("Origin", f.base)
		r.Header.Set("Sec-Fetch-Site", "same-origin")
	})
	if code != http.StatusAccepted || strings.TrimSpace(string(body)) != "{}" {
		t.Fatalf("PATCH ?mode=cancel: %d %s, want 202 {}", code, body)
	}
	<-f.client.Done()
	waitFor(t, "the job shown as CANCELED", func() bool { return at(f.obj(job), "state") == "CANCELED" })
	// Canceling a canceled job is no error, as in Flink; the dashboard's
	// way answers the same.
	if code, body := f.do("GET", job+"/yarn-cancel", nil); code != http.StatusAccepted {
		t.Errorf("cancel of a canceled job: %d %s, want 202", code, body)
	}

	// A job that finished: the cancel is a conflict.
	done := make(chan struct{})
	close(done)
	f.serve(web.Job{Master: launch.MasterOf(f.client), Done: done, Err: func() error { return nil }, Config: f.env.Config(), Cancel: func() { t.Error("canceled a finished job") }})
	if code, body := f.do("PATCH", job, nil); code != http.StatusConflict || !flinkError(body, "FINISHED") {
		t.Errorf("cancel of a finished job: %d %s, want 409", code, body)
	}
	// A server without Cancel says so, and /config does not offer it.
	f.serve(web.Job{Master: launch.MasterOf(f.client), Config: f.env.Config()})
	if code, body := f.do("PATCH", job, nil); code != http.StatusNotImplemented || !flinkError(body, "cannot cancel") {
		t.Errorf("cancel without Cancel: %d %s, want 501", code, body)
	}
	if c := f.obj("/config"); at(c, "features", "web-cancel") != false {
		t.Errorf("/config of a server that does not cancel: %v", c)
	}
}

// TestJobControlNeedsTheToken: a server with a token refuses a cancel
// without it, and lets one with it through whatever host it names.
func TestJobControlNeedsTheToken(t *testing.T) {
	f := startJob(t, nil)
	f.serve(web.Job{Master: launch.MasterOf(f.client), Done: f.client.Done(), Err: f.client.Wait, Config: f.env.Config(), Cancel: f.cancel},
		web.WithAuthToken("s3cret"))
	job := "/jobs/" + f.jobID()
	for _, p := range []struct{ method, path string }{{"PATCH", job + "?mode=cancel"}, {"GET", job + "/yarn-cancel"}, {"POST", job + "/stop"}} {
		if code, _ := f.do(p.method, p.path, nil); code != http.StatusUnauthorized {
			t.Errorf("%s %s without the token: %d, want 401", p.method, p.path, code)
		}
	}
	f.token = "s3cret"
	if code, body := f.do("PATCH", job+"?mode=stop", func(r *http.Request) { r.Host = "weir.example:8081" }); code != http.StatusBadRequest {
		t.Errorf("PATCH with the token: %d %s, want 400 (mode stop)", code, body)
	}
	if code, body := f.do("PATCH", job, func(r *http.Request) { r.Host = "weir.example:8081" }); code != http.StatusAccepted {
		t.Errorf("cancel with the token: %d %s, want 202", code, body)
	}
	<-f.client.Done()
}

// TestJobPlanAndConfig: /jobs/:id/plan and /jobs/:id/config in Flink's
// shapes.
func TestJobPlanAndConfig(t *testing.T) {
	f := startJob(t, []string{"restart-strategy.type=fixed-delay", "restart-strategy.fixed-delay.attempts=3"})
	job := "/jobs/" + f.jobID()
	p := f.obj(job + "/plan")
	fields(t, "plan", p, "plan:object")
	fields(t, "plan", p["plan"], "jid:string", "name:string", "type:string", "nodes:array")
	nodes := at(p, "plan", "nodes").([]any)
	if len(nodes) != 2 {
		t.Fatalf("plan nodes %v, want numbers and count", nodes)
	}
	for _, n := range nodes {
		fields(t, "node", n, "id:string", "parallelism:number", "operator:string", "operator_strategy:string", "description:string", "optimizer_properties:object")
	}
	if in := at(nodes[1], "inputs", "0", "id"); in != web.VertexID("numbers") {
		t.Errorf("count's input %v, want numbers", in)
	}

	c := f.obj(job + "/config")
	fields(t, "config", c, "jid:string", "name:string", "execution-config:object")
	fields(t, "execution-config", c["execution-config"], "execution-mode:string", "restart-strategy:string", "job-parallelism:number",
		"object-reuse-mode:bool", "user-config:object")
	if c["jid"] != f.jobID() || num(at(c, "execution-config", "job-parallelism")) != 2 ||
		at(c, "execution-config", "restart-strategy") != "Restart with fixed delay (1000 ms). #3 restart attempts." {
		t.Errorf("job config %v", c)
	}
}

// TestSavepointsThroughTheAPI triggers savepoints as Flink's clients do:
// POST /jobs/:jobid/savepoints answers 202 with a request id, and GET
// /jobs/:jobid/savepoints/:triggerid reports IN_PROGRESS and then
// COMPLETED with the savepoint's location, a directory holding its
// _metadata; with "cancel-job" the job is canceled once the savepoint is
// complete. POST /jobs/:jobid/checkpoints takes a checkpoint now, whose
// GET /jobs/:jobid/checkpoints/:triggerid reports its checkpointId
// (INCREMENTAL is refused: the heap backend takes full ones).
// POST /jobs/:jobid/stop stops a job with a savepoint, which
// then reports FINISHED. Bad requests (an unknown
// field, an unknown formatType, another origin) are refused, and a savepoint
// the job cannot take (no checkpoint storage) completes with a failure
// cause.
func TestSavepointsThroughTheAPI(t *testing.T) {
	spDir := t.TempDir()
	f := startJob(t, []string{"execution.checkpointing.interval=50 ms", "execution.checkpointing.dir=" + t.TempDir(),
		"execution.checkpointing.savepoint-dir=" + spDir})
	jm := launch.MasterOf(f.client)
	f.serve(web.Job{Master: jm, Done: f.client.Done(), Err: f.client.Wait, Config: f.env.Config(), Cancel: f.cancel, Savepoint: jm.TriggerSavepoint,
		Checkpoint: jm.TriggerCheckpoint})
	job := "/jobs/" + f.jobID()
	waitFor(t, "the job to run", func() bool { return at(f.obj(job), "state") == "RUNNING" })
	post := func(body string, edit func(*http.Request)) (int, []byte) {
		return f.do("POST", job+"/savepoints", func(r *http.Request) {
			r.Body = io.NopCloser(strings.NewReader(body))
			r.Header.Set("Content-Type", "application/json")
			if edit != nil {
				edit(r)
			}
		})
	}
	for _, tc := range []struct {
		body string
		edit func(*http.Request)
		code int
		want string
	}{
		{`{"target-dir": "/x"}`, nil, http.StatusBadRequest, "unknown field"},
		{`{"formatType": "BINARY"}`, nil, http.StatusBadRequest, "CANONICAL or NATIVE"},
		{`{"triggerId": "abc"}`, nil, http.StatusBadRequest, "32 hexadecimal digits"},
		{`{}`, func(r *http.Request) { r.Header.Set("Origin", "http://evil.example") }, http.StatusForbidden, "savepoint refused"},
	} {
		if code, body := post(tc.body, tc.edit); code != tc.code || !flinkError(body, tc.want) {
			t.Errorf("POST savepoints %s: %d %s, want %d saying %q", tc.body, code, body, tc.code, tc.want)
		}
	}
	// trigger posts body and waits for the savepoint to complete.
	trigger := func(body string) map[string]any {
		t.Helper()
		code, b := post(body, nil)
		var accepted struct {
			RequestID string `json:"request-id"`
		}
		if code != http.StatusAccepted || json.Unmarshal(b, &accepted) != nil || accepted.RequestID == "" {
			t.Fatalf("POST savepoints %s: %d %s, want 202 with a request-id", body, code, b)
		}
		var st map[string]any
		waitFor(t, "the savepoint to complete", func() bool {
			st = f.obj(job + "/savepoints/" + accepted.RequestID)
			if id := at(st, "status", "id"); id != "IN_PROGRESS" && id != "COMPLETED" {
				t.Fatalf("savepoint status %v", st)
			}
			return at(st, "status", "id") == "COMPLETED"
		})
		return st
	}
	// NATIVE is accepted; the heap backend writes its usual format.
	if st := trigger(`{"formatType": "native"}`); at(st, "operation", "location") == nil {
		t.Fatalf("native savepoint status %v: want a location", st)
	}
	st := trigger(`{"target-directory": "` + filepath.Join(spDir, "named") + `"}`)
	loc, _ := at(st, "operation", "location").(string)
	if filepath.Dir(loc) != filepath.Join(spDir, "named") || !strings.HasPrefix(filepath.Base(loc), "savepoint-") {
		t.Fatalf("savepoint status %v: want a location in %s", st, filepath.Join(spDir, "named"))
	}
	if _, err := os.Stat(filepath.Join(loc, "_metadata")); err != nil {
		t.Fatalf("the savepoint's _metadata: %v", err)
	}
	if st := at(f.obj(job), "state"); st != "RUNNING" {
		t.Fatalf("after a savepoint the job is %v, want it RUNNING", st)
	}
	// A checkpoint now, as Flink's manual checkpoints.
	if code, b := f.do("POST", job+"/checkpoints", func(r *http.Request) {
		r.Body = io.NopCloser(strings.NewReader(`{"checkpointType": "INCREMENTAL"}`))
	}); code != http.StatusBadRequest || !flinkError(b, "full checkpoints") {
		t.Errorf("POST checkpoints INCREMENTAL: %d %s, want 400", code, b)
	}
	code, b := f.do("POST", job+"/checkpoints", func(r *http.Request) { r.Body = io.NopCloser(strings.NewReader(`{"checkpointType": "FULL"}`)) })
	var ckpt struct {
		RequestID string `json:"request-id"`
	}
	if code != http.StatusAccepted || json.Unmarshal(b, &ckpt) != nil || ckpt.RequestID == "" {
		t.Fatalf("POST checkpoints: %d %s, want 202 with a request-id", code, b)
	}
	var cst map[string]any
	waitFor(t, "the checkpoint to complete", func() bool {
		cst = f.obj(job + "/checkpoints/" + ckpt.RequestID)
		return at(cst, "status", "id") == "COMPLETED"
	})
	if id, _ := at(cst, "operation", "checkpointId").(float64); id < 1 {
		t.Fatalf("checkpoint status %v: want a checkpointId", cst)
	}
	if code, _ := f.do("GET", job+"/savepoints/"+ckpt.RequestID, nil); code != http.StatusNotFound {
		t.Errorf("a checkpoint's trigger read as a savepoint's: %d, want 404", code)
	}

	st = trigger(`{"cancel-job": true}`)
	if loc, _ := at(st, "operation", "location").(string); filepath.Dir(loc) != spDir {
		t.Fatalf("savepoint status %v: want a location in the configured %s", st, spDir)
	}
	<-f.client.Done()
	waitFor(t, "the job shown as CANCELED", func() bool { return at(f.obj(job), "state") == "CANCELED" })
	if code, body := f.do("GET", job+"/savepoints/0123456789abcdef0123456789abcdef", nil); code != http.StatusNotFound || !flinkError(body, "no savepoint operation") {
		t.Errorf("GET of an unknown trigger: %d %s, want 404", code, body)
	}

	// Stop with a savepoint: the job finishes, and the operation reports
	// the savepoint.
	h := startJob(t, []string{"execution.checkpointing.interval=50 ms", "execution.checkpointing.dir=" + t.TempDir()})
	hm := launch.MasterOf(h.client)
	h.serve(web.Job{Master: hm, Done: h.client.Done(), Err: h.client.Wait, Config: h.env.Config(), Stop: hm.StopWithSavepoint})
	hjob := "/jobs/" + h.jobID()
	waitFor(t, "the job to run", func() bool { return at(h.obj(hjob), "state") == "RUNNING" })
	stop := func(body string) (int, []byte) {
		return h.do("POST", hjob+"/stop", func(r *http.Request) { r.Body = io.NopCloser(strings.NewReader(body)) })
	}
	if code, b := stop(`{"target-directory": "` + spDir + `"}`); code != http.StatusBadRequest || !flinkError(b, "targetDirectory") {
		t.Errorf("POST stop with the savepoint request's field: %d %s, want 400 naming targetDirectory", code, b)
	}
	code, b = stop(`{"targetDirectory": "` + spDir + `", "drain": true}`)
	var stopped struct {
		RequestID string `json:"request-id"`
	}
	if code != http.StatusAccepted || json.Unmarshal(b, &stopped) != nil || stopped.RequestID == "" {
		t.Fatalf("POST stop: %d %s, want 202 with a request-id", code, b)
	}
	var hst map[string]any
	waitFor(t, "the stop to complete", func() bool {
		hst = h.obj(hjob + "/savepoints/" + stopped.RequestID)
		return at(hst, "status", "id") == "COMPLETED"
	})
	if loc, _ := at(hst, "operation", "location").(string); filepath.Dir(loc) != spDir {
		t.Fatalf("stop status %v: want a savepoint in %s", hst, spDir)
	}
	if err := h.client.Wait(); err != nil {
		t.Fatalf("the stopped job ended with %v, want it finished", err)
	}
	waitFor(t, "the job shown as FINISHED", func() bool { return at(h.obj(hjob), "state") == "FINISHED" })

	// A job without checkpoint storage cannot take one: the operation
	// completes with the reason.
	g := startJob(t, []string{"execution.checkpointing.interval=50 ms"})
	gm := launch.MasterOf(g.client)
	g.serve(web.Job{Master: gm, Done: g.client.Done(), Err: g.client.Wait, Config: g.env.Config(), Savepoint: gm.TriggerSavepoint})
	code, b = g.do("POST", "/jobs/"+g.jobID()+"/savepoints", nil)
	var accepted struct {
		RequestID string `json:"request-id"`
	}
	if code != http.StatusAccepted || json.Unmarshal(b, &accepted) != nil {
		t.Fatalf("POST savepoints without storage: %d %s", code, b)
	}
	var gst map[string]any
	waitFor(t, "the failed savepoint to complete", func() bool {
		gst = g.obj("/jobs/" + g.jobID() + "/savepoints/" + accepted.RequestID)
		return at(gst, "status", "id") == "COMPLETED"
	})
	if cause, _ := at(gst, "operation", "failure-cause", "stack-trace").(string); !strings.Contains(cause, "execution.checkpointing.dir") {
		t.Fatalf("savepoint without checkpoint storage: %v, want a failure cause naming execution.checkpointing.dir", gst)
	}
}
