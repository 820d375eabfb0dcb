package web_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/weirstream/weir/config"
	"github.com/weirstream/weir/internal/launch"
	"github.com/weirstream/weir/internal/procstat"
	"github.com/weirstream/weir/internal/web"
)

// TestDashboardEndpoints checks the endpoints Flink's web dashboard reads
// besides a job's pages against a running job: their fields and types,
// that the job's configuration is listed with its secrets masked, that
// the task metrics answer ?get=, ?agg= and ?subtasks= as Flink's do, and
// that every one of them requires the token.
func TestDashboardEndpoints(t *testing.T) {
	const restSecret, clusterSecret = "rest-s3cret-value", "cluster-s3cret-value"
	const s3Access, s3Secret = "s3-access-key-id", "s3-secret-key-value"
	f := startJob(t, []string{
		"execution.checkpointing.interval=50 ms",
		"rest.auth-token=" + restSecret,
		"cluster.auth-token=" + clusterSecret,
		"s3.access-key=" + s3Access,
		"s3.secret-key=" + s3Secret,
	})
	f.serve(web.Job{Master: launch.MasterOf(f.client), Done: f.client.Done(), Err: f.client.Wait, Config: f.env.Config()},
		web.WithAuthToken(restSecret))
	f.token = restSecret
	jid := f.jobID()
	numbers, count := web.VertexID("numbers"), web.VertexID("count")
	vpath := func(vid string) string { return "/jobs/" + jid + "/vertices/" + vid }

	paths := []string{"/config", "/taskmanagers", "/jobmanager/config", "/jobmanager/environment", "/jobmanager/metrics",
		"/applications/overview", vpath(count) + "/metrics", vpath(count) + "/subtasks/metrics"}
	for _, p := range paths {
		f.token = ""
		if code, _ := f.get(p); code != http.StatusUnauthorized {
			t.Errorf("GET %s without the token: %d, want 401", p, code)
		}
	}
	f.token = restSecret

	t.Run("config", func(t *testing.T) {
		c := f.obj("/config")
		fields(t, "config", c, "refresh-interval:number", "timezone-name:string", "timezone-offset:number", "flink-version:string", "flink-revision:string", "features:object")
		fields(t, "features", c["features"], "web-submit:bool", "web-cancel:bool", "web-rescale:bool", "web-history:bool")
		if !strings.HasPrefix(c["flink-version"].(string), "weir ") || num(c["refresh-interval"]) <= 0 {
			t.Errorf("config %v", c)
		}
		_, off := time.Now().Zone()
		if num(c["timezone-offset"]) != float64(off)*1000 {
			t.Errorf("timezone-offset %v, want %d", c["timezone-offset"], off*1000)
		}
	})

	t.Run("jobmanager", func(t *testing.T) {
		code, body := f.get("/jobmanager/config")
		if code != http.StatusOK {
			t.Fatalf("/jobmanager/config: %d %s", code, body)
		}
		if strings.Contains(string(body), restSecret) || strings.Contains(string(body), clusterSecret) ||
			strings.Contains(string(body), s3Access) || strings.Contains(string(body), s3Secret) {
			t.Fatalf("/jobmanager/config shows a secret: %s", body)
		}
		var entries []map[string]any
		f.decode("/jobmanager/config", &entries)
		got := map[string]any{}
		for i, e := range entries {
			fields(t, fmt.Sprint("config entry ", i), e, "key:string", "value:string")
			got[e["key"].(string)] = e["value"]
		}
		for k, want := range map[string]string{
			"rest.auth-token": "******", "cluster.auth-token": "******",
			"s3.access-key": "******", "s3.secret-key": "******",
			"execution.checkpointing.interval": "50 ms", "parallelism.default": "2",
		} {
			if got[k] != want {
				t.Errorf("%s = %v, want %q", k, got[k], want)
			}
		}

		env := f.obj("/jobmanager/environment")
		fields(t, "environment", env, "jvm:object", "classpath:array")
		fields(t, "jvm", env["jvm"], "version:string", "arch:string", "options:array")
		if !strings.HasPrefix(at(env, "jvm", "version").(string), "go") {
			t.Errorf("environment %v", env)
		}

		var ids []map[string]any
		f.decode("/jobmanager/metrics", &ids)
		if len(ids) == 0 {
			t.Fatal("no job manager metrics")
		}
		for i, m := range ids {
			fields(t, fmt.Sprint("metric ", i), m, "id:string")
		}
		var vals []map[string]any
		f.decode("/jobmanager/metrics?get=taskSlotsTotal,numRunningJobs,noSuchMetric", &vals)
		if len(vals) != 2 || vals[0]["id"] != "taskSlotsTotal" || vals[0]["value"] != "2" || vals[1]["value"] != "1" {
			t.Errorf("job manager metrics %v", vals)
		}

		var apps map[string]any
		f.decode("/applications/overview", &apps)
		fields(t, "applications", apps, "applications:array")
	})

	t.Run("taskmanagers", func(t *testing.T) {
		tms := f.obj("/taskmanagers")
		fields(t, "taskmanagers", tms, "taskmanagers:array")
		if n := len(tms["taskmanagers"].([]any)); n != 1 {
			t.Fatalf("%d task managers, want the embedded one", n)
		}
		tm := at(tms, "taskmanagers", "0")
		fields(t, "taskmanager", tm, "id:string", "path:string", "dataPort:number", "jmxPort:number", "timeSinceLastHeartbeat:number",
			"slotsNumber:number", "freeSlots:number", "totalResource:object", "freeResource:object", "hardware:object", "memoryConfiguration:object")
		res := []string{"cpuCores:number", "taskHeapMemory:number", "taskOffHeapMemory:number", "managedMemory:number", "networkMemory:number", "extendedResources:object"}
		fields(t, "totalResource", at(tm, "totalResource"), res...)
		fields(t, "freeResource", at(tm, "freeResource"), res...)
		fields(t, "hardware", at(tm, "hardware"), "cpuCores:number", "physicalMemory:number", "freeMemory:number", "managedMemory:number")
		fields(t, "memoryConfiguration", at(tm, "memoryConfiguration"), "frameworkHeap:number", "taskHeap:number", "frameworkOffHeap:number",
			"taskOffHeap:number", "networkMemory:number", "managedMemory:number", "jvmMetaspace:number", "jvmOverhead:number",
			"totalFlinkMemory:number", "totalProcessMemory:number")
		if num(at(tm, "slotsNumber")) != 2 || num(at(tm, "freeSlots")) != 0 || num(at(tm, "hardware", "cpuCores")) < 1 {
			t.Errorf("task manager %v", tm)
		}
		if hb := num(at(tm, "timeSinceLastHeartbeat")); time.Since(time.UnixMilli(int64(hb))) > time.Minute {
			t.Errorf("last heartbeat %v: not recent", hb)
		}

		// Its details: the same fields, the slots the job takes and the
		// Go runtime's memory as Flink's JVM metrics.
		id := at(tm, "id").(string)
		det := f.obj("/taskmanagers/" + id)
		fields(t, "details", det, "id:string", "slotsNumber:number", "hardware:object", "memoryConfiguration:object", "allocatedSlots:array", "metrics:object")
		fields(t, "details metrics", det["metrics"], "heapUsed:number", "heapCommitted:number", "heapMax:number", "nonHeapUsed:number",
			"nonHeapCommitted:number", "nonHeapMax:number", "directCount:number", "directUsed:number", "directMax:number", "mappedCount:number",
			"mappedUsed:number", "mappedMax:number", "memorySegmentsAvailable:number", "memorySegmentsTotal:number",
			"nettyShuffleMemorySegmentsAvailable:number", "nettyShuffleMemorySegmentsUsed:number", "nettyShuffleMemorySegmentsTotal:number",
			"nettyShuffleMemoryAvailable:number", "nettyShuffleMemoryUsed:number", "nettyShuffleMemoryTotal:number", "garbageCollectors:array")
		if n := len(det["allocatedSlots"].([]any)); n != 2 || at(det, "allocatedSlots", "0", "jobId") != jid || num(at(det, "metrics", "heapUsed")) <= 0 {
			t.Errorf("details %v: want 2 slots of the job and the heap in use", det)
		}
		fields(t, "garbage collector", at(det, "metrics", "garbageCollectors", "0"), "name:string", "count:number", "time:number")
		var vals []map[string]any
		f.decode("/taskmanagers/"+id+"/metrics?get=Status.JVM.Memory.Heap.Used,Status.JVM.Memory.NonHeap.Max,Status.JVM.GarbageCollector.Go.Count", &vals)
		if len(vals) != 3 || vals[0]["value"] == "0" || vals[1]["value"] != "-1" {
			t.Errorf("task manager metrics %v", vals)
		}
		if code, body := f.get("/taskmanagers/nosuch:1"); code != http.StatusNotFound || !strings.Contains(string(body), `"errors"`) {
			t.Errorf("an unknown task manager: %d %s, want 404", code, body)
		}
	})

	// What weir has not got (log files, a profiler) answers as Flink does
	// without it, never an error the dashboard would show; the thread
	// dump lists the goroutines.
	t.Run("process", func(t *testing.T) {
		tm := "/taskmanagers/" + at(f.obj("/taskmanagers"), "taskmanagers", "0", "id").(string)
		for _, p := range []string{"/jobmanager", tm} {
			fields(t, p+"/logs", f.obj(p+"/logs"), "logs:array")
			for _, file := range []string{"/log", "/stdout"} {
				if code, body := f.get(p + file); code != http.StatusOK || !strings.Contains(string(body), "standard error") {
					t.Errorf("GET %s%s: %d %s", p, file, code, body)
				}
			}
			td := f.obj(p + "/thread-dump")
			fields(t, p+"/thread-dump", td, "threadInfos:array")
			if len(td["threadInfos"].([]any)) == 0 {
				t.Errorf("%s/thread-dump lists no goroutines", p)
			} else {
				fields(t, "thread", at(td, "threadInfos", "0"), "threadName:string", "stringifiedThreadInfo:string")
			}
			pl := f.obj(p + "/profiler")
			if l, ok := pl["profilingList"].([]any); !ok || len(l) != 0 {
				t.Errorf("%s/profiler: %v, want an empty profilingList", p, pl)
			}
			if code, body := f.do("POST", p+"/profiler", nil); code != http.StatusNotImplemented || !flinkError(body, "no profiler") {
				t.Errorf("POST %s/profiler: %d %s, want 501", p, code, body)
			}
		}
		var vals []map[string]any
		f.decode("/jobmanager/metrics?get=Status.JVM.Memory.Heap.Used,Status.JVM.Threads.Count", &vals)
		if len(vals) != 2 || vals[0]["value"] == "0" {
			t.Errorf("job manager JVM metrics %v", vals)
		}
	})

	t.Run("vertex metrics", func(t *testing.T) {
		waitFor(t, "rates on both count subtasks", func() bool {
			var vals []map[string]any
			f.decode(vpath(count)+"/metrics?get=0.numRecordsInPerSecond,1.numRecordsInPerSecond", &vals)
			return len(vals) == 2
		})
		var ids []map[string]any
		f.decode(vpath(count)+"/metrics", &ids)
		have := map[string]bool{}
		for i, m := range ids {
			fields(t, fmt.Sprint("metric ", i), m, "id:string")
			have[m["id"].(string)] = true
		}
		for _, id := range []string{"0.numRecordsIn", "1.numRecordsOut", "0.numRecordsInPerSecond", "1.numRecordsOutPerSecond",
			"0.busyTimeMsPerSecond", "0.backPressuredTimeMsPerSecond", "1.idleTimeMsPerSecond", "1.currentInputWatermark"} {
			if !have[id] {
				t.Errorf("count has no metric %s: %v", id, ids)
			}
		}
		var vals []map[string]any
		f.decode(vpath(count)+"/metrics?get=0.numRecordsIn,1.currentInputWatermark,7.numRecordsIn", &vals)
		if len(vals) != 2 {
			t.Fatalf("values %v: want the two that exist", vals)
		}
		for i, v := range vals {
			fields(t, fmt.Sprint("value ", i), v, "id:string", "value:string")
		}
		if vals[0]["id"] != "0.numRecordsIn" || vals[0]["value"] == "0" {
			t.Errorf("values %v", vals)
		}

		// The source: receives nothing, sends what it emits.
		vals = nil
		f.decode(vpath(numbers)+"/metrics?get=0.numRecordsIn,0.numRecordsOut", &vals)
		if len(vals) != 2 || vals[0]["value"] != "0" || vals[1]["value"] == "0" {
			t.Errorf("source values %v", vals)
		}
	})

	// The vertex pages weir has little for: accumulators (none), the task
	// managers (the embedded one) and the flame graph (disabled).
	t.Run("vertex extras", func(t *testing.T) {
		acc := f.obj(vpath(count) + "/accumulators")
		fields(t, "accumulators", acc, "id:string", "user-accumulators:array")
		sub := f.obj(vpath(count) + "/subtasks/accumulators")
		fields(t, "subtask accumulators", sub, "id:string", "parallelism:number", "subtasks:array")
		if len(sub["subtasks"].([]any)) != 2 {
			t.Errorf("subtask accumulators %v: want both subtasks", sub)
		}
		fields(t, "subtask accumulator", at(sub, "subtasks", "0"), "subtask:number", "attempt:number", "endpoint:string", "user-accumulators:array")
		tms := f.obj(vpath(count) + "/taskmanagers")
		fields(t, "vertex task managers", tms, "id:string", "name:string", "now:number", "taskmanagers:array")
		fields(t, "vertex task manager", at(tms, "taskmanagers", "0"), "endpoint:string", "status:string", "start-time:number", "end-time:number",
			"duration:number", "metrics:object", "status-counts:object", "taskmanager-id:string")
		if at(tms, "taskmanagers", "0", "taskmanager-id") != at(f.obj("/taskmanagers"), "taskmanagers", "0", "id") {
			t.Errorf("vertex task managers %v: not the embedded one", tms)
		}
		if fg := f.obj(vpath(count) + "/flamegraph?type=on_cpu"); len(fg) != 1 || num(fg["endTimestamp"]) != -2 {
			t.Errorf("flame graph %v: want Flink's disabled answer, endTimestamp -2", fg)
		}
	})

	// A vertex's subtasks one by one: their deployment times, task
	// manager and records, the current attempt and no other.
	t.Run("subtasks", func(t *testing.T) {
		tms := f.obj("/taskmanagers")
		tm := at(tms, "taskmanagers", "0", "id")
		times := f.obj(vpath(count) + "/subtasktimes")
		fields(t, "subtasktimes", times, "id:string", "name:string", "now:number", "subtasks:array")
		if n := len(times["subtasks"].([]any)); n != 2 {
			t.Fatalf("subtasktimes %v: want 2 subtasks", times)
		}
		st := at(times, "subtasks", "1")
		fields(t, "subtask time", st, "subtask:number", "host:string", "endpoint:string", "duration:number", "timestamps:object")
		deployed := num(at(st, "timestamps", "RUNNING"))
		if at(st, "endpoint") != tm || deployed <= 0 || deployed > num(times["now"]) || num(at(st, "timestamps", "CREATED")) != 0 ||
			num(at(st, "duration")) > num(times["now"])-deployed {
			t.Errorf("subtask time %v: want task manager %v, a deployment before now and its duration since", st, tm)
		}

		one := f.obj(vpath(count) + "/subtasks/1")
		fields(t, "subtask", one, "subtask:number", "status:string", "attempt:number", "endpoint:string", "start-time:number",
			"end-time:number", "duration:number", "metrics:object", "taskmanager-id:string", "status-duration:object", "other-concurrent-attempts:array")
		if num(one["subtask"]) != 1 || one["status"] != "RUNNING" || num(one["start-time"]) != deployed || one["taskmanager-id"] != tm ||
			num(at(one, "metrics", "read-records")) <= 0 || num(one["end-time"]) != -1 {
			t.Errorf("subtask 1: %v", one)
		}
		attempt := fmt.Sprint(num(one["attempt"]))
		again := f.obj(vpath(count) + "/subtasks/1/attempts/" + attempt)
		if num(again["start-time"]) != deployed || num(again["subtask"]) != 1 {
			t.Errorf("subtask 1 attempt %s: %v", attempt, again)
		}
		acc := f.obj(vpath(count) + "/subtasks/1/attempts/" + attempt + "/accumulators")
		fields(t, "attempt accumulators", acc, "subtask:number", "attempt:number", "id:string", "user-accumulators:array")
		for p, want := range map[string]int{
			"/subtasks/2": http.StatusNotFound, "/subtasks/x": http.StatusBadRequest, "/subtasks/-1": http.StatusBadRequest,
			"/subtasks/1/attempts/7": http.StatusNotFound, "/subtasks/1/attempts/y/accumulators": http.StatusBadRequest,
		} {
			if code, body := f.get(vpath(count) + p); code != want || !strings.Contains(string(body), `"errors"`) {
				t.Errorf("GET %s: %d %s, want %d", p, code, body, want)
			}
		}
	})

	// Rescaling in place and jar submission are refused in Flink's error
	// shape, saying what to do instead; the requirements and the (empty)
	// list of jars answer.
	t.Run("rescale and jars", func(t *testing.T) {
		var req map[string]struct {
			Parallelism struct{ LowerBound, UpperBound int }
		}
		f.decode("/jobs/"+jid+"/resource-requirements", &req)
		if len(req) != 2 || req[count].Parallelism.LowerBound != 2 || req[count].Parallelism.UpperBound != 2 {
			t.Errorf("resource requirements %v: want both vertices (numbers, count with its sink chained) at parallelism 2", req)
		}
		if code, body := f.do(http.MethodPut, "/jobs/"+jid+"/resource-requirements", nil); code != http.StatusNotImplemented || !flinkError(body, "stop the job with a savepoint") {
			t.Errorf("PUT resource-requirements: %d %s, want 501 saying how weir rescales", code, body)
		}
		jars := f.obj("/jars")
		fields(t, "jars", jars, "address:string", "files:array")
		for _, c := range []struct{ method, path string }{{"POST", "/jars/upload"}, {"POST", "/jars/x.jar/run"}, {"GET", "/jars/x.jar/plan"}, {"DELETE", "/jars/x.jar"}} {
			if code, body := f.do(c.method, c.path, nil); code != http.StatusNotImplemented || !flinkError(body, "web.submit.enable") {
				t.Errorf("%s %s: %d %s, want 501", c.method, c.path, code, body)
			}
		}
		if at(f.obj("/config"), "features", "web-submit") != false {
			t.Error("/config offers web submission")
		}
	})

	// The job's metrics: Flink's checkpointing names, from the
	// checkpoint statistics.
	t.Run("job metrics", func(t *testing.T) {
		waitFor(t, "a completed checkpoint", func() bool { return num(at(f.obj("/jobs/"+jid+"/checkpoints"), "counts", "completed")) > 0 })
		var vals []map[string]string
		f.decode("/jobs/"+jid+"/metrics?get=lastCheckpointDuration,lastCheckpointFullSize,numberOfCompletedCheckpoints,uptime,lastCheckpointRestoreTimestamp", &vals)
		got := map[string]string{}
		for _, v := range vals {
			got[v["id"]] = v["value"]
		}
		cps := f.obj("/jobs/" + jid + "/checkpoints")
		if len(got) != 5 || got["lastCheckpointDuration"] == "-1" || got["lastCheckpointFullSize"] == "-1" ||
			got["numberOfCompletedCheckpoints"] == "0" || got["uptime"] == "0" || got["lastCheckpointRestoreTimestamp"] != "-1" {
			t.Errorf("job metrics %v (checkpoints %v)", got, cps["counts"])
		}
	})

	t.Run("subtask metrics", func(t *testing.T) {
		sm := vpath(count) + "/subtasks/metrics"
		var ids []map[string]any
		f.decode(sm, &ids)
		if len(ids) == 0 || ids[0]["id"] != "numRecordsIn" {
			t.Errorf("aggregated metric names %v", ids)
		}
		var per []map[string]any
		f.decode(vpath(count)+"/metrics?get=0.numRecordsIn,1.numRecordsIn", &per)
		var aggs []map[string]any
		f.decode(sm+"?get=numRecordsIn,busyTimeMsPerSecond,noSuchMetric", &aggs)
		if len(aggs) != 2 || aggs[0]["id"] != "numRecordsIn" {
			t.Fatalf("aggregates %v", aggs)
		}
		for i, a := range aggs {
			fields(t, fmt.Sprint("aggregate ", i), a, "id:string", "min:number", "max:number", "avg:number", "sum:number", "skew:number")
			if num(a["min"]) > num(a["avg"]) || num(a["avg"]) > num(a["max"]) || num(a["sum"]) < num(a["max"]) || num(a["skew"]) < 0 || num(a["skew"]) > 100 {
				t.Errorf("aggregate %v", a)
			}
		}
		if num(aggs[0]["sum"]) <= 0 || len(per) != 2 {
			t.Errorf("numRecordsIn %v (per subtask %v)", aggs[0], per)
		}

		aggs = nil // decoding into the old maps would keep their keys
		f.decode(sm+"?get=numRecordsIn&agg=max,sum", &aggs)
		if len(aggs) != 1 || len(aggs[0]) != 3 || aggs[0]["max"] == nil || aggs[0]["sum"] == nil {
			t.Errorf("?agg=max,sum: %v", aggs)
		}
		// One subtask: every aggregate is its value.
		aggs = nil
		f.decode(sm+"?get=currentInputWatermark&subtasks=1", &aggs)
		if len(aggs) != 1 || aggs[0]["min"] != aggs[0]["max"] || aggs[0]["max"] != aggs[0]["sum"] {
			t.Errorf("?subtasks=1: %v", aggs)
		}
		for _, q := range []string{"?get=numRecordsIn&agg=median", "?get=numRecordsIn&subtasks=x"} {
			if code, body := f.get(sm + q); code != http.StatusBadRequest || !strings.Contains(string(body), `"errors"`) {
				t.Errorf("GET %s: %d %s, want 400", q, code, body)
			}
		}
		if code, _ := f.get("/jobs/" + jid + "/vertices/0123456789abcdef0123456789abcdef/subtasks/metrics"); code != http.StatusNotFound {
			t.Errorf("unknown vertex: %d, want 404", code)
		}
	})
}

