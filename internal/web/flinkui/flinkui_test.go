// Package flinkui tests weir's REST API with Apache Flink's own web
// dashboard: it serves the dashboard's files (the web/ folder of
// flink-runtime-web, fetched by .ci/flink-dashboard.sh) in front of a
// running job's REST API, walks the dashboard through its pages in
// headless Chromium, and fails if a REST call the pages make answers 404
// or 5xx, or a page shows the dashboard's error notification.
package flinkui

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/weirstream/weir/config"
	"github.com/weirstream/weir/connector"
	"github.com/weirstream/weir/connector/datagen"
	"github.com/weirstream/weir/internal/launch"
	"github.com/weirstream/weir/internal/web"
	"github.com/weirstream/weir/state"
	"github.com/weirstream/weir/stream"
)

// required reports whether a missing browser or dashboard fails the test
// rather than skipping it: CI sets WEIR_UI_REQUIRED=1 and provides both.
func required() bool { return os.Getenv("WEIR_UI_REQUIRED") == "1" }

func skipOrFail(t *testing.T, msg string) {
	t.Helper()
	if required() {
		t.Fatal(msg + "; WEIR_UI_REQUIRED=1")
	}
	t.Skip(msg)
}

// chromium returns the browser to drive: $WEIR_CHROMIUM, or the first of
// chromium, chromium-browser, google-chrome on PATH.
func chromium(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("WEIR_CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	skipOrFail(t, "no chromium binary on PATH (install Debian's chromium: .ci/chromium.sh, or set WEIR_CHROMIUM)")
	return ""
}

// dashboards returns Flink's dashboards by version: the subdirectories of
// $WEIR_FLINK_DASHBOARDS (default: .ci/flink-dashboard.sh's cache) that
// hold a web/index.html.
func dashboards(t *testing.T) map[string]string {
	t.Helper()
	dir := os.Getenv("WEIR_FLINK_DASHBOARDS")
	if dir == "" {
		if c, err := os.UserCacheDir(); err == nil {
			dir = filepath.Join(c, "weir", "flink-dashboard")
		}
	}
	out := map[string]string{}
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		web := filepath.Join(dir, e.Name(), "web")
		if _, err := os.Stat(filepath.Join(web, "index.html")); err == nil {
			out[e.Name()] = web
		}
	}
	if len(out) == 0 {
		skipOrFail(t, fmt.Sprintf("no Flink dashboard under %q (fetch them with: bash .ci/flink-dashboard.sh, which prints WEIR_FLINK_DASHBOARDS=...)", dir))
	}
	return out
}

// discard is a sink that drops its records.
type discard struct{}

func (discard) NewWriter(context.Context, connector.WriterInfo) (connector.SinkWriter[int64], error) {
	return discard{}, nil
}
func (discard) Write(int64, int64) error                               { return nil }
func (discard) PrepareCommit(context.Context, int64) ([][]byte, error) { return nil, nil }
func (discard) Close() error                                           { return nil }

// counter keeps a running sum per key.
type counter struct{ n state.ValueState[int64] }

func (c *counter) Open(rc *stream.RuntimeContext[int64]) error {
	var err error
	c.n, err = stream.ValueState[int64](rc, "n")
	return err
}

func (c *counter) ProcessElement(ctx *stream.Context[int64, int64], v int64) error {
	n, _ := c.n.Value()
	c.n.Update(n + v)
	return ctx.Emit(n + v)
}

// startJob runs numbers → keyBy → count → sink at parallelism 2 with a
// checkpoint every 100 ms, and returns its REST API (which cancels it)
// and its id.
func startJob(t *testing.T) (*web.Server, string) {
	t.Helper()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	cfg, err := config.ParseDynamic([]string{"parallelism.default=2", "execution.checkpointing.interval=100 ms",
		"execution.checkpointing.dir=file://" + t.TempDir(), "restart-strategy.type=fixed-delay"})
	if err != nil {
		t.Fatal(err)
	}
	env, err := stream.NewEnvironment(stream.WithConfig(cfg), stream.WithLogger(quiet))
	if err != nil {
		t.Fatal(err)
	}
	src, err := datagen.New(func(p int, seq int64) int64 { return int64(p)*1_000_000 + seq },
		datagen.Partitions(4), datagen.BatchSize(64), datagen.RatePerSecond(2000),
		datagen.Timestamps(func(_ int, seq int64) int64 { return 1_700_000_000_000 + seq }))
	if err != nil {
		t.Fatal(err)
	}
	nums := stream.FromSource(env, src, "numbers", stream.BoundedOutOfOrderness[int64](0))
	sums := stream.Process(stream.KeyBy(nums, func(v int64) int64 { return v % 64 }), stream.KeyedProcessFunction[int64, int64, int64](&counter{}), stream.Uid("count"))
	stream.SinkTo(sums, discard{}, stream.Uid("sink"))
	ctx, cancel := context.WithCancel(context.Background())
	client, err := env.ExecuteAsync(ctx, "numbers")
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cancel()
		<-client.Done()
	})
	jm := launch.MasterOf(client)
	srv, err := web.New(web.Job{Master: jm, Done: client.Done(), Err: client.Wait, Config: env.Config(), Cancel: cancel},
		web.WithLogger(quiet), web.WithSampleInterval(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	return srv, jm.JobID()
}

// call is a REST request the dashboard made, and its answer.
type call struct {
	method, uri string
	code        int
}

// recorder notes the REST calls through it.
type recorder struct {
	mu    sync.Mutex
	calls []call
}

func (rec *recorder) add(c call) {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	rec.calls = append(rec.calls, c)
}

func (rec *recorder) all() []call {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	return slices.Clone(rec.calls)
}

type statusWriter struct {
	http.ResponseWriter
	code int
}

func (w *statusWriter) WriteHeader(code int) {
	w.code = code
	w.ResponseWriter.WriteHeader(code)
}

// walker is a script added to the dashboard's index.html: it opens each
// route in turn, notes every error notification the dashboard shows, and
// at the end writes them as JSON into <body data-weir-errors=...>.
var walker = template.Must(template.New("walker").Parse(`<script>
(function () {
  var routes = {{.Routes}}, errors = [], i = 0;
  // Angular reports what goes wrong in a page (such as a field the page
  // reads missing from an answer) with console.error.
  var consoleError = console.error;
  console.error = function () {
    errors.push(location.hash + ": console.error: " + Array.prototype.map.call(arguments, String).join(" ").slice(0, 300));
    consoleError.apply(console, arguments);
  };
  window.addEventListener("error", function (e) { errors.push(location.hash + ": " + e.message); });
  new MutationObserver(function (ms) {
    ms.forEach(function (m) {
      m.addedNodes.forEach(function (n) {
        if (n.nodeType === 1 && n.querySelector && (n.matches(".ant-notification-notice, .ant-message-error") ||
            n.querySelector(".ant-notification-notice, .ant-message-error"))) {
          errors.push(location.hash + ": " + n.textContent.trim().slice(0, 300));
        }
      });
    });
  }).observe(document.documentElement, {childList: true, subtree: true});
  function next() {
    if (i < routes.length) {
      location.hash = routes[i++];
      setTimeout(next, {{.Dwell}});
      return;
    }
    document.body.setAttribute("data-weir-visited", String(i));
    document.body.setAttribute("data-weir-errors", JSON.stringify(errors));
  }
  window.addEventListener("load", function () { setTimeout(next, {{.Dwell}}); });
})();
</script>`))

// serveDashboard serves Flink's dashboard in dir, with the walker over
// routes added to its index.html, in front of api, on a free loopback
// port; it returns the base URL.
func serveDashboard(t *testing.T, dir string, api http.Handler, rec *recorder, routes []string, dwell time.Duration) string {
	t.Helper()
	index, err := os.ReadFile(filepath.Join(dir, "index.html"))
	if err != nil {
		t.Fatal(err)
	}
	var script bytes.Buffer
	if err := walker.Execute(&script, struct {
		Routes []string
		Dwell  int64
	}{routes, dwell.Milliseconds()}); err != nil {
		t.Fatal(err)
	}
	page := bytes.Replace(index, []byte("</body>"), append(script.Bytes(), []byte("</body>")...), 1)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p := path.Clean(r.URL.Path)
		if p == "/" || p == "/index.html" {
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			_, _ = w.Write(page)
			return
		}
		if fi, err := os.Stat(filepath.Join(dir, filepath.FromSlash(p))); err == nil && fi.Mode().IsRegular() {
			http.ServeFile(w, r, filepath.Join(dir, filepath.FromSlash(p)))
			return
		}
		sw := &statusWriter{ResponseWriter: w, code: http.StatusOK}
		api.ServeHTTP(sw, r)
		rec.add(call{method: r.Method, uri: r.URL.RequestURI(), code: sw.code})
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return "http://" + ln.Addr().String()
}

// getJSON decodes the API's answer to a GET of p.
func getJSON(t *testing.T, api http.Handler, p string, v any) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, p, nil)
	req.Host = "127.0.0.1"
	w := &bodyWriter{header: http.Header{}}
	api.ServeHTTP(w, req)
	if w.code != 0 && w.code != http.StatusOK {
		t.Fatalf("GET %s: %d %s", p, w.code, w.body.String())
	}
	if err := json.Unmarshal(w.body.Bytes(), v); err != nil {
		t.Fatalf("GET %s: %v", p, err)
	}
}

