package web

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/weirstream/weir/config"
	"github.com/weirstream/weir/internal/web/ui"
)

// sessionCookie is the cookie the login page sets: a session's expiry
// time and an HMAC of it under a key of this process, so that it holds
// nothing of the token and ends with the process.
const sessionCookie = "weir_session"

// sessionLifetime is how long a browser's session lasts.
const sessionLifetime = 12 * time.Hour

// maxLoginBody bounds the body of a login request.
const maxLoginBody = 4 << 10

// gate admits the requests that carry the token, as a bearer header or
// through a session cookie, and serves the login page that gives browsers
// the cookie. A server's gate is shared by the servers of a Directory.
type gate struct {
	token  string
	key    [32]byte // signs session cookies; random for each gate
	now    func() time.Time
	logger *slog.Logger
}

func newGate(token string, logger *slog.Logger) *gate {
	g := &gate{token: token, now: time.Now, logger: logger}
	_, _ = rand.Read(g.key[:]) // never fails, as crypto/rand documents
	return g
}

// tokenEqual compares a presented token with the server's. Both sides are
// hashed first so that the comparison takes the same time whatever the
// lengths.
func tokenEqual(got, want string) bool {
	g := sha256.Sum256([]byte(got))
	w := sha256.Sum256([]byte(want))
	return subtle.ConstantTimeCompare(g[:], w[:]) == 1
}

// bearer checks the request's bearer token.
func (g *gate) bearer(r *http.Request) bool {
	scheme, tok, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	return ok && strings.EqualFold(scheme, "Bearer") && tokenEqual(strings.TrimSpace(tok), g.token)
}

func (g *gate) sessionMAC(expiry string) []byte {
	m := hmac.New(sha256.New, g.key[:])
	m.Write([]byte("weir ui session until " + expiry))
	return m.Sum(nil)
}

// newSession returns the value of a session cookie valid until exp.
func (g *gate) newSession(exp time.Time) string {
	e := strconv.FormatInt(exp.Unix(), 10)
	return e + "." + base64.RawURLEncoding.EncodeToString(g.sessionMAC(e))
}

// session checks the request's session cookie: signed by this gate and
// not expired.
func (g *gate) session(r *http.Request) bool {
	c, err := r.Cookie(sessionCookie)
	if err != nil {
		return false
	}
	e, sig, ok := strings.Cut(c.Value, ".")
	if !ok {
		return false
	}
	got, err := base64.RawURLEncoding.DecodeString(sig)
	if err != nil || subtle.ConstantTimeCompare(got, g.sessionMAC(e)) != 1 {
		return false
	}
	exp, err := strconv.ParseInt(e, 10, 64)
	return err == nil && g.now().Unix() < exp
}

// authorized reports whether r may read the API and the UI.
func (g *gate) authorized(r *http.Request) bool {
	return g.token == "" || g.bearer(r) || g.session(r)
}

// HealthPath answers 200 to a GET without credentials, for probes: a
// process that answers it is up. It tells nothing about jobs.
const HealthPath = "/healthz"

