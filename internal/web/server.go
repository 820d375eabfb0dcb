package web

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/weirstream/weir/config"
	"github.com/weirstream/weir/internal/checkpoint"
	"github.com/weirstream/weir/internal/checkpoint/coordinator"
	"github.com/weirstream/weir/internal/checkpoint/storage"
	"github.com/weirstream/weir/internal/runtime"
	"github.com/weirstream/weir/internal/web/ui"
)

// Master is what the server reads from a job master; *runtime.JobMaster
// implements it. Every method may be called from any goroutine.
type Master interface {
	Graph() *runtime.JobGraph
	JobID() string
	Started() time.Time
	Metrics() runtime.Metrics
	SubtaskMetrics() []runtime.SubtaskMetrics
	CheckpointStats(ctx context.Context) (coordinator.Snapshot, bool, error)
	Latest() *runtime.Restore
	Status() (runtime.JobStatus, time.Time)
	Failures() ([]runtime.Failure, int)
}

// Job is the job the server describes.
type Job struct {
	Master Master
	// Done is closed when the job has ended; Err then returns why (nil: a
	// bounded job finished). Nil Done means the job never ends.
	Done <-chan struct{}
	Err  func() error
	// Config is the job's configuration: the checkpoint directory and the
	// checkpoint settings the REST API shows. Nil reads as the defaults.
	Config *config.Configuration
	// Cancel, if set, asks the job to stop as a cancel does (the REST
	// API's PATCH /jobs/:jobid?mode=cancel) and returns at once. Nil: the
	// API cannot cancel the job.
	Cancel func()
	// Savepoint, if set, takes a savepoint into a new directory under dir
	// ("": the job's default) and returns its path once it is complete
	// (POST /jobs/:jobid/savepoints). Nil: the API takes no savepoints.
	Savepoint func(ctx context.Context, dir string, format checkpoint.SavepointFormat) (string, error)
	// Checkpoint, if set, takes a checkpoint now and returns its id once
	// it has completed (POST /jobs/:jobid/checkpoints).
	Checkpoint func(ctx context.Context) (int64, error)
	// Stop, if set, stops the job with a savepoint under dir (drain: its
	// event time ended first) and returns
	// the savepoint's path once the job has ended (POST
	// /jobs/:jobid/stop). Nil: the API does not stop jobs.
	Stop func(ctx context.Context, dir string, drain bool, format checkpoint.SavepointFormat) (string, error)
	// Positions, if set, returns each source's current position per
	// split: vertex uid → split → the offset of the next record. The cut
	// then tells how many records a restore of each split would replay.
	Positions func() map[string]map[string]int64
}

// An Option configures a Server.
type Option func(*options)

type options struct {
	// standby, if set, reports whether this job manager is a standby
	// and the leader's REST address ("" if unknown).
	standby  func() (leaderREST string, isStandby bool)
	token    string
	interval time.Duration
	logger   *slog.Logger
	// config is what a Directory's /jobmanager/config lists.
	config *config.Configuration
	// gate checks requests; made from token and logger by New and
	// NewDirectory, whose servers share theirs.
	gate *gate
	// flink serves Flink's dashboard (WithFlinkDashboard); nil: not.
	flink *flinkDashboard
	// flinkNames: /metrics uses Flink's reporter's names
	// (WithFlinkMetricNames).
	flinkNames bool
	// inDirectory: the server is a job's of a Directory, whose /metrics
	// carries the processes' metrics.
	inDirectory bool
}

// WithAuthToken makes every request present the token tok: as a bearer
// token ("Authorization: Bearer tok"), or, from a browser, through the
// session cookie the login page (ui.LoginPath) sets in exchange for it.
// Default: no token; then Listen accepts only loopback addresses.
func WithAuthToken(tok string) Option { return func(o *options) { o.token = tok } }

// WithSampleInterval sets how often subtask counters are sampled for the
// backpressure ratio. Default: 1 s.
func WithSampleInterval(d time.Duration) Option { return func(o *options) { o.interval = d } }

// WithConfig gives a Directory the job manager's configuration, which its
// GET /jobmanager/config lists (sensitive values masked). Without it the
// directory does not serve that path. A job's Server lists its job's
// configuration and ignores this option.
func WithConfig(cfg *config.Configuration) Option { return func(o *options) { o.config = cfg } }

// WithLogger sets the logger. Default: slog.Default().
func WithLogger(l *slog.Logger) Option { return func(o *options) { o.logger = l } }

