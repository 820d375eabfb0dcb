package web_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/weirstream/weir/internal/launch"
	"github.com/weirstream/weir/internal/web"
)

// Field lists of Flink's REST responses (flink.md section 7).
var (
	checkpointFields = []string{"@class:string", "id:number", "status:string", "is_savepoint:bool", "trigger_timestamp:number",
		"latest_ack_timestamp:number", "checkpointed_size:number", "state_size:number", "end_to_end_duration:number",
		"alignment_buffered:number", "processed_data:number", "persisted_data:number", "num_subtasks:number",
		"num_acknowledged_subtasks:number", "checkpoint_type:string", "tasks:object"}
	summaryFields     = []string{"min:number", "max:number", "avg:number", "p50:number", "p90:number", "p95:number", "p99:number", "p999:number"}
	taskFields        = []string{"id:number", "status:string", "latest_ack_timestamp:number", "checkpointed_size:number", "state_size:number", "end_to_end_duration:number", "alignment_buffered:number", "processed_data:number", "persisted_data:number", "num_subtasks:number", "num_acknowledged_subtasks:number"}
	subtaskCkptFields = []string{"index:number", "status:string", "ack_timestamp:number", "end_to_end_duration:number", "state_size:number", "checkpointed_size:number", "checkpoint:object", "alignment:object", "start_delay:number", "unaligned_checkpoint:bool", "aborted:bool"}
)

