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
	"image/png"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
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
// checkpoint every 100 ms, and returns its REST API (which cancels it),
// the job as the API serves it, and its id.
func startJob(t *testing.T) (*web.Server, web.Job, string) {
	t.Helper()
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
	stream.SinkTo(sums, connector.Discard[int64](), stream.Uid("sink"))
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
	job := web.Job{Master: jm, Done: client.Done(), Err: client.Wait, Config: env.Config(), Cancel: cancel}
	srv, err := web.New(job, web.WithLogger(quiet), web.WithSampleInterval(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	return srv, job, jm.JobID()
}

// quiet discards the log.
var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// call is a REST request the dashboard made, and its answer.
type call struct {
	method, uri string
	code        int
}

// recorder notes the REST calls through it, and when the page last
// asked for anything.
type recorder struct {
	mu    sync.Mutex
	calls []call
	last  time.Time
}

// touch notes a request of the page.
func (rec *recorder) touch() {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	rec.last = time.Now()
}

// idle returns how long the page has asked for nothing.
func (rec *recorder) idle() time.Duration {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	return time.Since(rec.last)
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
// route in turn, notes every error notification the dashboard shows and
// every error it logs, and at the end posts a walk to donePath.
var walker = template.Must(template.New("walker").Parse(`<script>
(function () {
  var routes = {{.Routes}}, errors = [], i = 0, cancelStatus = 0;
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
  // A page is done once it has asked the API for something (and for
  // the call its route awaits, if it names one) and every request has
  // been answered for a while, after at least the dwell time (some
  // pages draw after their data: give them that); or after four dwell
  // times whatever it is doing, thirty while its awaited call is still
  // to come.
  // wantExact is the path of the call the page must make, wantPattern
  // matches the path of the call a click on it must make.
  var inflight = 0, started = 0, lastEnd = 0, arrived = 0, awaited = true, wantExact = "", wantPattern = null, clicked = false;
  var open = XMLHttpRequest.prototype.open, send = XMLHttpRequest.prototype.send;
  XMLHttpRequest.prototype.open = function (method, url) {
    this.weirPath = new URL(url, location.href).pathname;
    if ({{.Prefix}} && this.weirPath.indexOf({{.Prefix}}) === 0) {
      this.weirPath = this.weirPath.slice({{.Prefix}}.length - 1);
    }
    return open.apply(this, arguments);
  };
  XMLHttpRequest.prototype.send = function () {
    var x = this;
    inflight++;
    started++;
    x.addEventListener("loadend", function () {
      inflight--;
      lastEnd = Date.now();
      if (wantExact && x.weirPath === wantExact || wantPattern && wantPattern.test(x.weirPath)) {
        awaited = true;
      }
    });
    return send.apply(this, arguments);
  };
  function settled() {
    var now = Date.now(), dwell = {{.Dwell}};
    if (!awaited) {
      return now - arrived >= 30 * dwell;
    }
    return now - arrived >= 4 * dwell ||
      now - arrived >= dwell && started > 0 && inflight === 0 && now - lastEnd >= dwell / 2;
  }
  // wait waits until the page has settled, then clicks what its route
  // says to click, if anything, and waits again, then opens the next.
  function wait() {
    if (!settled()) {
      setTimeout(wait, 25);
      return;
    }
    var r = routes[i - 1];
    if (r && r.click && !clicked) {
      clicked = true;
      var el = document.querySelector(r.click);
      if (!el) {
        errors.push(location.hash + ": nothing to click at " + r.click);
        next();
        return;
      }
      if (r.clickAt) {
        // A chart drawn on a canvas: press and release the mouse at a
        // point of it, as a hand would.
        var box = el.getBoundingClientRect();
        var at = {bubbles: true, cancelable: true, view: window, button: 0,
          clientX: box.left + r.clickAt[0] * box.width, clientY: box.top + r.clickAt[1] * box.height};
        ["mousemove", "mousedown", "mouseup", "click"].forEach(function (type) { el.dispatchEvent(new MouseEvent(type, at)); });
      } else {
        el.click();
      }
      wantExact = "";
      wantPattern = r.clickAwait ? new RegExp(r.clickAwait) : null;
      awaited = !wantPattern;
      arrived = Date.now();
      started = 0;
      setTimeout(wait, 25);
      return;
    }
    next();
  }
  function next() {
    clicked = false;
    wantPattern = null;
    if (i < routes.length) {
      wantExact = routes[i].await || "";
      awaited = !wantExact;
      location.hash = routes[i++].hash;
      arrived = Date.now();
      started = 0;
      setTimeout(wait, 25);
      return;
    }
{{if .Cancel}}
    // Cancel the job as the dashboard's Cancel button does, from the
    // page's origin.
    var x = new XMLHttpRequest();
    x.open("GET", {{.Cancel}});
    x.onloadend = function () {
      cancelStatus = x.status;
      finish();
    };
    x.send();
  }
{{else}}
    finish();
  }
{{end}}
  function finish() {
    navigator.sendBeacon("{{.Done}}", JSON.stringify({visited: i, errors: errors, cancel: cancelStatus}));
  }
  window.addEventListener("load", function () { arrived = Date.now(); setTimeout(wait, 25); });
})();
</script>`))

// route is a page of the dashboard the walker opens.
type route struct {
	// Hash is the page's address after the dashboard's "#".
	Hash string `json:"hash"`
	// Await, if not "", is the path of a REST call the page must make:
	// the walker waits for it before it moves on, and the walk fails if
	// the page never made it.
	Await string `json:"await,omitempty"`
	// Click, if not "", selects an element the walker clicks once the
	// page has settled; ClickAwait, if not "", is a regular expression
	// (in the syntax both Go and JavaScript read) the path of a REST call
	// the click must make matches, awaited as Await is.
	Click      string `json:"click,omitempty"`
	ClickAwait string `json:"clickAwait,omitempty"`
	// ClickAt, if set, clicks the point of Click's element at these
	// fractions of its width and height (for a chart on a canvas)
	// rather than the element itself.
	ClickAt []float64 `json:"clickAt,omitempty"`
}

// A server serves Flink's dashboard with the walker over routes (and a
// GET of cancel at the end, if it is not "") added to its page, records
// the REST calls of the page in rec, and returns the page's URL and the
// channel its walk arrives on.
type server func(t *testing.T, rec *recorder, routes []route, dwell time.Duration, cancel string) (string, <-chan walk)

// walkPages walks Flink's dashboard of version v through routes, served
// by serve, and checks what the pages called and showed.
func walkPages(t *testing.T, bin, v string, serve server, routes []route) {
	start := time.Now()
	rec := &recorder{}
	const dwell = 300 * time.Millisecond
	page, done := serve(t, rec, routes, dwell, "")
	wk := browse(t, bin, page+"#/overview", rec, done)
	calls := rec.all()
	paths := map[string]int{}
	for _, c := range calls {
		key := c.method + " " + strings.SplitN(c.uri, "?", 2)[0]
		if _, seen := paths[key]; !seen || c.code >= 400 {
			paths[key] = c.code
		}
		if c.code != http.StatusOK {
			t.Errorf("the dashboard's %s %s answered %d, not 200", c.method, c.uri, c.code)
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
	if wk.Visited != len(routes) {
		t.Fatalf("the dashboard visited %d of %d pages", wk.Visited, len(routes))
	}
	for _, e := range wk.Errors {
		t.Errorf("the dashboard showed an error at %s", e)
	}
	// The pages did load their data: each awaited call was made.
	for _, r := range routes {
		if _, ok := paths["GET "+r.Await]; r.Await != "" && !ok {
			t.Errorf("the page %s never called GET %s", r.Hash, r.Await)
		}
		if r.ClickAwait == "" {
			continue
		}
		re := regexp.MustCompile(r.ClickAwait)
		if !slices.ContainsFunc(keys, func(k string) bool { p, ok := strings.CutPrefix(k, "GET "); return ok && re.MatchString(p) }) {
			t.Errorf("a click at %s on the page %s never called GET %s", r.Click, r.Hash, r.ClickAwait)
		}
	}
	t.Logf("Flink %s's dashboard: %d pages, %d REST calls to %d paths, in %v", v, len(routes), len(calls), len(paths), time.Since(start).Round(time.Millisecond))
}

// pixel is a transparent 1×1 GIF.
var pixel = []byte("GIF89a\x01\x00\x01\x00\x80\x00\x00\x00\x00\x00\xff\xff\xff!\xf9\x04\x01\x00\x00\x00\x00,\x00\x00\x00\x00\x01\x00\x01\x00\x00\x02\x02D\x01\x00;")

// donePath is where the walker posts its walk.
const donePath = "/__weir-walk-done"

// walk is what the walker saw.
type walk struct {
	// Visited counts the routes it opened.
	Visited int `json:"visited"`
	// Errors are the notifications and errors the pages showed or logged.
	Errors []string `json:"errors"`
	// Cancel is the status of the cancel request, 0 without one.
	Cancel int `json:"cancel"`
}

// holdPath is an image the page with holdScript loads, which the server
// answers once the page has posted to releasePath: until then the page's
// load event, on which Chromium's --screenshot waits, does not fire.
const (
	holdPath    = "/__weir-hold"
	releasePath = "/__weir-release"
)

// holdScript holds the page's load event until it has drawn its data:
// four seconds after the first answer to a REST call whose path ends in
// %s (the dashboard polls every 3 s, and some pages draw what they have
// asked for only on the next poll), once every request has been answered
// for half a second; or after 30 s.
const holdScript = `<script>
(function () {
  var inflight = 0, awaited = 0, lastEnd = 0, t0 = Date.now(), want = %q;
  var open = XMLHttpRequest.prototype.open, send = XMLHttpRequest.prototype.send;
  XMLHttpRequest.prototype.open = function (method, url) {
    this.weirPath = new URL(url, location.href).pathname;
    return open.apply(this, arguments);
  };
  XMLHttpRequest.prototype.send = function () {
    var x = this;
    inflight++;
    x.addEventListener("loadend", function () {
      inflight--;
      lastEnd = Date.now();
      if (!awaited && x.weirPath.slice(-want.length) === want) {
        awaited = lastEnd;
      }
    });
    return send.apply(this, arguments);
  };
  (function poll() {
    var now = Date.now();
    if (awaited && now - awaited > 4000 && inflight === 0 && now - lastEnd > 500 || now - t0 > 30000) {
      navigator.sendBeacon("` + releasePath + `", "");
    } else {
      setTimeout(poll, 100);
    }
  })();
})();
</script><img src="` + holdPath + `" alt="" style="display:none">`

// walkerPage returns Flink's index.html in dir with the walker over
// routes added, or, for a single route without a hash, holdScript
// awaiting the route's Await; the page is served under prefix ("/": at
// the root).
func walkerPage(t *testing.T, dir, prefix string, routes []route, dwell time.Duration, cancel string) []byte {
	t.Helper()
	index, err := os.ReadFile(filepath.Join(dir, "index.html"))
	if err != nil {
		t.Fatal(err)
	}
	if len(routes) == 1 && routes[0].Hash == "" {
		return bytes.Replace(index, []byte("</body>"), []byte(fmt.Sprintf(holdScript, routes[0].Await)+"</body>"), 1)
	}
	var script bytes.Buffer
	if err := walker.Execute(&script, struct {
		Routes []route
		Dwell  int64
		Cancel string
		Done   string
		Prefix string
	}{routes, dwell.Milliseconds(), cancel, donePath, prefix}); err != nil {
		t.Fatal(err)
	}
	return bytes.Replace(index, []byte("</body>"), append(script.Bytes(), []byte("</body>")...), 1)
}

// listenRecording serves h on a free loopback port, taking the walk the
// walker posts to donePath off it, and returns the base URL and the
// channel the walk arrives on. record says whether a request is one of
// the page's REST calls, and returns its path as the REST API names it,
// which rec then notes with its answer.
func listenRecording(t *testing.T, h http.Handler, rec *recorder, record func(*http.Request) (string, bool)) (string, <-chan walk) {
	t.Helper()
	done := make(chan walk, 1)
	release := make(chan struct{})
	var releaseOnce sync.Once
	hf := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec.touch()
		switch path.Clean(r.URL.Path) {
		case releasePath:
			releaseOnce.Do(func() { close(release) })
			return
		case holdPath:
			select {
			case <-release:
			case <-r.Context().Done():
			}
			w.Header().Set("Content-Type", "image/gif")
			_, _ = w.Write(pixel)
			return
		}
		if path.Clean(r.URL.Path) == donePath {
			var wk walk
			if err := json.NewDecoder(r.Body).Decode(&wk); err != nil {
				wk.Errors = append(wk.Errors, "decoding the walk: "+err.Error())
			}
			select {
			case done <- wk:
			default:
			}
			return
		}
		uri, ok := record(r)
		if !ok {
			h.ServeHTTP(w, r)
			return
		}
		c := call{method: r.Method, uri: uri}
		sw := &statusWriter{ResponseWriter: w, code: http.StatusOK}
		h.ServeHTTP(sw, r)
		if r.Context().Err() != nil {
			// The page dropped the request (it moved on to the next
			// route): whatever a proxy in between answered, the API
			// did not.
			return
		}
		c.code = sw.code
		rec.add(c)
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: hf, ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return "http://" + ln.Addr().String(), done
}

// isFile reports whether p names a regular file under dir.
func isFile(dir, p string) bool {
	fi, err := os.Stat(filepath.Join(dir, filepath.FromSlash(path.Clean("/"+p))))
	return err == nil && fi.Mode().IsRegular()
}

// proxied serves Flink's dashboard in dir as a reverse proxy would: its
// files from the directory, every other path from api, at the root of
// the origin.
func proxied(dir string, api http.Handler) server {
	return func(t *testing.T, rec *recorder, routes []route, dwell time.Duration, cancel string) (string, <-chan walk) {
		page := walkerPage(t, dir, "/", routes, dwell, cancel)
		h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			p := path.Clean(r.URL.Path)
			switch {
			case p == "/" || p == "/index.html":
				w.Header().Set("Content-Type", "text/html; charset=utf-8")
				_, _ = w.Write(page)
			case isFile(dir, p):
				http.ServeFile(w, r, filepath.Join(dir, filepath.FromSlash(p)))
			default:
				api.ServeHTTP(w, r)
			}
		})
		base, done := listenRecording(t, h, rec, func(r *http.Request) (string, bool) {
			p := path.Clean(r.URL.Path)
			return r.URL.RequestURI(), p != "/" && p != "/index.html" && !isFile(dir, p)
		})
		return base + "/", done
	}
}

// dashboardCopy returns a directory for rest.flink-dashboard.dir that
// links to the files of Flink's dashboard in dir, with a copy of its
// index.html that withWalker then replaces.
func dashboardCopy(t *testing.T, dir string) string {
	t.Helper()
	copyDir := t.TempDir()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.Name() != "index.html" {
			if err := os.Symlink(filepath.Join(dir, e.Name()), filepath.Join(copyDir, e.Name())); err != nil {
				t.Fatal(err)
			}
		}
	}
	index, err := os.ReadFile(filepath.Join(dir, "index.html"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(copyDir, "index.html"), index, 0o644); err != nil {
		t.Fatal(err)
	}
	return copyDir
}

// underPrefix records the calls of a dashboard that h serves under
// web.FlinkDashboardPath from copyDir (a dashboardCopy of dir), after
// putting the walker into its index.html.
func underPrefix(dir, copyDir string, h http.Handler) server {
	return func(t *testing.T, rec *recorder, routes []route, dwell time.Duration, cancel string) (string, <-chan walk) {
		if err := os.WriteFile(filepath.Join(copyDir, "index.html"), walkerPage(t, dir, web.FlinkDashboardPath, routes, dwell, cancel), 0o644); err != nil {
			t.Fatal(err)
		}
		prefix := strings.TrimSuffix(web.FlinkDashboardPath, "/")
		base, done := listenRecording(t, h, rec, func(r *http.Request) (string, bool) {
			rest, ok := strings.CutPrefix(r.URL.RequestURI(), prefix)
			p := path.Clean(r.URL.Path)
			return rest, ok && p != prefix && p != prefix+"/index.html" && !isFile(dir, strings.TrimPrefix(p, prefix))
		})
		return base + web.FlinkDashboardPath, done
	}
}

// throughOption serves Flink's dashboard in dir as a user does, with
// rest.flink-dashboard.dir: weir's REST server for job, given
// web.WithFlinkDashboard, serves it under web.FlinkDashboardPath.
func throughOption(t *testing.T, dir string, job web.Job) server {
	copyDir := dashboardCopy(t, dir)
	opt, err := web.WithFlinkDashboard(copyDir)
	if err != nil {
		t.Fatal(err)
	}
	srv, err := web.New(job, opt, web.WithLogger(quiet), web.WithSampleInterval(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	// The page at "/" is weir's own UI, not Flink's.
	w := httptest.NewRecorder()
	srv.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/", nil))
	if w.Code != http.StatusOK || bytes.Contains(w.Body.Bytes(), []byte("<flink-root")) {
		t.Fatalf("GET / with %s set: %d, want weir's own UI", config.KeyRESTFlinkDashboardDir, w.Code)
	}
	return underPrefix(dir, copyDir, srv)
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

// dashboardRoutes are the pages the walker opens for job jid, its
// vertex and its task manager tm: the overview, the job's pages (its
// graph, a vertex's details, exceptions, data skew, timeline,
// checkpoints, configuration), the task managers' and the job manager's.
func dashboardRoutes(jid, vertex, tm string) []route {
	j := "/job/running/" + jid
	vp, tmp := "/jobs/"+jid+"/vertices/"+vertex, "/task-manager/"+tm
	return []route{
		{Hash: "/overview", Await: "/jobs/overview"},
		{Hash: j + "/overview", Await: "/jobs/" + jid},
		{Hash: j + "/overview/" + vertex + "/detail", Await: vp},
		{Hash: j + "/overview/" + vertex + "/subtasks"},
		{Hash: j + "/overview/" + vertex + "/taskmanagers", Await: vp + "/taskmanagers"},
		{Hash: j + "/overview/" + vertex + "/watermarks"},
		{Hash: j + "/overview/" + vertex + "/accumulators"},
		{Hash: j + "/overview/" + vertex + "/backpressure", Await: vp + "/backpressure"},
		{Hash: j + "/overview/" + vertex + "/metrics"},
		{Hash: j + "/overview/" + vertex + "/flamegraph"},
		{Hash: j + "/exceptions", Await: "/jobs/" + jid + "/exceptions"},
		{Hash: j + "/dataskew"},
		{Hash: j + "/timeline"},
		// Click the first vertex's bar: its subtasks' timeline. The chart
		// is 50 px a vertex and 50 px of padding above and below.
		{Hash: j + "/timeline", Await: "/jobs/" + jid, Click: "canvas", ClickAt: []float64{0.5, 0.35},
			ClickAwait: "^/jobs/" + jid + "/vertices/[0-9a-f]{32}/subtasktimes$"},
		{Hash: j + "/checkpoints", Await: "/jobs/" + jid + "/checkpoints/config"},
		// Unfold the latest checkpoint's first operator: its subtasks.
		{Hash: j + "/checkpoints", Await: "/jobs/" + jid + "/checkpoints", Click: ".ant-table-row-expand-icon",
			ClickAwait: "^/jobs/" + jid + "/checkpoints/details/[0-9]+/subtasks/[0-9a-f]{32}$"},
		{Hash: j + "/configuration", Await: "/jobs/" + jid + "/config"},
		{Hash: "/task-manager", Await: "/taskmanagers"},
		{Hash: tmp + "/metrics", Await: "/taskmanagers/" + tm},
		{Hash: tmp + "/log-list"},
		{Hash: tmp + "/logs"},
		{Hash: tmp + "/stdout"},
		{Hash: tmp + "/thread-dump", Await: "/taskmanagers/" + tm + "/thread-dump"},
		{Hash: tmp + "/profiler"},
		{Hash: "/job-manager/metrics", Await: "/jobmanager/metrics"},
		{Hash: "/job-manager/config", Await: "/jobmanager/config"},
		{Hash: "/job-manager/logs"},
		{Hash: "/job-manager/stdout"},
		{Hash: "/job-manager/log"},
		{Hash: "/job-manager/thread-dump"},
		{Hash: "/job-manager/profiler"},
	}
}

// TestFlinkDashboard walks each of Flink's dashboards through its pages
// of a running job: the overview, the job's pages (its graph, a vertex's
// details, exceptions, checkpoints, configuration), the task managers'
// and the job manager's; then cancels the job from the newest one's page.
func TestFlinkDashboard(t *testing.T) {
	bin := chromium(t)
	dirs := dashboards(t)
	if testing.Short() {
		t.Skip("starts a job and a browser; skipped with -short")
	}
	api, job, jid := startJob(t)
	var tms struct {
		TaskManagers []struct {
			ID string `json:"id"`
		} `json:"taskmanagers"`
	}
	getJSON(t, api, "/taskmanagers", &tms)
	var details struct {
		Vertices []struct {
			ID string `json:"id"`
		} `json:"vertices"`
	}
	getJSON(t, api, "/jobs/"+jid, &details)
	tm, vertex := tms.TaskManagers[0].ID, details.Vertices[1].ID
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

	routes := dashboardRoutes(jid, vertex, tm)
	versions := make([]string, 0, len(dirs))
	for v := range dirs {
		versions = append(versions, v)
	}
	slices.Sort(versions)
	// The newest is served as the README says, by weir's REST server
	// (rest.flink-dashboard.dir), the others as a reverse proxy in front
	// of it would.
	newest := versions[len(versions)-1]
	serveNewest := throughOption(t, dirs[newest], job)
	serveFor := func(v string) server {
		if v == newest {
			return serveNewest
		}
		return proxied(dirs[v], api)
	}
	for _, v := range versions {
		t.Run(v, func(t *testing.T) { walkPages(t, bin, v, serveFor(v), routes) })
	}

	// Screenshots of each dashboard's pages of the job.
	t.Run("screenshots", func(t *testing.T) {
		out := t.TempDir()
		var files []string
		for _, v := range versions {
			for _, p := range []struct{ name, hash, await string }{
				{"job", "/job/running/" + jid + "/overview", "/subtasks/metrics"},
				{"checkpoints", "/job/running/" + jid + "/checkpoints", "/checkpoints/config"},
			} {
				page, _ := serveFor(v)(t, &recorder{}, []route{{Await: p.await}}, time.Second, "")
				file := filepath.Join(out, "flink-"+v+"-"+p.name+".png")
				screenshot(t, bin, page+"#"+p.hash, file, 1400, 900)
				files = append(files, file)
			}
		}
		if os.Getenv("WEIR_UPDATE_SCREENSHOTS") == "1" {
			docs := filepath.Join("..", "..", "..", "docs")
			for _, f := range files {
				b, err := os.ReadFile(f)
				if err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(filepath.Join(docs, filepath.Base(f)), b, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			t.Logf("updated %d screenshots in docs/", len(files))
		}
	})

	// The dashboard's cancel (a GET of yarn-cancel from its page) passes
	// the API's checks of a request that changes a job, and cancels it.
	t.Run("cancel", func(t *testing.T) {
		rec := &recorder{}
		page, done := serveFor(newest)(t, rec, []route{{Hash: "/overview"}}, 500*time.Millisecond, "jobs/"+jid+"/yarn-cancel")
		if wk := browse(t, bin, page+"#/overview", rec, done); wk.Cancel != http.StatusAccepted {
			t.Fatalf("the dashboard's cancel answered %d, want 202", wk.Cancel)
		}
		deadline := time.Now().Add(30 * time.Second)
		for {
			var j struct {
				State string `json:"state"`
			}
			getJSON(t, api, "/jobs/"+jid, &j)
			if j.State == "CANCELED" {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the job is %s 30 s after the dashboard canceled it", j.State)
			}
			time.Sleep(20 * time.Millisecond)
		}
	})
}

// screenshot saves a w×h screenshot of url, a page with holdScript, in
// file once the page has drawn its data, and fails the test if the image
// is blank.
func screenshot(t *testing.T, bin, url, file string, w, h int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync",
		"--disable-dev-shm-usage", "--hide-scrollbars", "--user-data-dir="+t.TempDir(),
		fmt.Sprintf("--window-size=%d,%d", w, h), "--screenshot="+file, url)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("chromium --screenshot %s: %v\n%s", url, err, out)
	}
	f, err := os.Open(file)
	if err != nil {
		t.Fatalf("screenshot of %s: %v", url, err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatalf("screenshot %s: %v", file, err)
	}
	colors := map[uint32]bool{}
	b := img.Bounds()
	for y := b.Min.Y; y < b.Max.Y; y += 7 {
		for x := b.Min.X; x < b.Max.X; x += 7 {
			r, g, bl, _ := img.At(x, y).RGBA()
			colors[r>>8<<16|g>>8<<8|bl>>8] = true
		}
	}
	if len(colors) < 20 {
		t.Errorf("screenshot %s looks blank: %d colors", file, len(colors))
	}
}

// errStalled is a browser whose page has asked for nothing for
// stallAfter.
var errStalled = errors.New("the page stalled")

// stallAfter is how long a page that asks for nothing is given: the
// walker opens a page every dwell and the dashboard polls every 3 s.
const stallAfter = 5 * time.Second

// browse opens url in headless Chromium and returns the walk its page
// posts on done. It runs in real time: with --virtual-time-budget, which
// would run the pages' timers faster, Chromium now and then stops
// advancing time as the dashboard starts, and the page asks for nothing
// more. A run whose page stalls all the same is killed and tried again,
// up to four times.
func browse(t *testing.T, bin, url string, rec *recorder, done <-chan walk) walk {
	t.Helper()
	const attempts = 5
	for i := 1; ; i++ {
		wk, err := browseOnce(t, bin, url, rec, done)
		if err == nil {
			return wk
		}
		if i == attempts || !errors.Is(err, errStalled) {
			t.Fatalf("chromium, attempt %d of %d: %v", i, attempts, err)
		}
		t.Logf("chromium stalled (attempt %d of %d); trying again", i, attempts)
	}
}

// browseOnce runs Chromium until its page posts a walk or stalls.
func browseOnce(t *testing.T, bin, url string, rec *recorder, done <-chan walk) (walk, error) {
	rec.touch()
	cmd := exec.Command(bin,
		"--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync",
		"--disable-dev-shm-usage", "--hide-scrollbars", "--window-size=1400,1000",
		"--user-data-dir="+t.TempDir(),
		url)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		return walk{}, err
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	stop := func() {
		_ = cmd.Process.Kill()
		<-exited
	}
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case wk := <-done:
			stop()
			return wk, nil
		case err := <-exited:
			return walk{}, fmt.Errorf("chromium exited before the walk ended: %v\n%s", err, stderr.String())
		case <-tick.C:
			if rec.idle() > stallAfter {
				stop()
				return walk{}, errStalled
			}
		}
	}
}
