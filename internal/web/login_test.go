package web_test

import (
	"bytes"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/weirstream/weir/internal/launch"
	"github.com/weirstream/weir/internal/web"
)

const loginToken = "ui-s3cret+/="

// lockedBuffer is a log sink safe for the server's goroutines.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// browser is an HTTP client that keeps cookies and does not follow
// redirects, so that each answer can be checked.
type browser struct {
	t    *testing.T
	base string
	c    *http.Client
	// jar holds the cookies last set, kept by hand: net/http/cookiejar
	// would hide their attributes.
	jar []*http.Cookie
}

func newBrowser(t *testing.T, base string, c *http.Client) *browser {
	if c == nil {
		c = &http.Client{}
	}
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return &browser{t: t, base: base, c: c}
}

func (b *browser) do(method, path string, body url.Values, header ...string) (*http.Response, string) {
	b.t.Helper()
	var r io.Reader
	if body != nil {
		r = strings.NewReader(body.Encode())
	}
	req, err := http.NewRequest(method, b.base+path, r)
	if err != nil {
		b.t.Fatal(err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	for _, c := range b.cookies() {
		req.AddCookie(c)
	}
	resp, err := b.c.Do(req)
	if err != nil {
		b.t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	b.store(resp)
	return resp, string(data)
}

func (b *browser) cookies() []*http.Cookie { return b.jar }

func (b *browser) store(resp *http.Response) {
	if cs := resp.Cookies(); len(cs) > 0 {
		b.jar = cs
	}
}

// TestLogin: with rest.auth-token set, a browser without credentials
// opening the UI is sent to the login page, which is served without
// credentials, as are the UI's assets; a POST of the right token from the
// same origin sets an HttpOnly, SameSite=Strict session cookie holding
// nothing of the token, with which the UI and the API answer; a wrong
// token, another origin or another site's request is refused and logged
// without the token; the bearer check stays; a tampered cookie or one of
// another server is refused.
func TestLogin(t *testing.T) {
	f := startJob(t, nil)
	logs := &lockedBuffer{}
	logger := slog.New(slog.NewTextHandler(logs, nil))
	srv, err := web.New(web.Job{Master: launch.MasterOf(f.client), Done: f.client.Done(), Err: f.client.Wait},
		web.WithAuthToken(loginToken), web.WithLogger(logger))
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	ts := httptest.NewServer(srv)
	defer ts.Close()
	b := newBrowser(t, ts.URL, nil)

	// Without credentials.
	if resp, _ := b.do("GET", "/", nil); resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/login" {
		t.Fatalf("GET / without credentials: %s to %q, want 303 to /login", resp.Status, resp.Header.Get("Location"))
	}
	for _, p := range []string{"/jobs/overview", "/jobs/" + f.jobID(), "/metrics"} {
		if resp, _ := b.do("GET", p, nil); resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("GET %s without credentials: %s, want 401", p, resp.Status)
		}
	}
	resp, body := b.do("GET", "/login", nil)
	if resp.StatusCode != http.StatusOK || !strings.Contains(body, `action="/login"`) || !strings.Contains(resp.Header.Get("Content-Security-Policy"), "script-src 'self'") {
		t.Fatalf("GET /login: %s %q", resp.Status, body)
	}
	for _, p := range []string{"/ui/login.js", "/ui/style.css"} {
		if resp, _ := b.do("GET", p, nil); resp.StatusCode != http.StatusOK {
			t.Errorf("GET %s without credentials: %s, want 200", p, resp.Status)
		}
	}
	// A probe needs no credentials and learns nothing but that the
	// process answers.
	if resp, body := b.do("GET", web.HealthPath, nil); resp.StatusCode != http.StatusOK || body != "ok\n" {
		t.Errorf("GET %s without credentials: %s %q, want 200 \"ok\"", web.HealthPath, resp.Status, body)
	}
	if resp, _ := b.do("POST", web.HealthPath, nil); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("POST %s without credentials: %s, want 401", web.HealthPath, resp.Status)
	}

	// Refused logins.
	origin := ts.URL
	for _, c := range []struct {
		name   string
		token  string
		header []string
		code   int
		says   string
	}{
		{"wrong token", "n0t-the-t0ken", []string{"Origin", origin}, http.StatusUnauthorized, "authentication failed"},
		{"empty token", "", nil, http.StatusUnauthorized, "authentication failed"},
		{"the token with a suffix", loginToken + "x", nil, http.StatusUnauthorized, "authentication failed"},
		{"another origin", loginToken, []string{"Origin", "http://evil.example"}, http.StatusForbidden, "another origin"},
		{"an opaque origin", loginToken, []string{"Origin", "null"}, http.StatusForbidden, "another origin"},
		{"another port", loginToken, []string{"Origin", "http://127.0.0.1:1"}, http.StatusForbidden, "another origin"},
		{"another site", loginToken, []string{"Sec-Fetch-Site", "cross-site"}, http.StatusForbidden, "another site"},
	} {
		resp, body := b.do("POST", "/login", url.Values{"token": {c.token}}, c.header...)
		if resp.StatusCode != c.code || !strings.Contains(body, c.says) || len(resp.Cookies()) != 0 {
			t.Errorf("login with %s: %s %s, cookies %v; want %d saying %q and no cookie", c.name, resp.Status, body, resp.Cookies(), c.code, c.says)
		}
	}
	if resp, _ := b.do("POST", "/login", url.Values{"token": {strings.Repeat("x", 10_000)}}); resp.StatusCode != http.StatusBadRequest {
		t.Errorf("a login of 10 kB: %s, want 400", resp.Status)
	}
	if resp, _ := b.do("PUT", "/login", nil); resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("PUT /login: %s, want 405", resp.Status)
	}
	if n := strings.Count(logs.String(), "refused a login"); n != 7 {
		t.Errorf("%d refused logins logged, want 7:\n%s", n, logs.String())
	}

	// The login.
	resp, _ = b.do("POST", "/login", url.Values{"token": {loginToken}}, "Origin", origin, "Sec-Fetch-Site", "same-origin")
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/" {
		t.Fatalf("login: %s to %q, want 303 to /", resp.Status, resp.Header.Get("Location"))
	}
	var session *http.Cookie
	for _, c := range resp.Cookies() {
		if c.Name == "weir_session" {
			session = c
		}
	}
	if session == nil {
		t.Fatalf("login set no session cookie: %v", resp.Header["Set-Cookie"])
	}
	if !session.HttpOnly || session.SameSite != http.SameSiteStrictMode || session.Secure || session.Path != "/" || session.MaxAge <= 0 {
		t.Errorf("session cookie %+v: want HttpOnly, SameSite=Strict, not Secure over plain HTTP, Path /, a lifetime", session)
	}
	if strings.Contains(session.Value, loginToken) || strings.Contains(session.Value, url.QueryEscape(loginToken)) {
		t.Errorf("the session cookie holds the token: %q", session.Value)
	}
	for _, p := range []string{"/", "/jobs/overview", "/jobs/" + f.jobID(), "/metrics"} {
		if resp, _ := b.do("GET", p, nil); resp.StatusCode != http.StatusOK {
			t.Errorf("GET %s with the session: %s, want 200", p, resp.Status)
		}
	}
	if resp, _ := b.do("GET", "/login", nil); resp.StatusCode != http.StatusOK {
		t.Errorf("GET /login with the session: %s", resp.Status)
	}
	if strings.Contains(logs.String(), loginToken) || strings.Contains(logs.String(), "n0t-the-t0ken") {
		t.Errorf("the log shows a token:\n%s", logs.String())
	}

	// The bearer check stays; a tampered session, or one of another
	// server, is refused.
	api := newBrowser(t, ts.URL, nil)
	if resp, _ := api.do("GET", "/jobs/overview", nil, "Authorization", "Bearer "+loginToken); resp.StatusCode != http.StatusOK {
		t.Errorf("the bearer token: %s", resp.Status)
	}
	exp, sig, _ := strings.Cut(session.Value, ".")
	for _, v := range []string{exp + "0." + sig, exp + "." + sig[:len(sig)-2] + "AA", exp, "", loginToken} {
		api.jar = []*http.Cookie{{Name: "weir_session", Value: v}}
		if resp, _ := api.do("GET", "/jobs/overview", nil); resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("session %q: %s, want 401", v, resp.Status)
		}
	}
	other, err := web.New(web.Job{Master: launch.MasterOf(f.client)}, web.WithAuthToken(loginToken), web.WithLogger(quiet))
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	ts2 := httptest.NewServer(other)
	defer ts2.Close()
	elsewhere := newBrowser(t, ts2.URL, nil)
	elsewhere.jar = []*http.Cookie{session}
	if resp, _ := elsewhere.do("GET", "/jobs/overview", nil); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("another server's session: %s, want 401", resp.Status)
	}
}

