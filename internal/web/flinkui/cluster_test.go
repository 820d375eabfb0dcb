package flinkui

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"testing"
	"time"
)

// weirBinary builds cmd/weir into a temporary directory.
func weirBinary(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "weir")
	if out, err := exec.Command("go", "build", "-o", bin, "github.com/weirstream/weir/cmd/weir").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// process runs the weir binary with args, its output into a log file in
// dir, until the test ends.
func process(t *testing.T, bin, dir, name string, args ...string) string {
	t.Helper()
	log := filepath.Join(dir, name+".log")
	f, err := os.Create(log)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr, cmd.Dir = f, f, dir
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		f.Close()
		close(done)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-done
		if t.Failed() {
			b, _ := os.ReadFile(log)
			if len(b) > 3000 {
				b = b[len(b)-3000:]
			}
			t.Logf("--- %s log (end):\n%s", name, b)
		}
	})
	return log
}

// waitLog waits until the log file matches re and returns the match.
func waitLog(t *testing.T, log string, re *regexp.Regexp) []string {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		b, _ := os.ReadFile(log)
		if m := re.FindStringSubmatch(string(b)); m != nil {
			return m
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: nothing matches %q within 60 s", filepath.Base(log), re)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// restGet decodes the answer to a GET of base+p.
func restGet(t *testing.T, base, p string, v any) {
	t.Helper()
	resp, err := http.Get(base + p)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d", p, resp.StatusCode)
	}
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		t.Fatalf("GET %s: %v", p, err)
	}
}

// tmInfo is what the test reads of a task manager in /taskmanagers.
type tmInfo struct {
	ID       string `json:"id"`
	Hardware struct {
		CPUCores int `json:"cpuCores"`
	} `json:"hardware"`
}

// TestFlinkDashboardOnACluster walks Flink's dashboards through the pages
// of a job on a cluster of processes: a job manager, whose REST server
// serves the newest dashboard itself (rest.flink-dashboard.dir), and two
// task managers, whose pages show the figures their heartbeats report.
func TestFlinkDashboardOnACluster(t *testing.T) {
	bin := chromium(t)
	dirs := dashboards(t)
	if testing.Short() {
		t.Skip("builds weir, starts a cluster of processes and a browser; skipped with -short")
	}
	versions := make([]string, 0, len(dirs))
	for v := range dirs {
		versions = append(versions, v)
	}
	slices.Sort(versions)
	newest := versions[len(versions)-1]

	weir := weirBinary(t)
	dir := t.TempDir()
	copyDir := dashboardCopy(t, dirs[newest])
	jmLog := process(t, weir, dir, "jobmanager", "jobmanager", "--listen", "127.0.0.1:0",
		"-D", "heartbeat.interval=200 ms", "-D", "rest.port=0", "-D", "rest.flink-dashboard.dir="+copyDir)
	jmAddr := waitLog(t, jmLog, regexp.MustCompile(`job manager listening on (\S+);`))[1]
	restAddr := waitLog(t, jmLog, regexp.MustCompile(`msg="REST API listening" addr=(\S+)`))[1]
	for i := 1; i <= 2; i++ {
		process(t, weir, dir, fmt.Sprintf("taskmanager-%d", i), "taskmanager", "--jobmanager", jmAddr, "--slots", "2", "--id", fmt.Sprintf("tm-%02d", i))
	}
	trace := filepath.Join(dir, "trace")
	if out, err := exec.Command(weir, "gen", "gatewaymeter", "--seed", "11", "--requests", "200000", "--partitions", "4",
		"--tenants", "20", "--out", trace).CombinedOutput(); err != nil {
		t.Fatalf("weir gen: %v\n%s", err, out)
	}
	// 200,000 requests at 500 a second: the job runs for minutes, longer
	// than the walks.
	out, err := exec.Command(weir, "run", "-m", jmAddr, "-d", "gatewaymeter", "--input", trace, "--output", filepath.Join(dir, "out"),
		"--checkpoint-dir", filepath.Join(dir, "checkpoints"), "--input-rate", "500", "-D", "parallelism.default=2",
		"-D", "execution.checkpointing.interval=200 ms").CombinedOutput()
	if err != nil {
		t.Fatalf("weir run -m: %v\n%s", err, out)
	}
	m := regexp.MustCompile(`as job ([0-9a-f]+) to`).FindSubmatch(out)
	if m == nil {
		t.Fatalf("weir run -m printed no job id:\n%s", out)
	}
	jid := string(m[1])
	base := "http://" + restAddr

	// Both task managers have reported their figures, and the job has
	// completed a checkpoint.
	var tms struct {
		TaskManagers []tmInfo `json:"taskmanagers"`
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		var cps struct {
			Counts struct {
				Completed int `json:"completed"`
			} `json:"counts"`
		}
		restGet(t, base, "/taskmanagers", &tms)
		resp, err := http.Get(base + "/jobs/" + jid + "/checkpoints")
		if err == nil {
			_ = json.NewDecoder(resp.Body).Decode(&cps)
			resp.Body.Close()
		}
		if len(tms.TaskManagers) == 2 && tms.TaskManagers[0].Hardware.CPUCores > 0 && tms.TaskManagers[1].Hardware.CPUCores > 0 && cps.Counts.Completed > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("within 60 s: task managers %+v, %d checkpoints completed", tms.TaskManagers, cps.Counts.Completed)
		}
		time.Sleep(50 * time.Millisecond)
	}
	tm := tms.TaskManagers[1].ID
	var det struct {
		Metrics struct {
			HeapUsed int64 `json:"heapUsed"`
		} `json:"metrics"`
	}
	restGet(t, base, "/taskmanagers/"+tm, &det)
	var vals []struct{ ID, Value string }
	restGet(t, base, "/taskmanagers/"+tm+"/metrics?get=Status.JVM.Memory.Heap.Used,Status.JVM.Threads.Count", &vals)
	if det.Metrics.HeapUsed <= 0 || len(vals) != 2 || vals[0].Value == "0" {
		t.Errorf("task manager %s: heap %d, metrics %v: want its heartbeats' figures", tm, det.Metrics.HeapUsed, vals)
	}
	var details struct {
		Vertices []struct {
			ID string `json:"id"`
		} `json:"vertices"`
	}
	restGet(t, base, "/jobs/"+jid, &details)
	vertex := details.Vertices[len(details.Vertices)-1].ID
	// The vertex's subtasks run on the task managers, which the REST API
	// names.
	var vtms struct {
		TaskManagers []struct {
			ID string `json:"taskmanager-id"`
		} `json:"taskmanagers"`
	}
	restGet(t, base, "/jobs/"+jid+"/vertices/"+vertex+"/taskmanagers", &vtms)
	for _, v := range vtms.TaskManagers {
		if !slices.ContainsFunc(tms.TaskManagers, func(x tmInfo) bool { return x.ID == v.ID }) {
			t.Errorf("vertex %s runs on %q, not a registered task manager", vertex, v.ID)
		}
	}

	target, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	api := httputil.NewSingleHostReverseProxy(target)
	routes := dashboardRoutes(jid, vertex, tm)
	for _, v := range versions {
		serve := proxied(dirs[v], api)
		if v == newest {
			serve = underPrefix(dirs[v], copyDir, api)
		}
		t.Run(v, func(t *testing.T) { walkPages(t, bin, v, serve, routes) })
	}
}