// TestEndpointsAgainstARunningJob drives one job through checkpoints, a
// slow operator (backpressure), a blocked one (a checkpoint that expires),
// an injected failure (a restore) and its cancellation, and checks every
// endpoint's JSON against Flink's field names and types on the way.
func TestEndpointsAgainstARunningJob(t *testing.T) {
	dir := t.TempDir()
	f := startJob(t, []string{
		"execution.checkpointing.interval=15 ms",
		"execution.checkpointing.timeout=300 ms",
		"execution.checkpointing.tolerable-failed-checkpoints=1000",
		"execution.checkpointing.num-retained=2",
		"execution.checkpointing.externalized-checkpoint-retention=RETAIN_ON_CANCELLATION",
		"execution.checkpointing.dir=" + dir,
		"web.checkpoints.history=50",
		"restart-strategy.type=fixed-delay", "restart-strategy.fixed-delay.attempts=5", "restart-strategy.fixed-delay.delay=0 ms",
	})
	jid := f.jobID()
	numbers, count := web.VertexID("numbers"), web.VertexID("count")
	ckpts := "/jobs/" + jid + "/checkpoints"
	completed := func() float64 { return num(at(f.obj(ckpts), "counts", "completed")) }
	waitFor(t, "two completed checkpoints", func() bool { return completed() >= 2 })

	t.Run("overview", func(t *testing.T) {
		o := f.obj("/overview")
		fields(t, "overview", o, "taskmanagers:number", "slots-total:number", "slots-available:number", "jobs-running:number", "jobs-finished:number", "jobs-cancelled:number", "jobs-failed:number")
		if num(o["taskmanagers"]) != 1 || num(o["slots-total"]) != 2 || num(o["jobs-running"]) != 1 {
			t.Errorf("overview %v", o)
		}
		jobs := f.obj("/jobs")
		fields(t, "jobs[0]", at(jobs, "jobs", "0"), "id:string", "status:string")
		if at(jobs, "jobs", "0", "id") != jid || at(jobs, "jobs", "0", "status") != "RUNNING" {
			t.Errorf("/jobs %v", jobs)
		}
		fields(t, "jobs/overview", at(f.obj("/jobs/overview"), "jobs", "0"), "jid:string", "name:string", "state:string", "start-time:number", "end-time:number", "duration:number", "last-modification:number", "tasks:object")
	})

	t.Run("job", func(t *testing.T) {
		waitFor(t, "records through both vertices", func() bool {
			j := f.obj("/jobs/" + jid)
			return num(at(j, "vertices", "1", "metrics", "read-records")) > 0
		})
		j := f.obj("/jobs/" + jid)
		fields(t, "job", j, "jid:string", "name:string", "isStoppable:bool", "state:string", "job-type:string", "start-time:number", "end-time:number",
			"duration:number", "maxParallelism:number", "now:number", "timestamps:object", "vertices:array", "status-counts:object", "plan:object")
		if j["jid"] != jid || j["name"] != "numbers" || j["state"] != "RUNNING" || num(j["end-time"]) != -1 || num(j["start-time"]) <= 0 {
			t.Errorf("job %v", j)
		}
		vs := j["vertices"].([]any)
		if len(vs) != 2 {
			t.Fatalf("%d vertices, want 2", len(vs))
		}
		for i, v := range vs {
			fields(t, fmt.Sprint("vertex ", i), v, "id:string", "name:string", "maxParallelism:number", "parallelism:number", "status:string",
				"start-time:number", "end-time:number", "duration:number", "tasks:object", "metrics:object")
			fields(t, fmt.Sprint("vertex ", i, " metrics"), at(v, "metrics"), "read-records:number", "read-records-complete:bool",
				"write-records:number", "write-records-complete:bool", "accumulated-backpressured-time:number",
				"read-bytes:number", "read-bytes-complete:bool", "write-bytes:number", "write-bytes-complete:bool")
		}
		// In one process every channel hands records over in memory: no
		// bytes, and the counts are complete only for the source's reads
		// and the last vertex's writes, which have no channels.
		for i, v := range vs {
			if num(at(v, "metrics", "read-bytes")) != 0 || num(at(v, "metrics", "write-bytes")) != 0 ||
				at(v, "metrics", "read-bytes-complete") != (i == 0) || at(v, "metrics", "write-bytes-complete") != (i == 1) {
				t.Errorf("vertex %d bytes in one process: %v", i, at(v, "metrics"))
			}
		}
		if at(vs[0], "id") != numbers || at(vs[1], "id") != count || at(vs[0], "name") != "numbers" || num(at(vs[1], "parallelism")) != 2 {
			t.Errorf("vertices %v", vs)
		}
		if num(at(vs[0], "metrics", "read-records")) != 0 || num(at(vs[0], "metrics", "write-records")) <= 0 || num(at(vs[1], "metrics", "write-records")) != 0 {
			t.Errorf("records: a source reads 0 and writes what it emits, a vertex without outputs writes 0: %v", vs)
		}
		if num(at(vs[0], "tasks", "RUNNING")) != 2 || num(at(j, "status-counts", "RUNNING")) != 2 {
			t.Errorf("task counts %v, %v", at(vs[0], "tasks"), j["status-counts"])
		}
		plan := j["plan"]
		fields(t, "plan", plan, "jid:string", "name:string", "type:string", "nodes:array")
		node := at(plan, "nodes", "1")
		fields(t, "plan node", node, "id:string", "parallelism:number", "operator:string", "operator_strategy:string", "description:string", "inputs:array", "optimizer_properties:object")
		in := at(node, "inputs", "0")
		fields(t, "plan input", in, "num:number", "id:string", "ship_strategy:string", "exchange:string")
		if at(in, "id") != numbers || at(in, "ship_strategy") != "HASH" {
			t.Errorf("plan input %v", in)
		}
	})

	t.Run("vertex", func(t *testing.T) {
		path := "/jobs/" + jid + "/vertices/" + count
		waitFor(t, "watermarks on both count subtasks", func() bool {
			v := f.obj(path)
			return at(v, "subtasks", "0", "watermark") != nil && at(v, "subtasks", "1", "watermark") != nil
		})
		v := f.obj(path)
		fields(t, "vertex", v, "id:string", "name:string", "parallelism:number", "maxParallelism:number", "now:number", "subtasks:array")
		subs := v["subtasks"].([]any)
		if len(subs) != 2 {
			t.Fatalf("%d subtasks", len(subs))
		}
		for i, s := range subs {
			fields(t, fmt.Sprint("subtask ", i), s, "subtask:number", "status:string", "attempt:number", "metrics:object", "watermark:number", "last-checkpoint:number")
			if num(at(s, "subtask")) != float64(i) || at(s, "status") != "RUNNING" || num(at(s, "attempt")) != 0 || num(at(s, "metrics", "read-records")) <= 0 {
				t.Errorf("subtask %d: %v", i, s)
			}
		}
		var wms []map[string]string
		f.decode("/jobs/"+jid+"/vertices/"+count+"/watermarks", &wms)
		if len(wms) != 2 || wms[0]["id"] != "0.currentInputWatermark" || wms[1]["value"] == "" {
			t.Errorf("watermarks %v", wms)
		}
	})

	t.Run("backpressure", func(t *testing.T) {
		path := "/jobs/" + jid + "/vertices/" + numbers + "/backpressure"
		f.faults.slow.Store(true)
		defer f.faults.slow.Store(false)
		var b map[string]any
		waitFor(t, "high backpressure on the source while count is slow", func() bool {
			b = f.obj(path)
			return b["backpressureLevel"] == "high"
		})
		fields(t, "backpressure", b, "status:string", "backpressure-level:string", "backpressureLevel:string", "end-timestamp:number", "subtasks:array")
		if b["status"] != "ok" || b["backpressure-level"] != "high" {
			t.Errorf("backpressure %v", b)
		}
		worst := 0.0
		for i, s := range b["subtasks"].([]any) {
			fields(t, fmt.Sprint("subtask ", i), s, "subtask:number", "attempt-number:number", "backpressure-level:string", "backpressureLevel:string", "ratio:number")
			r := num(at(s, "ratio"))
			if r < 0 || r > 1 {
				t.Errorf("ratio %v", r)
			}
			worst = max(worst, r)
			if lvl := at(s, "backpressureLevel"); (r > 0.5) != (lvl == "high") {
				t.Errorf("subtask %d: ratio %v, level %v", i, r, lvl)
			}
		}
		if worst <= 0.5 {
			t.Errorf("vertex level high but worst ratio %v", worst)
		}
	})

	var failedID float64
	t.Run("failed checkpoint", func(t *testing.T) {
		f.faults.blockNow()
		var c map[string]any
		// An earlier checkpoint may have failed too (the slow source of
		// the backpressure test can make one expire): wait for one that
		// count[0] did not acknowledge.
		waitFor(t, "a checkpoint to expire while count[0] is blocked", func() bool {
			c = f.obj(ckpts)
			if num(at(c, "counts", "failed")) < 1 {
				return false
			}
			d := f.obj(fmt.Sprintf("%s/details/%.0f", ckpts, num(at(c, "latest", "failed", "id"))))
			task := at(d, "tasks", count)
			return task != nil && num(at(task, "num_acknowledged_subtasks")) < num(at(task, "num_subtasks"))
		})
		failed := at(c, "latest", "failed")
		fields(t, "latest.failed", failed, append(checkpointFields, "failure_timestamp:number", "failure_message:string")...)
		failedID = num(at(failed, "id"))
		if at(failed, "@class") != "failed" || at(failed, "status") != "FAILED" {
			t.Errorf("latest.failed %v", failed)
		}
		d := f.obj(fmt.Sprintf("%s/details/%.0f", ckpts, failedID))
		fields(t, "failed details", d, append(checkpointFields, "failure_timestamp:number", "failure_message:string")...)
		task := at(d, "tasks", count)
		fields(t, "failed task", task, taskFields...)
		for _, k := range []string{"summary", "subtasks"} {
			if _, ok := task.(map[string]any)[k]; ok {
				t.Errorf("failed task in the checkpoint details has %q: %v", k, task)
			}
		}
		if num(at(task, "num_acknowledged_subtasks")) >= num(at(task, "num_subtasks")) {
			t.Errorf("a failed checkpoint with every count subtask acknowledged: %v", task)
		}
		subs := f.obj(fmt.Sprintf("%s/details/%.0f/subtasks/%s", ckpts, failedID, count))
		pending := at(subs, "subtasks", "0").(map[string]any)
		if pending["status"] != "pending_or_failed" || len(pending) != 2 {
			t.Errorf("count[0] in the expired checkpoint: %v", pending)
		}
		code, body := f.get(fmt.Sprintf("%s/%.0f/cut", ckpts, failedID))
		if code != http.StatusNotFound || !strings.Contains(string(body), "only a completed checkpoint has a cut") {
			t.Errorf("cut of a failed checkpoint: %d %s", code, body)
		}
		f.faults.release()
	})

	t.Run("restore", func(t *testing.T) {
		before := num(at(f.obj(ckpts), "latest", "completed", "id"))
		f.faults.fail.Store(true)
		waitFor(t, "count redeployed as attempt 1 and a checkpoint after it", func() bool {
			v := f.obj("/jobs/" + jid + "/vertices/" + count)
			return num(at(v, "subtasks", "0", "attempt")) >= 1 && num(at(f.obj(ckpts), "latest", "completed", "id")) > before+1
		})
		code, body := f.get("/metrics")
		if code != http.StatusOK {
			t.Fatalf("/metrics: %d", code)
		}
		_, samples := parseProm(t, string(body))
		if r := find(samples, "weir_job_restarts_total", map[string]string{"job_id": jid}); len(r) != 1 || r[0].value < 1 {
			t.Errorf("restarts %v", r)
		}
		if a := find(samples, "weir_subtask_attempt", map[string]string{"vertex": "count", "subtask": "0"}); len(a) != 1 || a[0].value < 1 {
			t.Errorf("attempt %v", a)
		}
	})

	t.Run("checkpoints", func(t *testing.T) {
		c := f.obj(ckpts)
		fields(t, "checkpoints", c, "counts:object", "summary:object", "latest:object", "history:array")
		fields(t, "counts", c["counts"], "restored:number", "total:number", "in_progress:number", "completed:number", "failed:number")
		for _, k := range []string{"checkpointed_size", "state_size", "end_to_end_duration", "alignment_buffered", "processed_data", "persisted_data"} {
			fields(t, "summary."+k, at(c, "summary", k), summaryFields...)
		}
		fields(t, "latest", c["latest"], "completed:object", "savepoint:null", "failed:object", "restored:null|object")
		done := at(c, "latest", "completed")
		fields(t, "latest.completed", done, append(checkpointFields, "external_path:string", "discarded:bool")...)
		if at(done, "@class") != "completed" || at(done, "checkpoint_type") != "CHECKPOINT" || !strings.Contains(at(done, "external_path").(string), "chk-") {
			t.Errorf("latest.completed %v", done)
		}
		for i, h := range c["history"].([]any) {
			fields(t, fmt.Sprint("history ", i), h, checkpointFields...)
			if len(at(h, "tasks").(map[string]any)) != 0 {
				t.Errorf("history %d has per-task statistics; Flink's list has none", i)
			}
		}
		id := num(at(done, "id"))
		d := f.obj(fmt.Sprintf("%s/details/%.0f", ckpts, id))
		fields(t, "details", d, append(checkpointFields, "external_path:string", "discarded:bool")...)
		tasks := d["tasks"].(map[string]any)
		if len(tasks) != 2 || tasks[numbers] == nil || tasks[count] == nil {
			t.Fatalf("details tasks %v: want both vertices by id", keys(tasks))
		}
		fields(t, "details task", tasks[count], taskFields...)
		if _, has := tasks[count].(map[string]any)["subtasks"]; has {
			t.Error("details list subtasks per task; Flink's do not")
		}
		st := f.obj(fmt.Sprintf("%s/details/%.0f/subtasks/%s", ckpts, id, count))
		fields(t, "task with subtasks", st, append(taskFields, "summary:object", "subtasks:array")...)
		fields(t, "task summary", st["summary"], "checkpointed_size:object", "state_size:object", "end_to_end_duration:object", "checkpoint_duration:object", "alignment:object", "start_delay:object")
		fields(t, "summary.checkpoint_duration.sync", at(st, "summary", "checkpoint_duration", "sync"), summaryFields...)
		fields(t, "summary.alignment.duration", at(st, "summary", "alignment", "duration"), summaryFields...)
		sub := at(st, "subtasks", "1")
		fields(t, "subtask", sub, subtaskCkptFields...)
		fields(t, "subtask.checkpoint", at(sub, "checkpoint"), "sync:number", "async:number")
		fields(t, "subtask.alignment", at(sub, "alignment"), "buffered:number", "processed:number", "persisted:number", "duration:number")
		if at(sub, "status") != "completed" || num(at(sub, "state_size")) <= 0 {
			t.Errorf("subtask %v", sub)
		}

		cfg := f.obj(ckpts + "/config")
		fields(t, "config", cfg, "mode:string", "interval:number", "timeout:number", "min_pause:number", "max_concurrent:number", "externalization:object",
			"state_backend:string", "checkpoint_storage:string", "unaligned_checkpoints:bool", "tolerable_failed_checkpoints:number",
			"aligned_checkpoint_timeout:number", "checkpoints_after_tasks_finish:bool", "state_changelog_enabled:bool",
			"changelog_periodic_materialization_interval:number", "changelog_storage:string")
		fields(t, "externalization", cfg["externalization"], "enabled:bool", "delete_on_cancellation:bool")
		if cfg["mode"] != "exactly_once" || num(cfg["interval"]) != 15 || num(cfg["timeout"]) != 300 || cfg["checkpoint_storage"] != "FileSystemCheckpointStorage" ||
			cfg["state_backend"] != "HashMapStateBackend" || at(cfg, "externalization", "enabled") != true || num(cfg["tolerable_failed_checkpoints"]) != 1000 {
			t.Errorf("config %v", cfg)
		}
	})

	t.Run("metrics", func(t *testing.T) {
		code, body := f.get("/metrics")
		if code != http.StatusOK {
			t.Fatalf("/metrics: %d", code)
		}
		types, samples := parseProm(t, string(body))
		for _, s := range samples {
			if s.labels["job_id"] != jid {
				t.Errorf("%s without job_id", s.name)
			}
		}
		for name, ty := range map[string]string{
			"weir_job_info": "gauge", "weir_job_start_time_seconds": "gauge", "weir_job_restarts_total": "counter",
			"weir_vertex_records_in_total": "counter", "weir_vertex_records_out_total": "counter", "weir_vertex_watermark_lag_seconds": "gauge",
			"weir_subtask_records_in_total": "counter", "weir_subtask_records_out_total": "counter", "weir_subtask_watermark_seconds": "gauge",
			"weir_subtask_backpressured_seconds_total": "counter", "weir_subtask_input_backpressure_seconds_total": "counter",
			"weir_checkpoints_total": "counter", "weir_checkpoints_completed_total": "counter", "weir_checkpoints_failed_total": "counter",
			"weir_checkpoints_in_progress": "gauge", "weir_checkpoints_restored_total": "counter",
			"weir_checkpoint_duration_seconds": "summary", "weir_checkpoint_size_bytes": "summary",
			"weir_last_checkpoint_id": "gauge", "weir_last_checkpoint_duration_seconds": "gauge", "weir_last_checkpoint_size_bytes": "gauge",
			"weir_last_checkpoint_alignment_seconds": "gauge", "weir_last_checkpoint_start_delay_seconds": "gauge",
		} {
			if types[name] != ty {
				t.Errorf("%s: type %q, want %s", name, types[name], ty)
			}
		}
		for _, want := range []struct {
			name   string
			labels map[string]string
			min    float64
		}{
			{"weir_subtask_records_in_total", map[string]string{"vertex": "numbers", "subtask": "1"}, 1},
			{"weir_subtask_records_out_total", map[string]string{"vertex": "numbers", "subtask": "0"}, 1},
			{"weir_vertex_records_in_total", map[string]string{"vertex": "count"}, 1},
			{"weir_vertex_watermark_lag_seconds", map[string]string{"vertex": "count"}, 1},
			{"weir_checkpoints_completed_total", nil, 2},
			{"weir_checkpoints_failed_total", nil, 1},
			{"weir_checkpoint_duration_seconds", map[string]string{"quantile": "0.99"}, 0},
			{"weir_checkpoint_duration_seconds_count", nil, 2},
			{"weir_checkpoint_size_bytes_sum", nil, 1},
			{"weir_last_checkpoint_size_bytes", nil, 1},
			{"weir_last_checkpoint_alignment_seconds", map[string]string{"vertex": "count", "subtask": "1"}, 0},
		} {
			got := find(samples, want.name, want.labels)
			if len(got) != 1 || got[0].value < want.min {
				t.Errorf("%s%v: %v, want one sample ≥ %v", want.name, want.labels, got, want.min)
			}
		}
	})

	t.Run("errors", func(t *testing.T) {
		for _, tc := range []struct {
			path string
			code int
		}{
			{"/jobs/not!an-id", http.StatusBadRequest},
			{"/jobs/0123456789abcdef0123456789abcdef", http.StatusNotFound},
			{"/jobs/" + jid + "/vertices/numbers", http.StatusBadRequest},
			{"/jobs/" + jid + "/vertices/0123456789abcdef0123456789abcdeg", http.StatusBadRequest},
			{"/jobs/" + jid + "/vertices/0123456789abcdef0123456789abcdef", http.StatusNotFound},
			{"/jobs/" + jid + "/vertices/0123456789abcdef0123456789abcdef/backpressure", http.StatusNotFound},
			{ckpts + "/details/abc", http.StatusBadRequest},
			{ckpts + "/details/-1", http.StatusBadRequest},
			{ckpts + "/details/999999", http.StatusNotFound},
			{ckpts + "/details/1/subtasks/zz", http.StatusBadRequest},
			{ckpts + "/x/cut", http.StatusBadRequest},
			{ckpts + "/999999/cut", http.StatusNotFound},
			{"/jobs/" + jid + "/nothing", http.StatusNotFound},
			{"/nothing", http.StatusNotFound},
		} {
			code, body := f.get(tc.path)
			var e struct{ Errors []string }
			if code != tc.code || json.Unmarshal(body, &e) != nil || len(e.Errors) != 1 || e.Errors[0] == "" {
				t.Errorf("GET %s: %d %s, want %d with {\"errors\":[...]}", tc.path, code, body, tc.code)
			}
		}
		resp, err := http.Post(f.base+ckpts+"/config", "application/json", strings.NewReader("{}"))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusMethodNotAllowed {
			t.Errorf("POST %s/config: %d, want 405", ckpts, resp.StatusCode)
		}
	})

	// Cancel the job: the statistics and the retained checkpoints stay.
	f.faults.release()
	f.cancel()
	<-f.client.Done()
	waitFor(t, "the job shown as CANCELED", func() bool { return at(f.obj("/jobs"), "jobs", "0", "status") == "CANCELED" })
	if o := f.obj("/overview"); num(o["jobs-cancelled"]) != 1 || num(o["jobs-running"]) != 0 {
		t.Errorf("overview after cancel %v", o)
	}
	if j := f.obj("/jobs/" + jid); num(j["end-time"]) < num(j["start-time"]) || j["state"] != "CANCELED" {
		t.Errorf("job after cancel: state %v, start %v, end %v", j["state"], j["start-time"], j["end-time"])
	}

	c := f.obj(ckpts)
	var done []float64
	for _, h := range c["history"].([]any) {
		if at(h, "status") == "COMPLETED" {
			done = append(done, num(at(h, "id")))
		}
	}
	slices.Sort(done)
	if len(done) < 3 {
		t.Fatalf("%d completed checkpoints in the history", len(done))
	}
	latest, previous, old := done[len(done)-1], done[len(done)-2], done[0]

	t.Run("cut", func(t *testing.T) {
		cut := f.obj(fmt.Sprintf("%s/%.0f/cut", ckpts, latest))
		fields(t, "cut", cut, "jid:string", "checkpoint_id:number", "status:string", "trigger_timestamp:number", "latest_ack_timestamp:number",
			"end_to_end_duration:number", "state_size:number", "checkpointed_size:number", "metadata:object", "sources:array", "operators:array", "vertices:array", "channels:array")
		if at(cut, "metadata", "available") != true || !strings.Contains(fmt.Sprint(at(cut, "metadata", "path")), fmt.Sprintf("chk-%.0f", latest)) {
			t.Errorf("metadata %v", cut["metadata"])
		}
		src := at(cut, "sources", "0")
		fields(t, "source", src, "vertex:string", "uid:string", "name:string", "splits:array")
		splits := at(src, "splits").([]any)
		if at(src, "vertex") != numbers || len(splits) != 4 {
			t.Fatalf("source %v", src)
		}
		subtasks := map[float64]int{}
		for i, s := range splits {
			fields(t, fmt.Sprint("split ", i), s, "split:string", "subtask:number", "offset:number", "ended:bool")
			if num(at(s, "offset")) <= 0 {
				t.Errorf("split %v: no position", s)
			}
			if _, has := s.(map[string]any)["offsets_to_replay"]; has {
				t.Errorf("split %v: a replay count without a current position", s)
			}
			subtasks[num(at(s, "subtask"))]++
		}
		if subtasks[0] != 2 || subtasks[1] != 2 {
			t.Errorf("splits per subtask %v, want 2 and 2", subtasks)
		}
		ops := map[string]any{}
		for _, op := range cut["operators"].([]any) {
			fields(t, "operator", op, "uid:string", "parallelism:number", "max_parallelism:number", "state_size:number", "subtasks:array")
			ops[at(op, "uid").(string)] = op
		}
		cnt := ops["count"]
		if cnt == nil || at(cnt, "vertex") != count || num(at(cnt, "subtasks", "1", "keyed_state_size")) <= 0 || at(cnt, "subtasks", "1", "key_groups") == nil {
			t.Errorf("count's state in the cut: %v", cnt)
		}
		if num(at(ops["numbers"], "subtasks", "0", "operator_state_size")) <= 0 {
			t.Errorf("the source's positions are not in its operator state: %v", ops["numbers"])
		}
		vs := cut["vertices"].([]any)
		if len(vs) != 2 {
			t.Fatalf("vertices %v", vs)
		}
		sub := at(vs[1], "subtasks", "0")
		fields(t, "cut subtask", sub, "index:number", "status:string", "state_size:number", "start_delay:number", "alignment_duration:number",
			"first_barrier_timestamp:number", "last_barrier_timestamp:number", "sync_duration:number", "async_duration:number", "ack_timestamp:number")
		if num(at(sub, "last_barrier_timestamp")) < num(at(sub, "first_barrier_timestamp")) || num(at(sub, "first_barrier_timestamp")) < num(cut["trigger_timestamp"]) {
			t.Errorf("barrier times out of order: %v (trigger %v)", sub, cut["trigger_timestamp"])
		}
		chans := cut["channels"].([]any)
		if len(chans) != 4 {
			t.Fatalf("%d channels, want 2×2", len(chans))
		}
		pairs := map[string]bool{}
		for _, ch := range chans {
			fields(t, "channel", ch, "edge:number", "from:string", "from_subtask:number", "to:string", "to_subtask:number", "input:number",
				"ship_strategy:string", "start_delay:number", "alignment_duration:number")
			if at(ch, "from") != numbers || at(ch, "to") != count || at(ch, "ship_strategy") != "HASH" {
				t.Errorf("channel %v", ch)
			}
			pairs[fmt.Sprint(at(ch, "from_subtask"), "→", at(ch, "to_subtask"))] = true
			if at(ch, "start_delay") != at(vs[1], "subtasks", fmt.Sprint(at(ch, "to_subtask")), "start_delay") {
				t.Errorf("channel %v: not its consumer's start delay", ch)
			}
		}
		if len(pairs) != 4 {
			t.Errorf("channels %v", pairs)
		}

		// An older checkpoint still retained is read from storage; one that
		// retention deleted has no metadata any more.
		prev := f.obj(fmt.Sprintf("%s/%.0f/cut", ckpts, previous))
		if at(prev, "metadata", "available") != true || len(at(prev, "sources", "0", "splits").([]any)) != 4 {
			t.Errorf("cut of retained checkpoint %.0f: %v", previous, prev["metadata"])
		}
		gone := f.obj(fmt.Sprintf("%s/%.0f/cut", ckpts, old))
		if at(gone, "metadata", "available") != false || !strings.Contains(fmt.Sprint(at(gone, "metadata", "reason")), "num-retained") ||
			len(gone["sources"].([]any)) != 0 || len(gone["channels"].([]any)) != 4 {
			t.Errorf("cut of discarded checkpoint %.0f: %v", old, gone)
		}

		// With the sources' current positions known, the cut says how many
		// records a restore would replay.
		g := &fixture{t: t}
		g.serve(web.Job{Master: launch.MasterOf(f.client), Done: f.client.Done(), Err: f.client.Wait, Config: f.env.Config(),
			Positions: func() map[string]map[string]int64 {
				cur := map[string]int64{}
				for _, s := range splits {
					cur[at(s, "split").(string)] = int64(num(at(s, "offset"))) + 100
				}
				return map[string]map[string]int64{"numbers": cur}
			}})
		for _, s := range at(g.obj(fmt.Sprintf("%s/%.0f/cut", ckpts, latest)), "sources", "0", "splits").([]any) {
			if num(at(s, "offsets_to_replay")) != 100 || num(at(s, "current_offset")) != num(at(s, "offset"))+100 {
				t.Errorf("split %v: want 100 records to replay", s)
			}
		}
	})

	t.Run("resume counts a restore", func(t *testing.T) {
		r := startJob(t, []string{
			"execution.checkpointing.interval=1 h",
			"execution.checkpointing.dir=" + dir,
			"execution.state-recovery.path=" + filepath.Join(dir, jid),
		})
		rc := "/jobs/" + r.jobID() + "/checkpoints"
		c := r.obj(rc)
		fields(t, "latest.restored", at(c, "latest", "restored"), "id:number", "restore_timestamp:number", "is_savepoint:bool", "external_path:string")
		if num(at(c, "counts", "restored")) != 1 || num(at(c, "latest", "restored", "id")) != latest {
			t.Errorf("after resuming from checkpoint %.0f: counts %v, restored %v", latest, c["counts"], at(c, "latest", "restored"))
		}
		// The restored checkpoint is not in this job's statistics; its cut
		// comes from the metadata alone.
		cut := r.obj(fmt.Sprintf("%s/%.0f/cut", rc, latest))
		if cut["status"] != "" || at(cut, "metadata", "available") != true || len(at(cut, "sources", "0", "splits").([]any)) != 4 || num(cut["state_size"]) <= 0 {
			t.Errorf("cut of the restored checkpoint: %v", cut)
		}
	})
}