// Server is the REST API of one job, an http.Handler.
type Server struct {
	job     Job
	opts    options
	jm      Master
	cfg     *config.Configuration
	created time.Time

	vertices map[string]*runtime.Vertex // by vertex id
	ids      map[*runtime.Vertex]string

	started atomic.Pointer[time.Time]
	endedAt atomic.Int64 // Unix ms when Done was seen closed; 0 while running

	sampler *sampler
	prom    http.Handler // /metrics, through Prometheus' client

	sps savepoints

	// seen keeps the checkpoints last asked for (see lookup).
	seen seenCheckpoints

	storeOnce sync.Once
	store     *storage.Storage
	storeErr  error

	stop      chan struct{}
	closeOnce sync.Once
	wg        sync.WaitGroup
}

// New returns the REST API of job and starts its background sampler; Close
// stops it.
func New(job Job, opts ...Option) (*Server, error) {
	o := defaultOptions()
	for _, f := range opts {
		f(&o)
	}
	if job.Master == nil {
		return nil, errors.New("web: the job has no job master")
	}
	if o.interval <= 0 {
		return nil, fmt.Errorf("web: sample interval must be positive, got %v", o.interval)
	}
	if o.gate == nil {
		o.gate = newGate(o.token, o.logger)
	}
	cfg := job.Config
	if cfg == nil {
		cfg = config.New()
	}
	s := &Server{
		job:      job,
		opts:     o,
		jm:       job.Master,
		cfg:      cfg,
		created:  time.Now(),
		vertices: map[string]*runtime.Vertex{},
		ids:      map[*runtime.Vertex]string{},
		stop:     make(chan struct{}),
	}
	for _, v := range s.jm.Graph().Vertices {
		id := VertexID(v.UID)
		s.vertices[id] = v
		s.ids[v] = id
	}
	s.sampler = newSampler(s.jm)
	s.prom = s.metricsHandler()
	s.wg.Add(1)
	go s.run()
	return s, nil
}

// run samples the subtasks' counters until Close, and notes when the job
// ends.
func (s *Server) run() {
	defer s.wg.Done()
	t := time.NewTicker(s.opts.interval)
	defer t.Stop()
	done := s.job.Done
	s.sampler.sample(time.Now())
	for {
		select {
		case <-s.stop:
			return
		case <-done:
			s.ended()
			done = nil
		case now := <-t.C:
			s.sampler.sample(now)
		}
	}
}

// ended reports whether the job has ended, and notes when it was first
// seen so.
func (s *Server) ended() bool {
	select {
	case <-s.job.Done:
		s.endedAt.CompareAndSwap(0, time.Now().UnixMilli())
		return true
	default:
		return false
	}
}

// Close stops the sampler and closes the checkpoint storage the server
// opened. It does not stop a listener (see Listen): stop that first.
func (s *Server) Close() error {
	var err error
	s.closeOnce.Do(func() {
		close(s.stop)
		s.wg.Wait()
		s.storeOnce.Do(func() {}) // waits for an opening in progress
		if s.store != nil {
			err = s.store.Close()
		}
	})
	return err
}

// VertexID returns the REST id of the vertex whose uid is uid: 32
// hexadecimal digits, like Flink's JobVertexID.
func VertexID(uid string) string {
	sum := sha256.Sum256([]byte(uid))
	return hex.EncodeToString(sum[:16])
}

// defaultOptions are a server's options before any Option.
func defaultOptions() options { return options{interval: time.Second, logger: slog.Default()} }

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if s.opts.gate.check(w, r) && !s.opts.flink.serve(w, r) {
		s.route(w, r)
	}
}

// uiHandler serves the web UI: the page at "/" and its assets under
// ui.Prefix, none of which a REST path uses.
var uiHandler = ui.Handler()

// uiPath reports whether p is the web UI's: "/", "/index.html",
// ui.LoginPath or under ui.Prefix. Every other path is the REST API's.
func uiPath(p string) bool {
	return p == "/" || p == "/index.html" || p == ui.LoginPath || strings.HasPrefix(p, ui.Prefix)
}