// TestLoginOverTLS: over TLS the session cookie is Secure.
func TestLoginOverTLS(t *testing.T) {
	f := startJob(t, nil)
	srv, err := web.New(web.Job{Master: launch.MasterOf(f.client)}, web.WithAuthToken(loginToken), web.WithLogger(quiet))
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	ts := httptest.NewTLSServer(srv)
	defer ts.Close()
	b := newBrowser(t, ts.URL, ts.Client())
	resp, _ := b.do("POST", "/login", url.Values{"token": {loginToken}}, "Origin", ts.URL)
	if resp.StatusCode != http.StatusSeeOther || len(resp.Cookies()) != 1 || !resp.Cookies()[0].Secure {
		t.Fatalf("login over TLS: %s, cookies %v; want 303 and a Secure cookie", resp.Status, resp.Cookies())
	}
}

// TestLoginBehindAProxy: behind a proxy that terminates TLS and forwards
// the host it was asked for, the login from that origin is accepted and
// its cookie is Secure.
func TestLoginBehindAProxy(t *testing.T) {
	f := startJob(t, nil)
	srv, err := web.New(web.Job{Master: launch.MasterOf(f.client)}, web.WithAuthToken(loginToken), web.WithLogger(quiet))
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	ts := httptest.NewServer(srv)
	defer ts.Close()
	b := newBrowser(t, ts.URL, nil)
	resp, _ := b.do("POST", "/login", url.Values{"token": {loginToken}},
		"Origin", "https://weir.example", "X-Forwarded-Host", "weir.example", "X-Forwarded-Proto", "https")
	if resp.StatusCode != http.StatusSeeOther || len(resp.Cookies()) != 1 || !resp.Cookies()[0].Secure {
		t.Fatalf("login through a TLS proxy: %s, cookies %v; want 303 and a Secure cookie", resp.Status, resp.Cookies())
	}
}

