// Package uitest tests the web UI in a real browser: it runs
// "weir run gatewaymeter", opens the UI in headless Chromium, and checks the
// rendered pages and their screenshots.
package uitest

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"image/png"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// chromium returns the browser to drive: $WEIR_CHROMIUM, or the first of
// chromium, chromium-browser, google-chrome on PATH. Without one the test
// skips, unless WEIR_UI_REQUIRED=1 makes it fail.
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
	msg := "no chromium binary on PATH (install Debian's chromium: .ci/chromium.sh, or set WEIR_CHROMIUM)"
	if os.Getenv("WEIR_UI_REQUIRED") == "1" {
		t.Fatal(msg + "; WEIR_UI_REQUIRED=1")
	}
	t.Skip(msg)
	return ""
}

// syncBuffer is a bytes.Buffer safe for a writer and a reader goroutine.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// startWeir builds cmd/weir and runs gatewaymeter with a free REST port and
// a checkpoint a second, with env added to its environment; it returns
// the REST API's base URL. The job is stopped with SIGINT when the test
// ends.
func startWeir(t *testing.T, env ...string) string {
	t.Helper()
	return startWeirArgs(t, env)
}

// startWeirArgs is startWeir with more arguments for weir run.
func startWeirArgs(t *testing.T, env []string, args ...string) string {
	t.Helper()
	dir := t.TempDir()
	bin := filepath.Join(dir, "weir")
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("go not found on PATH: %v", err)
	}
	build := exec.Command(gobin, "build", "-o", bin, "github.com/weirstream/weir/cmd/weir")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build cmd/weir: %v\n%s", err, out)
	}
	cmd := exec.Command(bin, "run", "gatewaymeter",
		"-D", "rest.port=0",
		"-D", "execution.checkpointing.interval=1s",
		"-D", "execution.checkpointing.num-retained=20",
		"--checkpoint-dir", filepath.Join(dir, "checkpoints"),
		"--output", filepath.Join(dir, "out"))
	cmd.Args = append(cmd.Args, args...)
	cmd.Env = append(os.Environ(), env...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr := &syncBuffer{}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting weir: %v", err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGINT)
		select {
		case <-exited:
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
			t.Errorf("weir did not stop within 30 s of SIGINT; stderr:\n%s", stderr.String())
		}
	})
	first := make(chan string, 1)
	go func() {
		r := bufio.NewReader(stdout)
		line, _ := r.ReadString('\n')
		first <- line
		_, _ = io.Copy(io.Discard, r) // the status lines
	}()
	var line string
	select {
	case line = <-first:
	case <-time.After(2 * time.Minute):
		t.Fatalf("weir printed no first line within 2 min; stderr:\n%s", stderr.String())
	}
	m := regexp.MustCompile(`REST API at (http://\S+)`).FindStringSubmatch(line)
	if m == nil {
		t.Fatalf("no REST address in weir's first line %q; stderr:\n%s", line, stderr.String())
	}
	return strings.TrimRight(m[1], "/")
}

// getJSON fetches url into v, with the bearer token tok if there is one.
func getJSON(t *testing.T, url string, v any, tok ...string) error {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	if len(tok) > 0 {
		req.Header.Set("Authorization", "Bearer "+tok[0])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s: %s", url, resp.Status, body)
	}
	return json.Unmarshal(body, v)
}

// browser runs headless Chromium once with a fresh profile.
func browser(t *testing.T, bin string, args ...string) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	base := []string{
		"--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync",
		"--disable-dev-shm-usage", "--hide-scrollbars",
		"--user-data-dir=" + t.TempDir(),
		"--virtual-time-budget=6000",
	}
	cmd := exec.CommandContext(ctx, bin, append(base, args...)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("chromium %v: %v\n%s", args, err, stderr.String())
	}
	return stdout.Bytes()
}

// dumpDOM loads url until the UI has rendered the view ready names (the
// page sets data-ready on <body>), and returns the DOM.
func dumpDOM(t *testing.T, bin, url, ready string) string {
	t.Helper()
	want := fmt.Sprintf(`data-ready="%s"`, ready)
	var dom string
	for range 5 {
		dom = string(browser(t, bin, "--window-size=1400,1000", "--dump-dom", url))
		if strings.Contains(dom, want) {
			return dom
		}
		time.Sleep(time.Second)
	}
	t.Fatalf("%s never rendered (%s); last DOM:\n%s", url, want, dom)
	return ""
}

