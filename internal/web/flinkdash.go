package web

import (
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/weirstream/weir/config"
)

// FlinkDashboardPath is where a server given WithFlinkDashboard serves
// Flink's web dashboard. The dashboard asks for the REST API relative to
// its page (./jobs/overview), so under this prefix every path that is not
// one of its files is the REST API's path with the prefix removed.
const FlinkDashboardPath = "/flink/"

// flinkDashboard serves the files of Flink's dashboard from a directory.
type flinkDashboard struct {
	root http.FileSystem
}

// WithFlinkDashboard serves the web dashboard of Apache Flink from dir,
// the web/ folder of org.apache.flink:flink-runtime-web's jar, under
// FlinkDashboardPath, on the same origin and behind the same credentials
// as the REST API; weir's own UI stays at "/". weir ships none of Flink's
// files. dir must hold an index.html: otherwise the option is refused
// with an error that names config.KeyRESTFlinkDashboardDir.
func WithFlinkDashboard(dir string) (Option, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", config.KeyRESTFlinkDashboardDir, err)
	}
	fi, err := os.Stat(filepath.Join(abs, "index.html"))
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, fmt.Errorf("%s: %s holds no index.html: give it the web/ folder extracted from org.apache.flink:flink-runtime-web's jar", config.KeyRESTFlinkDashboardDir, abs)
	case err != nil:
		return nil, fmt.Errorf("%s: %w", config.KeyRESTFlinkDashboardDir, err)
	case !fi.Mode().IsRegular():
		return nil, fmt.Errorf("%s: %s is not a file", config.KeyRESTFlinkDashboardDir, filepath.Join(abs, "index.html"))
	}
	d := &flinkDashboard{root: http.Dir(abs)}
	return func(o *options) { o.flink = d }, nil
}

// serve answers r if its path is under FlinkDashboardPath and names one of
// the dashboard's files (or the page itself), and reports whether it
// did. Otherwise, for a path under the prefix, it removes the prefix from
// r's path so that the REST API answers it.
func (d *flinkDashboard) serve(w http.ResponseWriter, r *http.Request) bool {
	if d == nil {
		return false
	}
	p := r.URL.Path
	if p == strings.TrimSuffix(FlinkDashboardPath, "/") {
		http.Redirect(w, r, FlinkDashboardPath, http.StatusMovedPermanently)
		return true
	}
	rest, ok := strings.CutPrefix(p, FlinkDashboardPath)
	if !ok {
		return false
	}
	name := path.Clean("/" + rest)
	if name == "/" {
		name = "/index.html"
	}
	if f, err := d.root.Open(name); err == nil {
		fi, err := f.Stat()
		if err == nil && fi.Mode().IsRegular() {
			defer f.Close()
			if !readMethod(r) {
				methodNotAllowed(w, r, "GET, HEAD")
				return true
			}
			w.Header().Set("X-Content-Type-Options", "nosniff")
			http.ServeContent(w, r, fi.Name(), fi.ModTime(), f)
			return true
		}
		f.Close()
	}
	r.URL.Path = "/" + rest
	r.URL.RawPath = ""
	return false
}
