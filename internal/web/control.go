package web

import (
	"net"
	"net/http"
	"slices"
	"strings"
)

// Job control as Flink's clients call it:
//
//	PATCH /jobs/:jobid?mode=cancel        cancel (Flink's default mode)
//	GET   /jobs/:jobid/yarn-cancel        cancel, as Flink's web dashboard does
//	POST  /jobs/:jobid/stop               stop with a savepoint (see savepoints.go)
//	POST  /jobs/:jobid/savepoints         trigger a savepoint (see savepoints.go)
//	GET   /jobs/:jobid/savepoints/:triggerid
//	POST  /jobs/:jobid/checkpoints        trigger a checkpoint now (see savepoints.go)
//	GET   /jobs/:jobid/checkpoints/:triggerid
//
// Every one of them changes, or would change, a job, so beyond the
// credentials every request needs (gate.check) it must come from the
// API's own origin (crossOrigin) and, on a server without a token, name a
// loopback host (against DNS rebinding: a page of another site that has
// its name resolve to 127.0.0.1 is same-origin to the browser, but its
// requests carry its own host name).

// readMethod reports whether r only reads.
func readMethod(r *http.Request) bool {
	return r.Method == http.MethodGet || r.Method == http.MethodHead
}

// methodNotAllowed answers a request whose method the path does not take.
func methodNotAllowed(w http.ResponseWriter, r *http.Request, allow string) {
	w.Header().Set("Allow", allow)
	writeError(w, http.StatusMethodNotAllowed, "method "+echo(r.Method)+" is not allowed on "+echo(r.URL.Path)+": allowed are "+allow)
}

// mutationRefused says why a request that would change a job may not, or
// "" if it may.
func (g *gate) mutationRefused(r *http.Request) string {
	if why := crossOrigin(r); why != "" {
		return why
	}
	if g.token == "" {
		host := r.Host
		if h, _, err := net.SplitHostPort(host); err == nil {
			host = h
		}
		if !Loopback(host) {
			return "the request names host " + echo(r.Host) + ", not a loopback address, and the server has no rest.auth-token"
		}
	}
	return ""
}

// control answers the job control paths and reports whether seg was one
// of them: PATCH of /jobs/:jobid, and /jobs/:jobid/yarn-cancel, /stop,
// /savepoints and /savepoints/:triggerid with any method.
func (s *Server) control(w http.ResponseWriter, r *http.Request, seg []string) bool {
	n := len(seg)
	if n < 2 || seg[0] != "jobs" || seg[1] == "overview" {
		return false
	}
	var allow string
	var op func() (int, any, error)
	switch {
	case n == 2 && r.Method == http.MethodPatch:
		allow = "GET, HEAD, PATCH"
		op = func() (int, any, error) { return s.terminate(r) }
	case n == 3 && seg[2] == "yarn-cancel":
		allow = "GET"
		op = func() (int, any, error) { return s.cancel(r) }
	case n == 3 && seg[2] == "stop":
		allow = "POST"
		op = func() (int, any, error) { return s.triggerSavepoint(r, true) }
	case n == 3 && seg[2] == "savepoints":
		allow = "POST"
		op = func() (int, any, error) { return s.triggerSavepoint(r, false) }
	case n == 4 && seg[2] == "savepoints":
		allow = "GET, HEAD"
		op = func() (int, any, error) { return s.savepointStatus(seg[3]) }
	case n == 3 && seg[2] == "checkpoints" && r.Method == http.MethodPost:
		allow = "GET, HEAD, POST"
		op = func() (int, any, error) { return s.triggerCheckpoint(r) }
	case n == 3 && seg[2] == "resource-requirements" && !readMethod(r):
		allow = "GET, HEAD, PUT"
		op = func() (int, any, error) { return 0, nil, errNoRescale }
	case n == 4 && seg[2] == "checkpoints" && seg[3] != "config":
		allow = "GET, HEAD"
		op = func() (int, any, error) { return s.checkpointStatus(seg[3]) }
	default:
		return false
	}
	if !slices.Contains(strings.Split(allow, ", "), r.Method) {
		methodNotAllowed(w, r, allow)
		return true
	}
	if err := s.checkJob(seg[1]); err != nil {
		writeErr(w, err)
		return true
	}
	code, v, err := op()
	if err != nil {
		writeErr(w, err)
		return true
	}
	writeJSON(w, code, v)
	return true
}

// terminate is PATCH /jobs/:jobid: mode cancel (the default) cancels the
// job; mode stop, which Flink has removed, is refused with Flink's answer.
func (s *Server) terminate(r *http.Request) (int, any, error) {
	switch mode := r.URL.Query().Get("mode"); strings.ToLower(mode) {
	case "", "cancel":
		return s.cancel(r)
	case "stop":
		return 0, nil, badRequest(`the termination mode "stop" has been removed: for an ungraceful shutdown use "cancel" instead; for a graceful shutdown, POST /jobs/:jobid/stop (stop with a savepoint)`)
	default:
		return 0, nil, badRequest("unknown termination mode %q: want cancel", echo(mode))
	}
}

// cancel cancels the job and answers 202 with Flink's empty body, before
// the job has stopped: the job's state shows CANCELLING, then CANCELED. A
// job already canceled is answered the same; one that finished or failed
// with 409, as Flink does.
func (s *Server) cancel(r *http.Request) (int, any, error) {
	if why := s.opts.gate.mutationRefused(r); why != "" {
		s.opts.logger.Warn("refused to cancel a job", "job_id", s.jm.JobID(), "remote", r.RemoteAddr, "reason", why)
		return 0, nil, &statusError{http.StatusForbidden, "cancel refused: " + why}
	}
	if s.job.Cancel == nil {
		return 0, nil, &statusError{http.StatusNotImplemented, "this server cannot cancel job " + s.jm.JobID()}
	}
	if s.ended() {
		switch st := s.state(); st {
		case stateCanceled:
			return http.StatusAccepted, struct{}{}, nil
		default:
			return 0, nil, &statusError{http.StatusConflict, "job cancellation failed because the job has already reached another terminal state (" + st + ")"}
		}
	}
	s.opts.logger.Info("canceling the job, as a REST request asks", "job_id", s.jm.JobID(), "remote", r.RemoteAddr)
	s.job.Cancel()
	return http.StatusAccepted, struct{}{}, nil
}