// route dispatches on the path's segments.
func (s *Server) route(w http.ResponseWriter, r *http.Request) {
	seg := strings.Split(strings.Trim(r.URL.Path, "/"), "/")
	if s.control(w, r, seg) || profilerRequest(w, r, seg) || serveJars(w, r, seg) {
		return
	}
	if !readMethod(r) {
		methodNotAllowed(w, r, "GET, HEAD")
		return
	}
	if uiPath(r.URL.Path) {
		uiHandler.ServeHTTP(w, r)
		return
	}
	n := len(seg)
	at := func(i int, lit string) bool { return i < n && seg[i] == lit }
	switch {
	case n == 1 && seg[0] == "overview":
		s.overview(w)
		return
	case n == 1 && seg[0] == "metrics":
		s.prom.ServeHTTP(w, r)
		return
	case n == 1 && seg[0] == "jobs":
		s.jobs(w)
		return
	case n == 2 && at(0, "jobs") && seg[1] == "overview":
		s.jobsOverview(w)
		return
	case n == 1 && seg[0] == "taskmanagers":
		writeJSON(w, http.StatusOK, s.taskManagers())
		return
	case n == 2 && at(0, "jobmanager") && seg[1] == "config":
		writeJSON(w, http.StatusOK, configEntries(s.cfg))
		return
	case n == 2 && at(0, "jobmanager") && seg[1] == "metrics":
		ids, vals := jobManagerMetrics(s.overviewInfo())
		writeJSON(w, http.StatusOK, metricListOf(r.URL.Query(), ids, vals))
		return
	case n >= 2 && at(0, "taskmanagers"):
		s.serveTaskManager(w, r, seg)
		return
	case n >= 2 && at(0, "jobmanager") && serveProcess(w, r, seg[1:], true):
		return
	}
	if serveDashboard(w, seg, s.job.Cancel != nil) {
		return
	}
	if n < 2 || !at(0, "jobs") {
		notFound(w, r)
		return
	}
	var h func() (any, error)
	switch {
	case n == 2:
		h = func() (any, error) { return s.jobDetails(), nil }
	case n == 3 && at(2, "plan"):
		h = func() (any, error) { return jobPlanInfo{Plan: s.plan()}, nil }
	case n == 3 && at(2, "config"):
		h = func() (any, error) { return s.jobConfig() }
	case n == 3 && at(2, "metrics"):
		h = func() (any, error) { return s.jobMetrics(r.Context(), r.URL.Query()) }
	case n == 3 && at(2, "exceptions"):
		h = func() (any, error) { return s.exceptions(r.URL.Query().Get("maxExceptions")) }
	case n == 4 && at(2, "vertices"):
		h = func() (any, error) { return s.vertexDetails(seg[3]) }
	case n == 5 && at(2, "vertices") && at(4, "backpressure"):
		h = func() (any, error) { return s.backpressure(seg[3]) }
	case n == 5 && at(2, "vertices") && at(4, "watermarks"):
		h = func() (any, error) { return s.watermarks(seg[3]) }
	case n == 5 && at(2, "vertices") && at(4, "accumulators"):
		h = func() (any, error) { return s.vertexAccumulators(seg[3]) }
	case n == 6 && at(2, "vertices") && at(4, "subtasks") && at(5, "accumulators"):
		h = func() (any, error) { return s.subtasksAccumulators(seg[3]) }
	case n == 5 && at(2, "vertices") && at(4, "taskmanagers"):
		h = func() (any, error) { return s.vertexTaskManagers(seg[3]) }
	case n == 5 && at(2, "vertices") && at(4, "subtasktimes"):
		h = func() (any, error) { return s.subtaskTimes(seg[3]) }
	case n == 6 && at(2, "vertices") && at(4, "subtasks") && seg[5] != "metrics" && seg[5] != "accumulators":
		h = func() (any, error) { return s.subtaskAttempt(seg[3], seg[5], "") }
	case n == 7 && at(2, "vertices") && at(4, "subtasks") && at(6, "accumulators"):
		h = func() (any, error) { return s.subtaskAccumulators(seg[3], seg[5], "") }
	case n == 8 && at(2, "vertices") && at(4, "subtasks") && at(6, "attempts"):
		h = func() (any, error) { return s.subtaskAttempt(seg[3], seg[5], seg[7]) }
	case n == 9 && at(2, "vertices") && at(4, "subtasks") && at(6, "attempts") && at(8, "accumulators"):
		h = func() (any, error) { return s.subtaskAccumulators(seg[3], seg[5], seg[7]) }
	case n == 3 && at(2, "resource-requirements"):
		h = func() (any, error) { return s.resourceRequirements(), nil }
	case n == 4 && at(2, "jobmanager") && at(3, "config"):
		h = func() (any, error) { return configEntries(s.cfg), nil }
	case n == 4 && at(2, "jobmanager") && at(3, "environment"):
		h = func() (any, error) { return environment(), nil }
	case n == 5 && at(2, "vertices") && at(4, "flamegraph"):
		h = func() (any, error) { return s.flameGraph(seg[3]) }
	case n == 5 && at(2, "vertices") && at(4, "metrics"):
		h = func() (any, error) { return s.vertexMetrics(seg[3], r.URL.Query()) }
	case n == 6 && at(2, "vertices") && at(4, "subtasks") && at(5, "metrics"):
		h = func() (any, error) { return s.subtasksMetrics(seg[3], r.URL.Query()) }
	case n == 3 && at(2, "checkpoints"):
		h = func() (any, error) { return s.checkpoints(r.Context()) }
	case n == 4 && at(2, "checkpoints") && at(3, "config"):
		h = func() (any, error) { return s.checkpointConfig(r.Context()) }
	case n == 5 && at(2, "checkpoints") && at(3, "details"):
		h = func() (any, error) { return s.checkpointDetails(r.Context(), seg[4]) }
	case n == 7 && at(2, "checkpoints") && at(3, "details") && at(5, "subtasks"):
		h = func() (any, error) { return s.checkpointSubtasks(r.Context(), seg[4], seg[6]) }
	case n == 5 && at(2, "checkpoints") && at(4, "cut"):
		h = func() (any, error) { return s.cut(r.Context(), seg[3]) }
	default:
		notFound(w, r)
		return
	}
	if err := s.checkJob(seg[1]); err != nil {
		writeErr(w, err)
		return
	}
	v, err := h()
	if err != nil {
		writeErr(w, err)
		return
	}
	writeJSON(w, http.StatusOK, v)
}