// TestCheckpointsInMemory: without a checkpoint directory, only the latest
// completed checkpoint's metadata is held, and the cut says so for others.
func TestCheckpointsInMemory(t *testing.T) {
	f := startJob(t, []string{"execution.checkpointing.interval=10 ms", "web.checkpoints.history=50"})
	ckpts := "/jobs/" + f.jobID() + "/checkpoints"
	waitFor(t, "three completed checkpoints", func() bool { return num(at(f.obj(ckpts), "counts", "completed")) >= 3 })
	f.cancel()
	<-f.client.Done()
	c := f.obj(ckpts)
	latest := num(at(c, "latest", "completed", "id"))
	if p := at(c, "latest", "completed", "external_path"); p != "<checkpoint-not-externalized>" {
		t.Errorf("external_path %v", p)
	}
	cut := f.obj(fmt.Sprintf("%s/%.0f/cut", ckpts, latest))
	if at(cut, "metadata", "available") != true || at(cut, "metadata", "path") != "<checkpoint-not-externalized>" || len(at(cut, "sources", "0", "splits").([]any)) != 4 {
		t.Errorf("cut of the latest checkpoint in memory: %v", cut)
	}
	var older float64
	for _, h := range c["history"].([]any) {
		if at(h, "status") == "COMPLETED" && num(at(h, "id")) < latest {
			older = num(at(h, "id"))
			break
		}
	}
	cut = f.obj(fmt.Sprintf("%s/%.0f/cut", ckpts, older))
	if at(cut, "metadata", "available") != false || !strings.Contains(fmt.Sprint(at(cut, "metadata", "reason")), "memory") || len(cut["vertices"].([]any)) != 2 {
		t.Errorf("cut of an older checkpoint in memory: %v", cut)
	}
	if s := f.obj(ckpts + "/config")["checkpoint_storage"]; s != "JobManagerCheckpointStorage" {
		t.Errorf("checkpoint_storage %v", s)
	}
}

