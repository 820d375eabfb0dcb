// Package ui is weir's web UI: a single page of plain HTML, CSS and
// JavaScript, embedded in the binary, that draws the job graph, the
// checkpoint history and details, and the cut of a checkpoint from the REST
// API served next to it. The page refreshes its data every two seconds.
//
// Routes live in the URL's fragment, so the server only serves "/" (the
// page) and the assets under Prefix:
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

//go:embed assets
var assets embed.FS

// FS returns the UI's assets: index.html, app.js and style.css.
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

// Handler serves the page at "/" and "/index.html", and the assets under
// Prefix. Anything else is 404.
func Handler() http.Handler {
	files := http.FileServerFS(FS())
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "no-cache")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		switch {
		case r.URL.Path == "/" || r.URL.Path == "/index.html":
			w.Header().Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; style-src 'self' 'unsafe-inline'; script-src 'self'")
			http.ServeFileFS(w, r, FS(), "index.html")
		case strings.HasPrefix(r.URL.Path, Prefix) && asset(strings.TrimPrefix(r.URL.Path, Prefix)):
			r2 := r.Clone(r.Context())
			r2.URL.Path = "/" + strings.TrimPrefix(r.URL.Path, Prefix)
			files.ServeHTTP(w, r2)
		default:
			http.NotFound(w, r)
		}
	})
}
