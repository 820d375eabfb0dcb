package web

import (
	"context"
	"errors"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/weirstream/weir/internal/procstat"
)

// ClusterInfo is what a job manager knows of its task managers, for
// GET /overview and /taskmanagers.
type ClusterInfo struct {
	TaskManagers   int
	SlotsTotal     int
	SlotsAvailable int
	// Registered lists the registered task managers; nil: not known, and
	// /taskmanagers is not served.
	Registered []TaskManager
}

// TaskManager is a task manager registered with a job manager.
type TaskManager struct {
	ID string
	// DataAddr is where its data plane listens, host:port.
	DataAddr string
	// Jobs holds the id of the job using each of its slots, "" for a free
	// one.
	Jobs []string
	// LastHeartbeat is when the job manager last heard from it.
	LastHeartbeat time.Time
	// Process is its process's figures as its latest heartbeat reported
	// them; nil before its first.
	Process *procstat.Stats
}

// Directory serves the REST API and the web UI of every job a job manager
// runs: GET /overview, /jobs and /jobs/overview cover them all (newest
// first, so the UI opens the newest), /jobs/:jobid/... is answered by that
// job's Server, and /metrics carries every job's samples (each labelled
// with its job_id).
type Directory struct {
	opts    options
	cluster func() ClusterInfo
	reg     *prometheus.Registry
	prom    http.Handler

	mu      sync.Mutex
	servers map[string]*Server
	order   []string // job ids, newest first
}

// NewDirectory returns an empty directory. cluster, if not nil, reports
// the task managers and slots for GET /overview.
func NewDirectory(cluster func() ClusterInfo, opts ...Option) *Directory {
	o := options{logger: defaultOptions().logger, interval: defaultOptions().interval}
	for _, f := range opts {
		f(&o)
	}
	if o.gate == nil {
		o.gate = newGate(o.token, o.logger)
	}
	d := &Directory{opts: o, cluster: cluster, reg: prometheus.NewRegistry(), servers: map[string]*Server{}}
	if o.flinkNames {
		d.reg.MustRegister(processCollector{d})
	}
	d.prom = promhttp.HandlerFor(d.reg, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError})
	return d
}

// Add starts serving job, with the directory's options.
func (d *Directory) Add(job Job) error {
	opts := []Option{func(o *options) {
		*o = d.opts
		o.inDirectory = true
	}}
	s, err := New(job, opts...)
	if err != nil {
		return err
	}
	id := s.jm.JobID()
	d.mu.Lock()
	defer d.mu.Unlock()
	if _, dup := d.servers[id]; dup {
		s.Close()
		return errors.New("web: job " + id + " is already served")
	}
	if err := d.reg.Register(collector{s}); err != nil {
		s.Close()
		return err
	}
	d.servers[id] = s
	d.order = slices.Insert(d.order, 0, id)
	return nil
}

func (d *Directory) all() []*Server {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make([]*Server, len(d.order))
	for i, id := range d.order {
		out[i] = d.servers[id]
	}
	return out
}

func (d *Directory) server(id string) *Server {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.servers[id]
}

// Listen serves the directory on host:port as Server.Listen does.
func (d *Directory) Listen(ctx context.Context, host string, port int) (addr string, stop func(), err error) {
	return listen(ctx, d, d.opts, host, port)
}

// Close stops every job's server.
func (d *Directory) Close() error {
	var errs []error
	for _, s := range d.all() {
		errs = append(errs, s.Close())
	}
	return errors.Join(errs...)
}

// overview counts the cluster's task managers and slots and its jobs.
func (d *Directory) overview() overviewInfo {
	var o overviewInfo
	if d.cluster != nil {
		c := d.cluster()
		o.TaskManagers, o.SlotsTotal, o.SlotsAvailable = c.TaskManagers, c.SlotsTotal, c.SlotsAvailable
	}
	for _, s := range d.all() {
		o.count(s.state())
	}
	return o
}

// ServeHTTP implements http.Handler. /taskmanagers needs the cluster's
// Registered task managers, /jobmanager/config WithConfig.
func (d *Directory) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !d.opts.gate.check(w, r) || d.serveStandby(w, r) || d.opts.flink.serve(w, r) {
		return
	}
	p := r.URL.Path
	seg := strings.Split(strings.Trim(p, "/"), "/")
	if profilerRequest(w, r, seg) || serveJars(w, r, seg) {
		return
	}
	if len(seg) < 2 || seg[0] != "jobs" || seg[1] == "overview" {
		if !readMethod(r) {
			methodNotAllowed(w, r, "GET, HEAD")
			return
		}
	}
	if uiPath(p) {
		uiHandler.ServeHTTP(w, r)
		return
	}
	switch {
	case serveDashboard(w, seg, true):
	case len(seg) == 1 && seg[0] == "overview":
		writeJSON(w, http.StatusOK, d.overview())
	case len(seg) == 2 && seg[0] == "jobmanager" && seg[1] == "config" && d.opts.config != nil:
		writeJSON(w, http.StatusOK, configEntries(d.opts.config))
	case len(seg) == 2 && seg[0] == "jobmanager" && seg[1] == "metrics":
		ids, vals := jobManagerMetrics(d.overview())
		writeJSON(w, http.StatusOK, metricListOf(r.URL.Query(), ids, vals))
	case len(seg) >= 2 && seg[0] == "jobmanager" && serveProcess(w, r, seg[1:], true):
	case seg[0] == "taskmanagers" && d.cluster != nil:
		tms := d.cluster().Registered
		if tms == nil {
			notFound(w, r)
			return
		}
		d.serveTaskManagers(w, r, seg, tms)
	case len(seg) == 1 && seg[0] == "metrics":
		d.prom.ServeHTTP(w, r)
	case len(seg) == 1 && seg[0] == "jobs":
		var out jobIDs
		out.Jobs = []jobIDStatus{}
		for _, s := range d.all() {
			out.Jobs = append(out.Jobs, jobIDStatus{ID: s.jm.JobID(), Status: s.state()})
		}
		writeJSON(w, http.StatusOK, out)
	case len(seg) == 2 && seg[0] == "jobs" && seg[1] == "overview":
		out := jobsOverviewInfo{Jobs: []jobOverview{}}
		for _, s := range d.all() {
			out.Jobs = append(out.Jobs, s.overviewEntry())
		}
		writeJSON(w, http.StatusOK, out)
	case len(seg) >= 2 && seg[0] == "jobs":
		s := d.server(seg[1])
		if s == nil {
			if err := checkJobID(seg[1]); err != nil {
				writeErr(w, err)
				return
			}
			writeErr(w, notFoundf("job %s not found", echo(seg[1])))
			return
		}
		s.route(w, r)
	default:
		notFound(w, r)
	}
}