// TestWithoutCheckpointing: the checkpoint endpoints answer 404, as
// Flink's do, and /metrics has no checkpoint metrics.
func TestWithoutCheckpointing(t *testing.T) {
	f := startJob(t, nil)
	jid := f.jobID()
	waitFor(t, "records", func() bool { return num(at(f.obj("/jobs/"+jid), "vertices", "0", "metrics", "write-records")) > 0 })
	for _, p := range []string{"/checkpoints", "/checkpoints/config", "/checkpoints/details/1", "/checkpoints/1/cut"} {
		if code, body := f.get("/jobs/" + jid + p); code != http.StatusNotFound || !strings.Contains(string(body), "checkpointing is not enabled") {
			t.Errorf("%s: %d %s", p, code, body)
		}
	}
	_, body := f.get("/metrics")
	types, _ := parseProm(t, string(body))
	if types["weir_checkpoints_completed_total"] != "" || types["weir_subtask_records_in_total"] == "" {
		t.Errorf("metric types %v", types)
	}
}

// TestAuth: a token is checked on every request; binding anything but a
// loopback address without one is refused.
func TestAuth(t *testing.T) {
	for _, host := range []string{"0.0.0.0", "", "::", "example.com", "192.0.2.1"} {
		err := web.CheckBind(host, "")
		if err == nil || !strings.Contains(err.Error(), "rest.bind-address") || !strings.Contains(err.Error(), "rest.auth-token") {
			t.Errorf("bind %q without a token: %v", host, err)
		}
	}
	for _, host := range []string{"localhost", "127.0.0.1", "::1", "[::1]", "127.0.0.2"} {
		if err := web.CheckBind(host, ""); err != nil {
			t.Errorf("bind %q: %v", host, err)
		}
	}

	f := startJob(t, nil)
	srv, err := web.New(web.Job{Master: launch.MasterOf(f.client), Done: f.client.Done(), Err: f.client.Wait}, web.WithLogger(quiet))
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	if _, _, err := srv.Listen(context.Background(), "0.0.0.0", 0); err == nil || !strings.Contains(err.Error(), "rest.auth-token") {
		t.Fatalf("listening on 0.0.0.0 without a token: %v", err)
	}

	f.serve(web.Job{Master: launch.MasterOf(f.client), Done: f.client.Done(), Err: f.client.Wait}, web.WithAuthToken("s3cret"))
	for _, path := range []string{"/overview", "/jobs/" + f.jobID(), "/metrics", "/nothing"} {
		for _, tok := range []string{"", "wrong", "s3cret-but-longer", "S3CRET"} {
			f.token = tok
			code, body := f.get(path)
			if code != http.StatusUnauthorized || !strings.Contains(string(body), `"errors"`) {
				t.Errorf("GET %s with token %q: %d %s", path, tok, code, body)
			}
		}
	}
	f.token = "s3cret"
	if code, _ := f.get("/overview"); code != http.StatusOK {
		t.Errorf("with the token: %d", code)
	}

	// Off loopback, with a token.
	srv2, err := web.New(web.Job{Master: launch.MasterOf(f.client)}, web.WithAuthToken("s3cret"), web.WithLogger(quiet))
	if err != nil {
		t.Fatal(err)
	}
	defer srv2.Close()
	addr, stop, err := srv2.Listen(context.Background(), "0.0.0.0", 0)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	g := &fixture{t: t, base: "http://127.0.0.1:" + port}
	if code, _ := g.get("/overview"); code != http.StatusUnauthorized {
		t.Errorf("0.0.0.0 without the token: %d", code)
	}
	g.token = "s3cret"
	if code, _ := g.get("/overview"); code != http.StatusOK {
		t.Errorf("0.0.0.0 with the token: %d", code)
	}
}