// screenshot saves url at the window size given and checks the image: a
// PNG of that size that is not blank.
func screenshot(t *testing.T, bin, url, file string, w, h int) {
	t.Helper()
	browser(t, bin, fmt.Sprintf("--window-size=%d,%d", w, h), "--screenshot="+file, url)
	f, err := os.Open(file)
	if err != nil {
		t.Fatalf("screenshot of %s: %v", url, err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatalf("screenshot %s: %v", file, err)
	}
	if b := img.Bounds(); b.Dx() != w || b.Dy() != h {
		t.Errorf("screenshot %s is %dx%d, want %dx%d", file, b.Dx(), b.Dy(), w, h)
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

type checkpoints struct {
	Latest struct {
		Completed *struct {
			ID int64 `json:"id"`
		} `json:"completed"`
	} `json:"latest"`
}

type cut struct {
	Metadata struct {
		Available bool   `json:"available"`
		Reason    string `json:"reason"`
	} `json:"metadata"`
	Sources []struct {
		Name   string `json:"name"`
		Splits []struct {
			Split  string `json:"split"`
			Offset int64  `json:"offset"`
		} `json:"splits"`
	} `json:"sources"`
	Operators []struct {
		UID string `json:"uid"`
	} `json:"operators"`
}

func TestUIInChromium(t *testing.T) {
	bin := chromium(t)
	if testing.Short() {
		t.Skip("starts a job and a browser; skipped with -short")
	}
	base := startWeir(t)

	var ov struct {
		Jobs []struct {
			JID string `json:"jid"`
		} `json:"jobs"`
	}
	if err := getJSON(t, base+"/jobs/overview", &ov); err != nil || len(ov.Jobs) != 1 {
		t.Fatalf("GET /jobs/overview: %v %+v", err, ov)
	}
	jid := ov.Jobs[0].JID
	var job struct {
		Vertices []struct {
			Name string `json:"name"`
		} `json:"vertices"`
	}
	if err := getJSON(t, base+"/jobs/"+jid, &job); err != nil {
		t.Fatal(err)
	}

	// Wait for the second completed checkpoint, so that the history has
	// more than one bar and the cut's sources have moved.
	var cid int64
	deadline := time.Now().Add(90 * time.Second)
	for {
		var cps checkpoints
		err := getJSON(t, base+"/jobs/"+jid+"/checkpoints", &cps)
		if err == nil && cps.Latest.Completed != nil && cps.Latest.Completed.ID >= 2 {
			cid = cps.Latest.Completed.ID
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no second completed checkpoint within 90 s (last error: %v)", err)
		}
		time.Sleep(250 * time.Millisecond)
	}
	var c cut
	if err := getJSON(t, fmt.Sprintf("%s/jobs/%s/checkpoints/%d/cut", base, jid, cid), &c); err != nil {
		t.Fatal(err)
	}
	if !c.Metadata.Available || len(c.Sources) == 0 {
		t.Fatalf("cut of checkpoint %d has no metadata or sources: %+v", cid, c)
	}

	out := t.TempDir()
	overviewURL := fmt.Sprintf("%s/#/jobs/%s", base, jid)
	cutURL := fmt.Sprintf("%s/#/jobs/%s/checkpoints/%d/cut", base, jid, cid)

	dom := dumpDOM(t, bin, overviewURL, "job")
	for _, v := range job.Vertices {
		if !strings.Contains(dom, fmt.Sprintf(`data-vertex="%s"`, v.Name)) {
			t.Errorf("overview: the job graph has no vertex %q", v.Name)
		}
	}
	for _, s := range []string{`class="chart"`, "Checkpoint history", "Recent checkpoints", "data-latest-completed="} {
		if !strings.Contains(dom, s) {
			t.Errorf("overview: no %s", s)
		}
	}
	if !regexp.MustCompile(`<tr id="cp-row-\d+" data-checkpoint-id="\d+" data-status="COMPLETED"`).MatchString(dom) {
		t.Errorf("overview: the checkpoint table has no completed checkpoint")
	}

	dom = dumpDOM(t, bin, cutURL, fmt.Sprintf("cut:%d", cid))
	for _, src := range c.Sources {
		for _, sp := range src.Splits {
			row := fmt.Sprintf(`<tr class="split" data-split="%s" data-offset="%d">`, sp.Split, sp.Offset)
			if !strings.Contains(dom, row) {
				t.Errorf("cut: no row for split %s at offset %d", sp.Split, sp.Offset)
			}
			if !strings.Contains(dom, fmt.Sprintf(`<g class="cut-split" data-split="%s" data-offset="%d">`, sp.Split, sp.Offset)) {
				t.Errorf("cut: the drawing has no split %s at offset %d", sp.Split, sp.Offset)
			}
		}
	}
	for _, op := range c.Operators {
		if !strings.Contains(dom, fmt.Sprintf(`data-operator="%s"`, op.UID)) {
			t.Errorf("cut: no state row for operator %s", op.UID)
		}
	}
	for _, v := range job.Vertices {
		if !strings.Contains(dom, fmt.Sprintf(`class="g-node cut-op" data-vertex="%s"`, v.Name)) {
			t.Errorf("cut: the drawing has no operator box %q", v.Name)
		}
	}
	for _, s := range []string{"Channels and barriers", `data-to-subtask="0"`, "Waited"} {
		if !strings.Contains(dom, s) {
			t.Errorf("cut: no %s", s)
		}
	}

	dom = dumpDOM(t, bin, fmt.Sprintf("%s/#/jobs/%s/checkpoints/%d", base, jid, cid), fmt.Sprintf("checkpoint:%d", cid))
	for _, v := range job.Vertices {
		if !strings.Contains(dom, fmt.Sprintf(`<tr class="group" data-vertex="%s">`, v.Name)) {
			t.Errorf("checkpoint %d: no row for operator %q", cid, v.Name)
		}
	}
	for _, s := range []string{"Per operator and subtask", "Sync", "Async", "Alignment", "Start delay"} {
		if !strings.Contains(dom, s) {
			t.Errorf("checkpoint %d: no %s", cid, s)
		}
	}

	overviewPNG := filepath.Join(out, "ui-overview.png")
	cutPNG := filepath.Join(out, "ui-cut.png")
	screenshot(t, bin, overviewURL, overviewPNG, 1400, 1100)
	screenshot(t, bin, cutURL, cutPNG, 1400, 1400)
	t.Logf("screenshots: %s, %s", overviewPNG, cutPNG)

	if os.Getenv("WEIR_UPDATE_SCREENSHOTS") == "1" {
		docs := filepath.Join("..", "..", "..", "docs")
		for _, f := range []string{overviewPNG, cutPNG} {
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(docs, filepath.Base(f)), b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		t.Logf("updated docs/ui-overview.png and docs/ui-cut.png")
	}
}

// TestUILoginInChromium runs a job whose REST API requires a token
// (rest.auth-token, from $WEIR_REST_AUTH_TOKEN) and drives the login in
// Chromium: a link with the token in its fragment opens the UI on the
// job, the UI without it shows the login page, and a wrong token is
// refused on the page.
func TestUILoginInChromium(t *testing.T) {
	bin := chromium(t)
	if testing.Short() {
		t.Skip("starts a job and a browser; skipped with -short")
	}
	const token = "ui+tok/en=&x"
	base := startWeir(t, "WEIR_REST_AUTH_TOKEN="+token)

	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := noRedirect.Get(base + "/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/login" {
		t.Fatalf("GET / without credentials: %s to %q, want 303 to /login", resp.Status, resp.Header.Get("Location"))
	}
	var ov struct {
		Jobs []struct {
			JID string `json:"jid"`
		} `json:"jobs"`
	}
	if err := getJSON(t, base+"/jobs/overview", &ov); err == nil {
		t.Fatal("GET /jobs/overview without credentials succeeded")
	}
	if err := getJSON(t, base+"/jobs/overview", &ov, token); err != nil || len(ov.Jobs) != 1 {
		t.Fatalf("GET /jobs/overview with the bearer token: %v %+v", err, ov)
	}
	var job struct {
		Vertices []struct {
			Name string `json:"name"`
		} `json:"vertices"`
	}
	if err := getJSON(t, base+"/jobs/"+ov.Jobs[0].JID, &job, token); err != nil {
		t.Fatal(err)
	}

	dom := dumpDOM(t, bin, base+"/#token="+url.QueryEscape(token), "job")
	for _, v := range job.Vertices {
		if !strings.Contains(dom, fmt.Sprintf(`data-vertex="%s"`, v.Name)) {
			t.Errorf("after the login: the job graph has no vertex %q", v.Name)
		}
	}

	dom = dumpDOM(t, bin, base+"/", "login")
	if !strings.Contains(dom, `<form id="login"`) || strings.Contains(dom, "data-vertex=") {
		t.Errorf("without the token: not the login page:\n%s", dom)
	}
	dom = dumpDOM(t, bin, base+"/#token=n0t-it", "login-failed")
	if !strings.Contains(dom, "authentication failed") {
		t.Errorf("a wrong token: the page does not say it was refused:\n%s", dom)
	}
}

// TestUIShowsARestartingJob fails a subtask and holds the restart back:
// the job page must say RESTARTING and show the failure's cause.
func TestUIShowsARestartingJob(t *testing.T) {
	bin := chromium(t)
	if testing.Short() {
		t.Skip("starts a job and a browser; skipped with -short")
	}
	base := startWeirArgs(t, nil, "--fail-after", "2s", "-D", "restart-strategy.type=fixed-delay",
		"-D", "restart-strategy.fixed-delay.delay=1 h")
	var ov struct {
		Jobs []struct {
			JID   string `json:"jid"`
			State string `json:"state"`
		} `json:"jobs"`
	}
	deadline := time.Now().Add(time.Minute)
	for {
		if err := getJSON(t, base+"/jobs/overview", &ov); err == nil && len(ov.Jobs) == 1 && ov.Jobs[0].State == "RESTARTING" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the job is not RESTARTING a minute after its injected failure: %+v", ov)
		}
		time.Sleep(100 * time.Millisecond)
	}
	dom := dumpDOM(t, bin, base+"/#/jobs/"+ov.Jobs[0].JID, "job")
	for _, want := range []string{`>RESTARTING<`, `data-failures="1"`, "injected failure 1 (--fail-after 2s)", "Why the job is restarting"} {
		if !strings.Contains(dom, want) {
			t.Errorf("the job page does not show %q", want)
		}
	}
}