// remoteTaskManager is Flink's TaskManagerInfo of a task manager of the
// cluster, as far as the job manager knows it: its id, data port and
// slots, its last heartbeat, and the hardware and cores its heartbeats
// report (as a task manager's own /taskmanagers would show them). path is
// its data plane's address. Before its first heartbeat it has 0 cores
// and -1 bytes of memory.
func remoteTaskManager(t TaskManager) taskManagerInfo {
	port := -1
	if _, p, err := net.SplitHostPort(t.DataAddr); err == nil {
		if n, err := strconv.Atoi(p); err == nil {
			port = n
		}
	}
	free := 0
	for _, j := range t.Jobs {
		if j == "" {
			free++
		}
	}
	info := taskManagerInfo{
		ID: t.ID, Path: t.DataAddr, DataPort: port, JMXPort: -1,
		TimeSinceLastHeartbeat: t.LastHeartbeat.UnixMilli(),
		SlotsNumber:            len(t.Jobs), FreeSlots: free,
		TotalResource: resourceProfileInfo{ExtendedResources: map[string]float64{}},
		FreeResource:  resourceProfileInfo{ExtendedResources: map[string]float64{}},
		Hardware:      hardwareInfo{PhysicalMemory: -1, FreeMemory: -1},
	}
	if p := t.Process; p != nil {
		info.Hardware = hardwareOf(*p)
		info.TotalResource.CPUCores = float64(p.MaxProcs)
		if len(t.Jobs) > 0 {
			info.FreeResource.CPUCores = float64(p.MaxProcs) * float64(free) / float64(len(t.Jobs))
		}
	}
	return info
}

// serveTaskManagers answers /taskmanagers and the paths under
// /taskmanagers/:id for the cluster's registered task managers tms:
// their details and metrics from the figures their heartbeats report
// (none before the first). Their logs and thread dumps stay in their
// processes: those paths answer as serveProcess does for another
// process.
func (d *Directory) serveTaskManagers(w http.ResponseWriter, r *http.Request, seg []string, tms []TaskManager) {
	if len(seg) == 1 {
		out := taskManagersInfo{TaskManagers: []taskManagerInfo{}}
		for _, t := range tms {
			out.TaskManagers = append(out.TaskManagers, remoteTaskManager(t))
		}
		writeJSON(w, http.StatusOK, out)
		return
	}
	i := slices.IndexFunc(tms, func(t TaskManager) bool { return t.ID == seg[1] })
	if i < 0 {
		writeError(w, http.StatusNotFound, "task manager "+echo(seg[1])+" is not registered with this job manager")
		return
	}
	t := tms[i]
	switch {
	case len(seg) == 2:
		det := taskManagerDetailsInfo{taskManagerInfo: remoteTaskManager(t), AllocatedSlots: []slotInfo{},
			Metrics: taskManagerMetricsInfo{GarbageCollectors: []garbageCollector{}}}
		if t.Process != nil {
			det.Metrics = taskManagerMetricsOf(*t.Process)
		}
		for _, j := range t.Jobs {
			if j != "" {
				det.AllocatedSlots = append(det.AllocatedSlots, slotInfo{Resource: resourceProfileInfo{ExtendedResources: map[string]float64{}}, JobID: j})
			}
		}
		writeJSON(w, http.StatusOK, det)
	case len(seg) == 3 && seg[2] == "metrics":
		var ids []string
		var vals map[string]string
		if t.Process != nil {
			ids, vals = goMetrics(*t.Process)
		}
		writeJSON(w, http.StatusOK, metricListOf(r.URL.Query(), ids, vals))
	case serveProcess(w, r, seg[2:], false):
	default:
		notFound(w, r)
	}
}

// WithStandby makes a Directory answer, while standby reports that its
// job manager is a standby, with the leader's REST address: a redirect
// there (307, same path and query) with an error naming it in Flink's
// shape, or, while no leader is known, 503 and Flink's message.
func WithStandby(standby func() (leaderREST string, isStandby bool)) Option {
	return func(o *options) { o.standby = standby }
}

// serveStandby answers r if the job manager is a standby.
func (d *Directory) serveStandby(w http.ResponseWriter, r *http.Request) bool {
	if d.opts.standby == nil {
		return false
	}
	leader, standby := d.opts.standby()
	if !standby {
		return false
	}
	if leader == "" {
		writeError(w, http.StatusServiceUnavailable, "Service temporarily unavailable due to an ongoing leader election. Please refresh.")
		return true
	}
	u := *r.URL
	u.Scheme, u.Host = "http", leader
	w.Header().Set("Location", u.String())
	writeError(w, http.StatusTemporaryRedirect, "this job manager is a standby; the leader's REST API is at http://"+leader)
	return true
}
