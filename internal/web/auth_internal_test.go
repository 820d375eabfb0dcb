package web

import (
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

// TestSessionExpires: a session cookie opens the API until its lifetime
// has passed, and a bearer token still does afterwards.
func TestSessionExpires(t *testing.T) {
	g := newGate("tok", slog.New(slog.DiscardHandler))
	now := time.Unix(1_700_000_000, 0)
	g.now = func() time.Time { return now }
	cookie := g.newSession(now.Add(sessionLifetime))
	req := func(header, value string) *http.Request {
		r := httptest.NewRequest(http.MethodGet, "/jobs", nil)
		r.Header.Set(header, value)
		return r
	}
	withCookie := req("Cookie", sessionCookie+"="+cookie)
	if !g.authorized(withCookie) {
		t.Fatal("a fresh session is refused")
	}
	now = now.Add(sessionLifetime - time.Second)
	if !g.authorized(withCookie) {
		t.Fatal("a session is refused before its end")
	}
	now = now.Add(time.Second)
	if g.authorized(withCookie) {
		t.Fatal("an expired session is accepted")
	}
	if !g.authorized(req("Authorization", "Bearer tok")) {
		t.Fatal("the bearer token is refused")
	}
}