type bodyWriter struct {
	header http.Header
	code   int
	body   bytes.Buffer
}

func (w *bodyWriter) Header() http.Header         { return w.header }
func (w *bodyWriter) Write(b []byte) (int, error) { return w.body.Write(b) }
func (w *bodyWriter) WriteHeader(code int)        { w.code = code }

// TestFlinkDashboard walks each of Flink's dashboards through its pages
// of a running job: the overview, the job's pages (its graph, a vertex's
// details, exceptions, checkpoints, configuration), the task managers'
// and the job manager's.
func TestFlinkDashboard(t *testing.T) {
	bin := chromium(t)
	dirs := dashboards(t)
	if testing.Short() {
		t.Skip("starts a job and a browser; skipped with -short")
	}
	api, jid := startJob(t)
	var tms struct {
		TaskManagers []struct {
			ID string `json:"id"`
		} `json:"taskmanagers"`
	}
	getJSON(t, api, "/taskmanagers", &tms)
	var job struct {
		Vertices []struct {
			ID string `json:"id"`
		} `json:"vertices"`
	}
	getJSON(t, api, "/jobs/"+jid, &job)
	tm, vertex := tms.TaskManagers[0].ID, job.Vertices[1].ID
	// Let a checkpoint complete first, so the checkpoint pages have one.
	deadline := time.Now().Add(30 * time.Second)
	for {
		var cps struct {
			Counts struct {
				Completed int `json:"completed"`
			} `json:"counts"`
		}
		getJSON(t, api, "/jobs/"+jid+"/checkpoints", &cps)
		if cps.Counts.Completed > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no checkpoint completed within 30 s")
		}
		time.Sleep(50 * time.Millisecond)
	}

	j := "/job/running/" + jid
	routes := []string{
		"/overview",
		j + "/overview",
		j + "/overview/" + vertex + "/detail",
		j + "/overview/" + vertex + "/subtasks",
		j + "/overview/" + vertex + "/taskmanagers",
		j + "/overview/" + vertex + "/watermarks",
		j + "/overview/" + vertex + "/accumulators",
		j + "/overview/" + vertex + "/backpressure",
		j + "/overview/" + vertex + "/metrics",
		j + "/overview/" + vertex + "/flamegraph",
		j + "/exceptions",
		j + "/timeline",
		j + "/checkpoints",
		j + "/configuration",
		"/task-manager",
		"/task-manager/" + tm + "/metrics",
		"/task-manager/" + tm + "/log-list",
		"/task-manager/" + tm + "/logs",
		"/task-manager/" + tm + "/stdout",
		"/task-manager/" + tm + "/thread-dump",
		"/task-manager/" + tm + "/profiler",
		"/job-manager/metrics",
		"/job-manager/config",
		"/job-manager/logs",
		"/job-manager/stdout",
		"/job-manager/log",
		"/job-manager/thread-dump",
		"/job-manager/profiler",
	}
	versions := make([]string, 0, len(dirs))
	for v := range dirs {
		versions = append(versions, v)
	}
	slices.Sort(versions)
	for _, v := range versions {
		t.Run(v, func(t *testing.T) {
			start := time.Now()
			rec := &recorder{}
			const dwell = time.Second
			base := serveDashboard(t, dirs[v], api, rec, routes, dwell)
			budget := dwell*time.Duration(len(routes)+2) + 2*time.Second
			dom := browse(t, bin, base+"/#/overview", budget)
			calls := rec.all()
			paths := map[string]int{}
			for _, c := range calls {
				key := c.method + " " + strings.SplitN(c.uri, "?", 2)[0]
				if _, seen := paths[key]; !seen || c.code >= 400 {
					paths[key] = c.code
				}
				if c.code == http.StatusNotFound || c.code >= 500 {
					t.Errorf("the dashboard's %s %s answered %d", c.method, c.uri, c.code)
				}
			}
			keys := make([]string, 0, len(paths))
			for k := range paths {
				keys = append(keys, k)
			}
			slices.Sort(keys)
			for _, k := range keys {
				t.Logf("%d %s", paths[k], k)
			}
			visited := attr(dom, "data-weir-visited")
			if visited != fmt.Sprint(len(routes)) {
				t.Fatalf("the dashboard visited %q of %d pages; DOM:\n%.3000s", visited, len(routes), dom)
			}
			var errs []string
			if err := json.Unmarshal([]byte(attr(dom, "data-weir-errors")), &errs); err != nil {
				t.Fatalf("reading the pages' errors: %v", err)
			}
			for _, e := range errs {
				t.Errorf("the dashboard showed an error at %s", e)
			}
			t.Logf("Flink %s's dashboard: %d pages, %d REST calls to %d paths, in %v", v, len(routes), len(calls), len(paths), time.Since(start).Round(time.Millisecond))
		})
	}
}

