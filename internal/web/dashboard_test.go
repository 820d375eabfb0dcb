package web_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/weirstream/weir/internal/launch"
	"github.com/weirstream/weir/internal/web"
)

// TestDashboardEndpoints checks the endpoints Flink's web dashboard reads
// besides a job's pages against a running job: their fields and types,
// that the job's configuration is listed with its secrets masked, and
// that every one of them requires the token.
func TestDashboardEndpoints(t *testing.T) {
	const restSecret, clusterSecret = "rest-s3cret-value", "cluster-s3cret-value"
	f := startJob(t, []string{
		"execution.checkpointing.interval=50 ms",
		"rest.auth-token=" + restSecret,
		"cluster.auth-token=" + clusterSecret,
	})
	f.serve(web.Job{Master: launch.MasterOf(f.client), Done: f.client.Done(), Err: f.client.Wait, Config: f.env.Config()},
		web.WithAuthToken(restSecret))
	f.token = restSecret

	paths := []string{"/config", "/taskmanagers", "/jobmanager/config", "/jobmanager/environment", "/jobmanager/metrics",
		"/applications/overview"}
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
		if strings.Contains(string(body), restSecret) || strings.Contains(string(body), clusterSecret) {
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
	})

}

// TestDirectoryDashboardEndpoints: a job manager's directory answers the
// dashboard's cluster paths it can: /config, /jobmanager/environment,
// /jobmanager/metrics (from its task managers and jobs) and
// /applications/overview.
func TestDirectoryDashboardEndpoints(t *testing.T) {
	dir := web.NewDirectory(func() web.ClusterInfo { return web.ClusterInfo{TaskManagers: 3, SlotsTotal: 6, SlotsAvailable: 2} },
		web.WithLogger(quiet))
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
}