// TestBadPathsAnswerBriefly: probes for the UI's files outside its
// assets answer 404, and an error repeats at most 64 characters of a long
// id or path, with an ellipsis, from a job's server and from a directory.
func TestBadPathsAnswerBriefly(t *testing.T) {
	f := startJob(t, []string{"execution.checkpointing.interval=50 ms"})
	dir := web.NewDirectory(nil, web.WithLogger(quiet))
	if err := dir.Add(web.Job{Master: launch.MasterOf(f.client), Done: f.client.Done(), Err: f.client.Wait}); err != nil {
		t.Fatal(err)
	}
	addr, stop, err := dir.Listen(context.Background(), "127.0.0.1", 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		stop()
		dir.Close()
	})
	long := strings.Repeat("a", 5000)
	jid := f.jobID()
	for _, g := range []*fixture{f, {t: t, base: "http://" + addr}} {
		for _, p := range []string{"/ui/%c0%ae%c0%ae/etc/passwd", "/ui/%c0%ae%c0%ae/%c0%ae%c0%ae/etc/passwd", "/ui/%ff", "/ui/..%2findex.html"} {
			if code, body := g.get(p); code != http.StatusNotFound {
				t.Errorf("GET %s: %d %s, want 404", p, code, body)
			}
		}
		for _, c := range []struct {
			path string
			code int
		}{
			{"/jobs/" + long, http.StatusBadRequest},
			{"/jobs/" + long + "/checkpoints", http.StatusBadRequest},
			{"/jobs/" + jid + "/vertices/" + long, http.StatusBadRequest},
			{"/jobs/" + jid + "/checkpoints/details/" + strings.Repeat("9", 5000), http.StatusBadRequest},
			{"/nothing/" + long, http.StatusNotFound},
			{"/jobs/" + jid + "/nothing/" + long, http.StatusNotFound},
		} {
			code, body := g.get(c.path)
			var e struct{ Errors []string }
			if code != c.code || json.Unmarshal(body, &e) != nil || len(e.Errors) != 1 {
				t.Errorf("GET %.80s…: %d %.200s, want %d with an error", c.path, code, body, c.code)
				continue
			}
			if msg := e.Errors[0]; len(msg) > 200 || !strings.Contains(msg, "…") ||
				strings.Contains(msg, strings.Repeat("a", 65)) || strings.Contains(msg, strings.Repeat("9", 65)) {
				t.Errorf("GET %.80s…: error %q, want the id cut to 64 characters with an ellipsis", c.path, msg)
			}
		}
	}
}