// check answers a request that lacks credentials (when there is a token),
// a probe's or the login page's, and reports
// whether the request may go on. The login page, the probe's path and the
// UI's assets, the same in every weir binary, need no credentials; an unauthenticated
// browser opening the UI is sent to the login page, keeping the URL's
// fragment (a route, or #token=...).
func (g *gate) check(w http.ResponseWriter, r *http.Request) bool {
	p := r.URL.Path
	read := r.Method == http.MethodGet || r.Method == http.MethodHead
	switch {
	case p == HealthPath && read:
		// A liveness or readiness probe (Kubernetes'): the process
		// answers, and says nothing else.
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Header().Set("Cache-Control", "no-store")
		w.WriteHeader(http.StatusOK)
		if r.Method == http.MethodGet {
			fmt.Fprintln(w, "ok")
		}
		return false
	case p == ui.LoginPath && r.Method == http.MethodPost:
		g.login(w, r)
		return false
	case p == ui.LoginPath && read && g.token == "":
		http.Redirect(w, r, "/", http.StatusSeeOther)
		return false
	case p == ui.LoginPath && read:
		return true
	case p == ui.LoginPath:
		w.Header().Set("Allow", "GET, HEAD, POST")
		writeError(w, http.StatusMethodNotAllowed, fmt.Sprintf("%s is not allowed on %s", echo(r.Method), p))
		return false
	case strings.HasPrefix(p, ui.Prefix):
	case !g.authorized(r) && read && (p == "/" || p == "/index.html" || p == FlinkDashboardPath):
		http.Redirect(w, r, ui.LoginPath, http.StatusSeeOther)
		return false
	case !g.authorized(r):
		w.Header().Set("WWW-Authenticate", `Bearer realm="weir"`)
		writeError(w, http.StatusUnauthorized, "missing or invalid bearer token (rest.auth-token)")
		return false
	}
	// Which methods a path takes is the router's to say; the job control
	// paths among them check their requests' origin (mutationRefused).
	return true
}

// login exchanges the token of a POST for a session cookie: HttpOnly,
// SameSite=Strict, Secure over TLS (here, or at a proxy in front that says
// so in X-Forwarded-Proto). A login from another origin is
// refused, whatever its token. It answers 303 to the UI, which a form
// follows and fetch too.
func (g *gate) login(w http.ResponseWriter, r *http.Request) {
	if g.token == "" {
		http.Redirect(w, r, "/", http.StatusSeeOther)
		return
	}
	if why := crossOrigin(r); why != "" {
		g.logger.Warn("refused a login", "remote", r.RemoteAddr, "reason", why)
		writeError(w, http.StatusForbidden, "login refused: "+why)
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, maxLoginBody)
	if err := r.ParseForm(); err != nil {
		writeError(w, http.StatusBadRequest, "malformed login: want a form with the token in the field \"token\"")
		return
	}
	if !tokenEqual(r.PostForm.Get("token"), g.token) {
		g.logger.Warn("refused a login", "remote", r.RemoteAddr, "reason", "wrong token")
		writeError(w, http.StatusUnauthorized, "authentication failed: that is not the token this server requires (its "+config.KeyRESTAuthToken+")")
		return
	}
	exp := g.now().Add(sessionLifetime)
	http.SetCookie(w, &http.Cookie{
		Name:     sessionCookie,
		Value:    g.newSession(exp),
		Path:     "/",
		Expires:  exp,
		MaxAge:   int(sessionLifetime / time.Second),
		HttpOnly: true,
		Secure:   r.TLS != nil || strings.EqualFold(r.Header.Get("X-Forwarded-Proto"), "https"),
		SameSite: http.SameSiteStrictMode,
	})
	w.Header().Set("Cache-Control", "no-store")
	http.Redirect(w, r, "/", http.StatusSeeOther)
}

// crossOrigin says why a login POST comes from another site, or "" if it
// does not: the host of its Origin, when the browser sends one, must be
// the one the request is for (as a proxy in front may report it in
// X-Forwarded-Host, which a page of another site cannot set), and
// Sec-Fetch-Site, likewise, same-origin (or none: typed by the user).
func crossOrigin(r *http.Request) string {
	if o := r.Header.Get("Origin"); o != "" {
		u, err := url.Parse(o)
		fwd := r.Header.Get("X-Forwarded-Host")
		if err != nil || u.Host == "" || !strings.EqualFold(u.Host, r.Host) && (fwd == "" || !strings.EqualFold(u.Host, fwd)) {
			return fmt.Sprintf("the request comes from another origin, %q", echo(o))
		}
	}
	if s := r.Header.Get("Sec-Fetch-Site"); s != "" && s != "same-origin" && s != "none" {
		return fmt.Sprintf("the request comes from another site (Sec-Fetch-Site %q)", echo(s))
	}
	return ""
}
