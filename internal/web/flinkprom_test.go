package web_test

import (
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/weirstream/weir/internal/launch"
	"github.com/weirstream/weir/internal/web"
)

// TestFlinkMetricNames scrapes /metrics of one job in both namings:
// weir's by default (no flink_ names), and with WithFlinkMetricNames the
// names and labels of Flink's Prometheus reporter (no weir_ names), whose
// values agree with the REST API's metrics of the same names.
func TestFlinkMetricNames(t *testing.T) {
	f := startJob(t, []string{"execution.checkpointing.interval=50 ms"})
	jid := f.jobID()
	count := web.VertexID("count")
	// ready waits until the server samples rates of both count subtasks
	// and the job has completed a checkpoint.
	ready := func() {
		waitFor(t, "a completed checkpoint and rates on both count subtasks", func() bool {
			var vals []map[string]any
			f.decode("/jobs/"+jid+"/vertices/"+count+"/metrics?get=0.busyTimeMsPerSecond,1.busyTimeMsPerSecond", &vals)
			return len(vals) == 2 && num(at(f.obj("/jobs/"+jid+"/checkpoints"), "counts", "completed")) > 0
		})
	}
	ready()
	scrape := func() (map[string]string, []promSample) {
		code, body := f.get("/metrics")
		if code != http.StatusOK {
			t.Fatalf("/metrics: %d %s", code, body)
		}
		return parseProm(t, string(body))
	}

	types, samples := scrape()
	if len(find(samples, "weir_subtask_records_in_total", map[string]string{"job_id": jid})) == 0 {
		t.Error("weir's names: no weir_subtask_records_in_total")
	}
	for name := range types {
		if strings.HasPrefix(name, "flink_") {
			t.Errorf("weir's names: %s", name)
		}
	}

	f.serve(web.Job{Master: launch.MasterOf(f.client), Done: f.client.Done(), Err: f.client.Wait, Config: f.env.Config()}, web.WithFlinkMetricNames())
	ready()
	types, samples = scrape()
	for name, ty := range types {
		if !strings.HasPrefix(name, "flink_") || ty != "gauge" {
			t.Errorf("Flink's names: %s is a %s, want flink_ gauges only", name, ty)
		}
	}
	task := map[string]string{"job_id": jid, "job_name": "numbers", "task_id": count, "subtask_index": "1", "task_attempt_num": "0"}
	for _, name := range []string{"flink_taskmanager_job_task_numRecordsIn", "flink_taskmanager_job_task_busyTimeMsPerSecond",
		"flink_taskmanager_job_task_backPressuredTimeMsPerSecond", "flink_taskmanager_job_task_idleTimeMsPerSecond",
		"flink_taskmanager_job_task_numRecordsInPerSecond", "flink_taskmanager_job_task_operator_numRecordsIn",
		"flink_taskmanager_job_task_operator_currentInputWatermark", "flink_taskmanager_job_task_operator_numRecordsOut"} {
		got := find(samples, name, task)
		if len(got) != 1 {
			t.Errorf("%s%v: %d samples, want 1", name, task, len(got))
			continue
		}
		for _, l := range []string{"task_name", "tm_id"} {
			if got[0].labels[l] == "" {
				t.Errorf("%s: no label %s: %v", name, l, got[0].labels)
			}
		}
		if strings.Contains(name, "_operator_") && (got[0].labels["operator_id"] != count || got[0].labels["operator_name"] == "") {
			t.Errorf("%s: operator labels %v", name, got[0].labels)
		}
	}
	// The same figures as the REST API's, for counters that only grow: the
	// scrape came first, so it is not above the answer.
	in := find(samples, "flink_taskmanager_job_task_numRecordsIn", task)
	var vals []map[string]string
	f.decode("/jobs/"+jid+"/vertices/"+count+"/metrics?get=1.numRecordsIn", &vals)
	if len(in) == 1 && (in[0].value <= 0 || len(vals) != 1 || in[0].value > parseFloat(t, vals[0]["value"])) {
		t.Errorf("numRecordsIn: scraped %v, then the REST API said %v", in[0].value, vals)
	}
	job := map[string]string{"job_id": jid, "job_name": "numbers"}
	for _, name := range []string{"flink_jobmanager_job_lastCheckpointDuration", "flink_jobmanager_job_numberOfCompletedCheckpoints",
		"flink_jobmanager_job_uptime", "flink_jobmanager_job_numRestarts", "flink_jobmanager_job_lastCheckpointFullSize"} {
		if len(find(samples, name, job)) != 1 {
			t.Errorf("no %s%v", name, job)
		}
	}
	if got := find(samples, "flink_jobmanager_job_numberOfCompletedCheckpoints", job); len(got) == 1 && got[0].value < 1 {
		t.Errorf("completed checkpoints %v", got[0].value)
	}
	for _, name := range []string{"flink_jobmanager_numRegisteredTaskManagers", "flink_jobmanager_taskSlotsTotal",
		"flink_jobmanager_Status_JVM_Memory_Heap_Used", "flink_taskmanager_Status_JVM_Memory_Heap_Used"} {
		if got := find(samples, name, nil); len(got) != 1 || got[0].value <= 0 {
			t.Errorf("%s: %v, want one positive sample", name, got)
		}
	}
}

func parseFloat(t *testing.T, s string) float64 {
	t.Helper()
	x, err := strconv.ParseFloat(s, 64)
	if err != nil {
		t.Fatalf("%q: %v", s, err)
	}
	return x
}
