package web_test

import (
	"net/http"
	"strings"
	"testing"
)

// TestRestartingJobShowsItsFailure: while a job waits to restart after a
// failure, /jobs and /jobs/:id say RESTARTING, its tasks are not RUNNING,
// and /jobs/:id/exceptions lists the failure with its cause in Flink's
// exception-history shape, and in Flink 1.x's root-exception and
// all-exceptions; maxExceptions bounds the list.
func TestRestartingJobShowsItsFailure(t *testing.T) {
	f := startJob(t, []string{"restart-strategy.type=fixed-delay", "restart-strategy.fixed-delay.attempts=5",
		"restart-strategy.fixed-delay.delay=1 h"})
	id := f.jobID()
	waitFor(t, "the job to run", func() bool { return at(f.obj("/jobs/"+id), "state") == "RUNNING" })
	ex := f.obj("/jobs/" + id + "/exceptions")
	if n := len(at(ex, "exceptionHistory", "entries").([]any)); n != 0 {
		t.Fatalf("a job without failures lists %d exceptions", n)
	}
	fields(t, "exceptions", ex, "root-exception:null", "timestamp:null", "all-exceptions:array", "truncated:bool")
	f.faults.fail.Store(true)
	waitFor(t, "the job to restart", func() bool { return at(f.obj("/jobs/"+id), "state") == "RESTARTING" })
	if st := at(f.obj("/jobs"), "jobs").([]any)[0].(map[string]any)["status"]; st != "RESTARTING" {
		t.Fatalf("/jobs says %v, want RESTARTING", st)
	}
	for _, v := range at(f.obj("/jobs/"+id), "vertices").([]any) {
		if st := v.(map[string]any)["status"]; st == "RUNNING" {
			t.Fatalf("a vertex of a restarting job is %v", st)
		}
	}
	ex = f.obj("/jobs/" + id + "/exceptions")
	fields(t, "exceptions", ex, "exceptionHistory:object", "root-exception:string", "timestamp:number", "all-exceptions:array", "truncated:bool")
	if !strings.Contains(ex["root-exception"].(string), "injected failure") || len(ex["all-exceptions"].([]any)) != 1 {
		t.Fatalf("Flink 1.x's fields do not show the failure: %v", ex)
	}
	fields(t, "all-exceptions", at(ex, "all-exceptions", "0"), "exception:string", "task:string", "location:string", "endpoint:string", "timestamp:number", "taskManagerId:string")
	entries := at(ex, "exceptionHistory", "entries").([]any)
	if len(entries) != 1 {
		t.Fatalf("%d exceptions, want 1: %v", len(entries), ex)
	}
	fields(t, "exception", entries[0], "exceptionName:string", "stacktrace:string", "timestamp:number", "taskName:string",
		"failureLabels:object", "concurrentExceptions:array")
	e := entries[0].(map[string]any)
	if !strings.Contains(e["stacktrace"].(string), "injected failure") || !strings.HasSuffix(e["taskName"].(string), "(1/2)") {
		t.Fatalf("the exception does not name the cause and the subtask: %v", e)
	}
	if n := len(at(f.obj("/jobs/"+id+"/exceptions?maxExceptions=0"), "exceptionHistory", "entries").([]any)); n != 0 {
		t.Fatalf("maxExceptions=0 listed %d", n)
	}
	if code, body := f.get("/jobs/" + id + "/exceptions?maxExceptions=" + strings.Repeat("9x", 100)); code != http.StatusBadRequest || len(body) > 300 {
		t.Fatalf("a bad maxExceptions answered %d with %d bytes", code, len(body))
	}
}
