package web_test

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/weirstream/weir/config"
	"github.com/weirstream/weir/internal/launch"
	"github.com/weirstream/weir/internal/web"
)

// TestFlinkDashboardDir: rest.flink-dashboard.dir serves the directory's
// files under /flink/ behind the token, hands every other path under
// /flink/ to the REST API, leaves "/" to weir's UI, and refuses a
// directory without an index.html, naming the key.
func TestFlinkDashboardDir(t *testing.T) {
	if _, err := web.WithFlinkDashboard(t.TempDir()); err == nil || !strings.Contains(err.Error(), config.KeyRESTFlinkDashboardDir) ||
		!strings.Contains(err.Error(), "index.html") {
		t.Fatalf("a directory without index.html: %v, want an error naming %s", err, config.KeyRESTFlinkDashboardDir)
	}
	dir := t.TempDir()
	for name, body := range map[string]string{"index.html": "<html>flink page</html>", "main.js": "var flink = 1;", "assets/x.css": "a{}"} {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(filepath.Dir(dir), "secret.txt"), []byte("outside"), 0o644); err != nil {
		t.Fatal(err)
	}
	opt, err := web.WithFlinkDashboard(dir)
	if err != nil {
		t.Fatal(err)
	}
	const token = "dash-token"
	f := startJob(t, nil)
	f.serve(web.Job{Master: launch.MasterOf(f.client), Done: f.client.Done(), Err: f.client.Wait, Config: f.env.Config()},
		opt, web.WithAuthToken(token))
	jid := f.jobID()

	if code, _ := f.get("/flink/main.js"); code != http.StatusUnauthorized {
		t.Errorf("a dashboard file without the token: %d, want 401", code)
	}
	f.token = token
	for p, want := range map[string]string{
		"/flink/":              "flink page",
		"/flink/index.html":    "flink page",
		"/flink/main.js":       "var flink",
		"/flink/assets/x.css":  "a{}",
		"/flink/jobs/overview": `"jid":"` + jid + `"`,
		"/flink/config":        `"web-submit":false`,
		"/jobs/overview":       `"jid":"` + jid + `"`,
	} {
		if code, body := f.get(p); code != http.StatusOK || !strings.Contains(string(body), want) {
			t.Errorf("GET %s: %d %.200s, want 200 with %q", p, code, body, want)
		}
	}
	if code, body := f.get("/"); code != http.StatusOK || strings.Contains(string(body), "flink page") {
		t.Errorf("GET /: %d %.200s, want weir's own UI", code, body)
	}
	for _, p := range []string{"/flink/../secret.txt", "/flink/%2e%2e/secret.txt", "/flink/nosuch.js"} {
		if code, body := f.get(p); code == http.StatusOK || strings.Contains(string(body), "outside") {
			t.Errorf("GET %s: %d %.200s, want no file outside the directory", p, code, body)
		}
	}
	if code, _ := f.do(http.MethodPost, "/flink/main.js", nil); code != http.StatusMethodNotAllowed {
		t.Errorf("POST of a dashboard file: %d, want 405", code)
	}
}

// TestCheckpointAskedForOutlivesTheHistory: a completed checkpoint whose
// details were asked for still answers, details and subtasks, after newer
// checkpoints have pushed it out of the history (as Flink's
// CheckpointStatsCache keeps it), so that the dashboard can unfold a
// checkpoint it shows; one never asked for is not found.
func TestCheckpointAskedForOutlivesTheHistory(t *testing.T) {
	f := startJob(t, []string{"execution.checkpointing.interval=20 ms", "web.checkpoints.history=2"})
	jid := f.jobID()
	var first int64
	waitFor(t, "a completed checkpoint", func() bool {
		first = int64(num(at(f.obj("/jobs/"+jid+"/checkpoints"), "latest", "completed", "id")))
		return first > 0
	})
	// The one before the first is no longer in the history either, and
	// was never asked for.
	never := first - 2
	detail := fmt.Sprintf("/jobs/%s/checkpoints/details/%d", jid, first)
	if code, body := f.get(detail); code != http.StatusOK {
		t.Fatalf("GET %s: %d %s", detail, code, body)
	}
	waitFor(t, "the checkpoint to leave the history", func() bool {
		for _, h := range f.obj("/jobs/" + jid + "/checkpoints")["history"].([]any) {
			if int64(num(at(h, "id"))) <= first {
				return false
			}
		}
		return true
	})
	for _, p := range []string{detail, detail + "/subtasks/" + web.VertexID("count")} {
		if code, body := f.get(p); code != http.StatusOK || !strings.Contains(string(body), `"subtasks"`) && !strings.Contains(string(body), fmt.Sprintf(`"id":%d`, first)) {
			t.Errorf("GET %s after it left the history: %d %.200s", p, code, body)
		}
	}
	if never > 0 {
		if code, _ := f.get(fmt.Sprintf("/jobs/%s/checkpoints/details/%d", jid, never)); code != http.StatusNotFound {
			t.Errorf("checkpoint %d, never asked for and out of the history: %d, want 404", never, code)
		}
	}
}
