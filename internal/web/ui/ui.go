// Package ui is weir's web UI: a single page of plain HTML, CSS and
// JavaScript, embedded in the binary, that draws the job graph, the
// checkpoint history and details, and the cut of a checkpoint from the REST
// API served next to it. The page refreshes its data every two seconds.
//
// Routes live in the URL's fragment, so the server only serves "/" (the
// page), LoginPath (the login page of a server with a token) and the
// assets under Prefix:
//
//	#/jobs/<jid>                           overview: graph, chart, history
//	#/jobs/<jid>/checkpoints/<cid>         one checkpoint per operator and subtask
//	#/jobs/<jid>/checkpoints/<cid>/cut     the cut of a completed checkpoint
package ui

import (
	"embed"
	"io/fs"
	"net/http"
	"strings"
	"unicode/utf8"
)

// Prefix is the path under which the UI's assets are served.
const Prefix = "/ui/"

// LoginPath is the path of the login page, which exchanges the REST API's
// token, pasted or in the URL's fragment (#token=...), for a session
// cookie by POSTing it to the same path.
const LoginPath = "/login"

// csp is the pages' Content-Security-Policy: scripts and styles from the
// server only, so that nothing injected into a page runs.
const csp = "default-src 'self'; img-src 'self' data:; style-src 'self' 'unsafe-inline'; script-src 'self'; form-action 'self'; frame-ancestors 'none'"

//go:embed assets
var assets embed.FS

// FS returns the UI's assets: index.html, app.js, login.html, login.js
// and style.css.
func FS() fs.FS {
	sub, err := fs.Sub(assets, "assets")
	if err != nil {
		panic(err) // the directory is embedded above
	}
	return sub
}

// asset reports whether name is a file among the assets. A name that is no
// valid path (dot segments, invalid UTF-8 such as the overlong encodings of
// "." that probe for traversal) is none, rather than an error of the file
// system's.
func asset(name string) bool {
	if !utf8.ValidString(name) || !fs.ValidPath(name) {
		return false
	}
	fi, err := fs.Stat(FS(), name)
	return err == nil && !fi.IsDir()
}

// Handler serves the page at "/" and "/index.html", the login page at
// LoginPath, and the assets under Prefix. Anything else is 404.
func Handler() http.Handler {
	files := http.FileServerFS(FS())
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "no-cache")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		switch {
		case r.URL.Path == "/" || r.URL.Path == "/index.html":
			w.Header().Set("Content-Security-Policy", csp)
			http.ServeFileFS(w, r, FS(), "index.html")
		case r.URL.Path == LoginPath:
			w.Header().Set("Content-Security-Policy", csp)
			w.Header().Set("Referrer-Policy", "no-referrer")
			http.ServeFileFS(w, r, FS(), "login.html")
		case strings.HasPrefix(r.URL.Path, Prefix) && asset(strings.TrimPrefix(r.URL.Path, Prefix)):
			r2 := r.Clone(r.Context())
			r2.URL.Path = "/" + strings.TrimPrefix(r.URL.Path, Prefix)
			files.ServeHTTP(w, r2)
		default:
			http.NotFound(w, r)
		}
	})
}