// statusError is an error with the HTTP status it answers with.
type statusError struct {
	code int
	msg  string
}

func (e *statusError) Error() string { return e.msg }

func badRequest(format string, args ...any) error {
	return &statusError{http.StatusBadRequest, fmt.Sprintf(format, args...)}
}

func notFoundf(format string, args ...any) error {
	return &statusError{http.StatusNotFound, fmt.Sprintf(format, args...)}
}

// validJobID accepts what weir uses as job ids (32 hexadecimal digits by
// default, or any name given with stream.WithJobID that can name a
// directory): letters, digits, '.', '_' and '-', at most 128.
func validJobID(id string) bool {
	if id == "" || len(id) > 128 || id == "." || id == ".." {
		return false
	}
	for _, c := range id {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// checkJobID rejects a malformed job id.
func checkJobID(id string) error {
	if !validJobID(id) {
		return badRequest("malformed job id %q: want letters, digits, '.', '_' or '-'", echo(id))
	}
	return nil
}

func (s *Server) checkJob(id string) error {
	if err := checkJobID(id); err != nil {
		return err
	}
	if id != s.jm.JobID() {
		return notFoundf("job %s not found", echo(id))
	}
	return nil
}

// vertex resolves a vertex id of the path.
func (s *Server) vertex(id string) (*runtime.Vertex, error) {
	if len(id) != 32 {
		return nil, badRequest("malformed vertex id %q: want 32 hexadecimal digits", echo(id))
	}
	if _, err := hex.DecodeString(id); err != nil {
		return nil, badRequest("malformed vertex id %q: want 32 hexadecimal digits", echo(id))
	}
	v, ok := s.vertices[strings.ToLower(id)]
	if !ok {
		return nil, notFoundf("vertex %s not found in job %s", id, s.jm.JobID())
	}
	return v, nil
}

// checkpointID parses a checkpoint id of the path.
func checkpointID(s string) (int64, error) {
	id, err := strconv.ParseInt(s, 10, 64)
	if err != nil || id < 0 {
		return 0, badRequest("malformed checkpoint id %q: want a non-negative integer", echo(s))
	}
	return id, nil
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		writeError(w, http.StatusInternalServerError, "encoding the response: "+err.Error())
		return
	}
	w.Header().Set("Content-Type", "application/json; charset=UTF-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	_, _ = w.Write(append(b, '\n'))
}

// errorBody is Flink's error response.
type errorBody struct {
	Errors []string `json:"errors"`
}

func writeError(w http.ResponseWriter, code int, msg string) {
	writeJSON(w, code, errorBody{Errors: []string{msg}})
}

func writeErr(w http.ResponseWriter, err error) {
	var se *statusError
	switch {
	case errors.As(err, &se):
		writeError(w, se.code, se.msg)
	case errors.Is(err, runtime.ErrNotRunning), errors.Is(err, context.DeadlineExceeded):
		writeError(w, http.StatusServiceUnavailable, err.Error())
	default:
		writeError(w, http.StatusInternalServerError, err.Error())
	}
}

func notFound(w http.ResponseWriter, r *http.Request) {
	writeError(w, http.StatusNotFound, "Not found: "+echo(r.URL.Path))
}

// maxEcho bounds how much of a request's path, or of an id in it, an error
// message repeats.
const maxEcho = 64

// echo returns s as an error message repeats it: its first maxEcho
// characters, and an ellipsis if there are more.
func echo(s string) string {
	if utf8.RuneCountInString(s) <= maxEcho {
		return s
	}
	return string([]rune(s)[:maxEcho]) + "…"
}
