package ui

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestHandler(t *testing.T) {
	h := Handler()
	for _, c := range []struct {
		path, ctype, body string
		code              int
	}{
		{"/", "text/html", `<script src="/ui/app.js"`, http.StatusOK},
		{"/ui/app.js", "javascript", "data-ready", http.StatusOK},
		{"/ui/style.css", "text/css", "--accent", http.StatusOK},
		{"/login", "text/html", `<form id="login" method="post" action="/login">`, http.StatusOK},
		{"/ui/login.js", "javascript", "data-ready", http.StatusOK},
		{"/ui/", "", "", http.StatusNotFound},
		{"/ui/missing.js", "", "", http.StatusNotFound},
		{"/jobs", "", "", http.StatusNotFound},
		// Traversal probes: overlong UTF-8 for "..", invalid UTF-8, dot
		// segments, a directory.
		{"/ui/%c0%ae%c0%ae/etc/passwd", "", "", http.StatusNotFound},
		{"/ui/%c0%ae%c0%ae/%c0%ae%c0%ae/etc/passwd", "", "", http.StatusNotFound},
		{"/ui/%ff", "", "", http.StatusNotFound},
		{"/ui/..%2f..%2fetc/passwd", "", "", http.StatusNotFound},
		{"/ui/./app.js", "", "", http.StatusNotFound},
		{"/ui/.", "", "", http.StatusNotFound},
	} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, c.path, nil))
		if rec.Code != c.code {
			t.Errorf("GET %s: %d, want %d", c.path, rec.Code, c.code)
			continue
		}
		if c.code != http.StatusOK {
			continue
		}
		if ct := rec.Header().Get("Content-Type"); !strings.Contains(ct, c.ctype) {
			t.Errorf("GET %s: Content-Type %q, want %s", c.path, ct, c.ctype)
		}
		if !strings.Contains(rec.Body.String(), c.body) {
			t.Errorf("GET %s: body lacks %q", c.path, c.body)
		}
	}
}
