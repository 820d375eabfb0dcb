package web

import (
	"net/http"
)

// Rescaling and jar submission, which Flink's REST API offers and weir
// does not, answered so that Flink's clients learn why.

// parallelismBounds is Flink's JobVertexResourceRequirements.Parallelism.
type parallelismBounds struct {
	LowerBound int `json:"lowerBound"`
	UpperBound int `json:"upperBound"`
}

type vertexRequirements struct {
	Parallelism parallelismBounds `json:"parallelism"`
}

// resourceRequirements is GET /jobs/:jobid/resource-requirements, Flink's
// JobResourceRequirementsBody: each vertex's parallelism, its lower and
// upper bound both the parallelism it runs at (weir's parallelism is
// fixed while a job runs).
func (s *Server) resourceRequirements() map[string]vertexRequirements {
	out := map[string]vertexRequirements{}
	for _, v := range s.jm.Graph().Vertices {
		out[s.ids[v]] = vertexRequirements{Parallelism: parallelismBounds{LowerBound: v.Parallelism, UpperBound: v.Parallelism}}
	}
	return out
}

// errNoRescale answers PUT /jobs/:jobid/resource-requirements, which asks
// Flink's adaptive scheduler to rescale a running job in place.
var errNoRescale = &statusError{http.StatusNotImplemented,
	"weir cannot rescale a running job in place (Flink's adaptive scheduler): stop the job with a savepoint " +
		"(POST /jobs/:jobid/stop, or weir stop) and resume it from that savepoint at another parallelism " +
		"(weir run --from <savepoint> -D parallelism.default=<n>)"}

// jarListInfo is Flink's JarListInfo.
type jarListInfo struct {
	Address string `json:"address"`
	Files   []any  `json:"files"`
}

// errNoJars answers every request to submit, run, plan or delete a jar.
const errNoJars = "weir runs Go programs, not jars: web submission is disabled, as with Flink's web.submit.enable: false " +
	"(submit a job with weir run)"

// serveJars answers Flink's jar paths (/jars, /jars/upload, /jars/:jarid,
// /jars/:jarid/plan, /jars/:jarid/run) and reports whether seg was one:
// GET /jars lists no jars, every other request is refused with 501 and
// errNoJars. /config's web-submit is false, so Flink's dashboard offers
// no submission page.
func serveJars(w http.ResponseWriter, r *http.Request, seg []string) bool {
	if len(seg) == 0 || seg[0] != "jars" || len(seg) > 3 {
		return false
	}
	if len(seg) == 1 && readMethod(r) {
		scheme := "http"
		if r.TLS != nil {
			scheme = "https"
		}
		writeJSON(w, http.StatusOK, jarListInfo{Address: scheme + "://" + echo(r.Host), Files: []any{}})
		return true
	}
	writeError(w, http.StatusNotImplemented, errNoJars)
	return true
}