// TestUnalignedCheckpointCut: with unaligned checkpoints and a slow keyed
// operator, checkpoints complete as UNALIGNED_CHECKPOINT with persisted
// in-flight data, and the cut of one shows, per channel, the records its
// barriers overtook. Checkpoints go to a directory and are all retained,
// so the cut of any of them can be read.
func TestUnalignedCheckpointCut(t *testing.T) {
	f := startJob(t, []string{"execution.checkpointing.interval=10 ms", "execution.checkpointing.unaligned.enabled=true", "web.checkpoints.history=1000",
		"execution.checkpointing.dir=" + t.TempDir(), "execution.checkpointing.num-retained=1000"})
	ckpts := "/jobs/" + f.jobID() + "/checkpoints"
	f.faults.slow.Store(true)
	var id float64
	waitFor(t, "an unaligned checkpoint that persisted records in flight", func() bool {
		for _, h := range f.obj(ckpts)["history"].([]any) {
			if at(h, "status") == "COMPLETED" && at(h, "checkpoint_type") == "UNALIGNED_CHECKPOINT" && num(at(h, "persisted_data")) > 0 {
				id = num(at(h, "id"))
				return true
			}
		}
		return false
	})
	f.faults.slow.Store(false)
	cut := f.obj(fmt.Sprintf("%s/%.0f/cut", ckpts, id))
	var records, bytes float64
	for _, c := range cut["channels"].([]any) {
		records += num(at(c, "in_flight_records"))
		bytes += num(at(c, "in_flight_bytes"))
	}
	if at(cut, "metadata", "available") != true || records == 0 || bytes == 0 {
		t.Fatalf("cut of checkpoint %.0f, which persisted in-flight data: %.0f records, %.0f bytes in flight on its channels; metadata %v", id, records, bytes, at(cut, "metadata"))
	}
	t.Logf("checkpoint %.0f: %.0f records (%.0f bytes) in flight at the cut", id, records, bytes)
}