// TestLoginDirectory: a job manager's directory serves the login, and its
// session opens every job's pages; without a token, /login leads to the UI.
func TestLoginDirectory(t *testing.T) {
	f := startJob(t, nil)
	dir := web.NewDirectory(nil, web.WithAuthToken(loginToken), web.WithLogger(quiet))
	defer dir.Close()
	if err := dir.Add(web.Job{Master: launch.MasterOf(f.client), Done: f.client.Done(), Err: f.client.Wait}); err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(dir)
	defer ts.Close()
	b := newBrowser(t, ts.URL, nil)
	if resp, _ := b.do("GET", "/jobs/"+f.jobID(), nil); resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("a job without credentials: %s", resp.Status)
	}
	if resp, body := b.do("GET", web.HealthPath, nil); resp.StatusCode != http.StatusOK || body != "ok\n" {
		t.Errorf("the job manager's %s without credentials: %s %q, want 200 \"ok\"", web.HealthPath, resp.Status, body)
	}
	if resp, _ := b.do("POST", "/login", url.Values{"token": {loginToken}}); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("login: %s", resp.Status)
	}
	for _, p := range []string{"/", "/jobs/overview", "/jobs/" + f.jobID()} {
		if resp, _ := b.do("GET", p, nil); resp.StatusCode != http.StatusOK {
			t.Errorf("GET %s with the session: %s", p, resp.Status)
		}
	}

	open := web.NewDirectory(nil, web.WithLogger(quiet))
	ts2 := httptest.NewServer(open)
	defer ts2.Close()
	nb := newBrowser(t, ts2.URL, nil)
	if resp, _ := nb.do("GET", "/login", nil); resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/" {
		t.Errorf("GET /login without a token: %s to %q, want 303 to /", resp.Status, resp.Header.Get("Location"))
	}
	if resp, _ := nb.do("GET", "/", nil); resp.StatusCode != http.StatusOK {
		t.Errorf("GET / without a token: %s", resp.Status)
	}
}