// TestDirectoryDashboardEndpoints: a job manager's directory answers the
// dashboard's cluster paths it can: /config, /jobmanager/environment,
// /jobmanager/metrics (from its task managers and jobs),
// /applications/overview, /jobmanager/config (its own configuration,
// secrets masked) and /taskmanagers, the registered task managers.
func TestDirectoryDashboardEndpoints(t *testing.T) {
	cfg, err := config.ParseDynamic([]string{"cluster.auth-token=cluster-s3cret", "rest.port=0"})
	if err != nil {
		t.Fatal(err)
	}
	beat := time.Now().Add(-time.Second).Truncate(time.Millisecond)
	// tm-a's heartbeat reported its process's figures; tm-b has sent none.
	procA := &procstat.Stats{CPUCores: 16, MaxProcs: 8, PhysicalMemory: 64 << 30, MemoryLimit: 4 << 30, HeapUsed: 123456789,
		HeapCommitted: 234567890, RuntimeMemory: 3456789, GCCycles: 42, GCPauseMillis: 17, Goroutines: 99}
	info := func() web.ClusterInfo {
		return web.ClusterInfo{TaskManagers: 3, SlotsTotal: 6, SlotsAvailable: 2, Registered: []web.TaskManager{
			{ID: "tm-a", DataAddr: "10.0.0.1:6124", Jobs: []string{"job-1", ""}, LastHeartbeat: beat, Process: procA},
			{ID: "tm-b", DataAddr: "10.0.0.2:6124", Jobs: []string{"", ""}, LastHeartbeat: beat},
		}}
	}
	dir := web.NewDirectory(info, web.WithLogger(quiet), web.WithConfig(cfg))
	addr, stop, err := dir.Listen(context.Background(), "127.0.0.1", 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		stop()
		dir.Close()
	})
	f := &fixture{t: t, base: "http://" + addr}
	fields(t, "config", f.obj("/config"), "refresh-interval:number", "flink-version:string", "features:object")
	fields(t, "environment", f.obj("/jobmanager/environment"), "jvm:object", "classpath:array")
	fields(t, "applications", f.obj("/applications/overview"), "applications:array")
	var vals []map[string]any
	f.decode("/jobmanager/metrics?get=numRegisteredTaskManagers,taskSlotsAvailable,numRunningJobs", &vals)
	if len(vals) != 3 || vals[0]["value"] != "3" || vals[1]["value"] != "2" || vals[2]["value"] != "0" {
		t.Errorf("job manager metrics %v", vals)
	}
	// The registered task managers, as far as the job manager knows them.
	tms := f.obj("/taskmanagers")
	if n := len(tms["taskmanagers"].([]any)); n != 2 {
		t.Fatalf("/taskmanagers %v: want the 2 registered", tms)
	}
	tm := at(tms, "taskmanagers", "0")
	fields(t, "taskmanager", tm, "id:string", "path:string", "dataPort:number", "slotsNumber:number", "freeSlots:number", "timeSinceLastHeartbeat:number",
		"totalResource:object", "hardware:object", "memoryConfiguration:object")
	if at(tm, "id") != "tm-a" || num(at(tm, "dataPort")) != 6124 || num(at(tm, "slotsNumber")) != 2 || num(at(tm, "freeSlots")) != 1 ||
		num(at(tm, "timeSinceLastHeartbeat")) != float64(beat.UnixMilli()) {
		t.Errorf("task manager %v", tm)
	}
	det := f.obj("/taskmanagers/tm-a")
	fields(t, "details", det, "allocatedSlots:array", "metrics:object")
	if n := len(det["allocatedSlots"].([]any)); n != 1 || at(det, "allocatedSlots", "0", "jobId") != "job-1" {
		t.Errorf("details %v", det)
	}
	// tm-a's figures are its own, as its heartbeat reported them, not the
	// job manager's process's.
	if num(at(tm, "hardware", "cpuCores")) != 16 || num(at(tm, "hardware", "physicalMemory")) != 64<<30 ||
		num(at(tm, "hardware", "freeMemory")) != 4<<30 || num(at(tm, "totalResource", "cpuCores")) != 8 || num(at(tm, "freeResource", "cpuCores")) != 4 {
		t.Errorf("tm-a's hardware and resources %v", tm)
	}
	if num(at(det, "metrics", "heapUsed")) != 123456789 || num(at(det, "metrics", "heapCommitted")) != 234567890 ||
		num(at(det, "metrics", "nonHeapUsed")) != 3456789 || num(at(det, "metrics", "garbageCollectors", "0", "count")) != 42 {
		t.Errorf("tm-a's details metrics %v", det["metrics"])
	}
	var vals2 []map[string]any
	f.decode("/taskmanagers/tm-a/metrics?get=Status.JVM.Memory.Heap.Used,Status.JVM.Threads.Count,Status.JVM.GarbageCollector.Go.Time", &vals2)
	if len(vals2) != 3 || vals2[0]["value"] != "123456789" || vals2[1]["value"] != "99" || vals2[2]["value"] != "17" {
		t.Errorf("tm-a's metrics %v", vals2)
	}
	// tm-b has reported nothing yet: no metrics, unknown hardware.
	var none []map[string]any
	f.decode("/taskmanagers/tm-b/metrics?get=Status.JVM.Memory.Heap.Used", &none)
	if len(none) != 0 {
		t.Errorf("the metrics of a task manager without a heartbeat %v: want none", none)
	}
	if b := at(f.obj("/taskmanagers"), "taskmanagers", "1"); num(at(b, "hardware", "cpuCores")) != 0 || num(at(b, "hardware", "physicalMemory")) != -1 {
		t.Errorf("tm-b %v: want unknown hardware", b)
	}
	if td := f.obj("/taskmanagers/tm-b/thread-dump"); len(td["threadInfos"].([]any)) != 0 {
		t.Errorf("a remote task manager's thread dump shows goroutines of this process")
	}
	if code, _ := f.get("/taskmanagers/tm-z"); code != http.StatusNotFound {
		t.Errorf("an unregistered task manager: %d, want 404", code)
	}

	// Under Flink's names, /metrics carries the job manager's metrics and
	// each task manager's as its heartbeats reported them.
	flinkDir := web.NewDirectory(info, web.WithLogger(quiet), web.WithFlinkMetricNames())
	faddr, fstop, err := flinkDir.Listen(context.Background(), "127.0.0.1", 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		fstop()
		flinkDir.Close()
	})
	fd := &fixture{t: t, base: "http://" + faddr}
	code, body := fd.get("/metrics")
	_, samples := parseProm(t, string(body))
	if code != http.StatusOK || len(find(samples, "flink_taskmanager_Status_JVM_Memory_Heap_Used", map[string]string{"tm_id": "tm-a"})) != 1 ||
		find(samples, "flink_taskmanager_Status_JVM_Memory_Heap_Used", map[string]string{"tm_id": "tm-a"})[0].value != 123456789 ||
		len(find(samples, "flink_taskmanager_Status_JVM_Memory_Heap_Used", map[string]string{"tm_id": "tm-b"})) != 0 ||
		len(find(samples, "flink_jobmanager_numRegisteredTaskManagers", nil)) != 1 {
		t.Errorf("a directory's /metrics under Flink's names: %d %s", code, body)
	}

	code, body = f.get("/jobmanager/config")
	if code != http.StatusOK || strings.Contains(string(body), "cluster-s3cret") ||
		!strings.Contains(string(body), `{"key":"cluster.auth-token","value":"******"}`) || !strings.Contains(string(body), `{"key":"rest.port","value":"0"}`) {
		t.Errorf("/jobmanager/config: %d %s", code, body)
	}
}