// attr returns the value of the body attribute name in dom, unescaped.
func attr(dom, name string) string {
	i := strings.Index(dom, name+`="`)
	if i < 0 {
		return ""
	}
	rest := dom[i+len(name)+2:]
	j := strings.IndexByte(rest, '"')
	if j < 0 {
		return ""
	}
	r := strings.NewReplacer("&quot;", `"`, "&amp;", "&", "&lt;", "<", "&gt;", ">", "&#39;", "'")
	return r.Replace(rest[:j])
}

// browse loads url in headless Chromium for budget of virtual time and
// returns the DOM. Now and then Chromium never dumps the DOM once the
// budget is spent, with nothing left to load; a run that takes longer
// than a generous real-time limit is killed and tried again, twice.
func browse(t *testing.T, bin, url string, budget time.Duration) string {
	t.Helper()
	const attempts = 3
	for i := 1; ; i++ {
		dom, err := browseOnce(t, bin, url, budget)
		if err == nil {
			return dom
		}
		if i == attempts || !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("chromium, attempt %d of %d: %v", i, attempts, err)
		}
		t.Logf("chromium hung (attempt %d of %d); trying again", i, attempts)
	}
}

// browseOnce runs Chromium once, for at most 30 s of real time.
func browseOnce(t *testing.T, bin, url string, budget time.Duration) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin,
		"--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync",
		"--disable-dev-shm-usage", "--hide-scrollbars", "--window-size=1400,1000",
		"--user-data-dir="+t.TempDir(),
		fmt.Sprintf("--virtual-time-budget=%d", budget.Milliseconds()),
		"--dump-dom", url)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		if ctx.Err() != nil {
			return "", ctx.Err()
		}
		return "", fmt.Errorf("%w\n%s", err, stderr.String())
	}
	return stdout.String(), nil
}
