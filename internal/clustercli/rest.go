package clustercli

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/weirstream/weir/config"
	"github.com/weirstream/weir/internal/launch"
	"github.com/weirstream/weir/internal/web"
	"github.com/weirstream/weir/stream"
)

// StartREST serves the REST API and /metrics of the job client runs
// (configured by jobCfg), as restCfg says: rest.bind-address (default
// localhost), rest.port (default 8081; 0 picks a free port),
// rest.auth-token (required to bind anything but a loopback address) and
// rest.flink-dashboard.dir (Flink's dashboard, served under /flink/) and
// metrics.prometheus.names.
// cancel, if not nil, cancels the job (the context it runs with): the
// API's PATCH /jobs/:jobid?mode=cancel calls it. It returns the address it
// listens on and a function that stops it; it also stops when ctx is
// done. The API keeps answering after the job ends, until stopped.
func StartREST(ctx context.Context, client *stream.JobClient, cancel func(), jobCfg, restCfg *config.Configuration, logger *slog.Logger) (addr string, stop func(), err error) {
	cl, err := restCfg.Cluster()
	if err != nil {
		return "", nil, err
	}
	if err := web.CheckBind(cl.RESTBindAddress, cl.RESTAuthToken); err != nil {
		return "", nil, err
	}
	h, ok := launch.HandleOf(client)
	if !ok {
		return "", nil, fmt.Errorf("serving the REST API of a job client that was not started")
	}
	opts, err := restOptions(restCfg, cl, logger)
	if err != nil {
		return "", nil, err
	}
	job := webJob(h, jobCfg)
	job.Cancel = cancel
	srv, err := web.New(job, opts...)
	if err != nil {
		return "", nil, err
	}
	addr, stopListening, err := srv.Listen(ctx, cl.RESTBindAddress, cl.RESTPort)
	if err != nil {
		srv.Close()
		return "", nil, err
	}
	logger.Info("REST API listening", "addr", addr, "auth", cl.RESTAuthToken != "")
	return addr, func() {
		stopListening()
		srv.Close()
	}, nil
}

// StartDirectory serves the REST API and web UI of every job of a job
// manager, as restCfg says (see StartREST); add registers a job, which
// its cancel (if not nil) cancels.
func StartDirectory(ctx context.Context, restCfg *config.Configuration, logger *slog.Logger, info func() web.ClusterInfo, extra ...web.Option) (addr string, add func(h *launch.Handle, jobCfg *config.Configuration, cancel func()) error, stop func(), err error) {
	cl, err := restCfg.Cluster()
	if err != nil {
		return "", nil, nil, err
	}
	if err := web.CheckBind(cl.RESTBindAddress, cl.RESTAuthToken); err != nil {
		return "", nil, nil, err
	}
	opts, err := restOptions(restCfg, cl, logger)
	if err != nil {
		return "", nil, nil, err
	}
	dir := web.NewDirectory(info, append(append(opts, web.WithConfig(restCfg)), extra...)...)
	addr, stopListening, err := dir.Listen(ctx, cl.RESTBindAddress, cl.RESTPort)
	if err != nil {
		return "", nil, nil, err
	}
	logger.Info("REST API listening", "addr", addr, "auth", cl.RESTAuthToken != "")
	add = func(h *launch.Handle, jobCfg *config.Configuration, cancel func()) error {
		job := webJob(h, jobCfg)
		job.Cancel = cancel
		return dir.Add(job)
	}
	return addr, add, func() {
		stopListening()
		dir.Close()
	}, nil
}

// restOptions are the REST server's options from restCfg: its token, its
// logger, the names of its Prometheus metrics (metrics.prometheus.names)
// and Flink's dashboard (rest.flink-dashboard.dir).
func restOptions(restCfg *config.Configuration, cl config.Cluster, logger *slog.Logger) ([]web.Option, error) {
	opts := []web.Option{web.WithAuthToken(cl.RESTAuthToken), web.WithLogger(logger)}
	if restCfg.String(config.KeyMetricsPrometheusNames) == "flink" {
		opts = append(opts, web.WithFlinkMetricNames())
	}
	if dir := restCfg.String(config.KeyRESTFlinkDashboardDir); dir != "" {
		o, err := web.WithFlinkDashboard(dir)
		if err != nil {
			return nil, err
		}
		opts = append(opts, o)
		logger.Info("serving Flink's web dashboard", "path", web.FlinkDashboardPath, "dir", dir)
	}
	return opts, nil
}

// webJob is what the REST API serves of the job h, configured by jobCfg.
func webJob(h *launch.Handle, jobCfg *config.Configuration) web.Job {
	jm := h.Master()
	return web.Job{Master: jm, Done: h.Done(), Err: h.Wait, Config: jobCfg, Positions: jm.SourcePositions, Savepoint: jm.TriggerSavepoint, Stop: jm.StopWithSavepoint,
		Checkpoint: jm.TriggerCheckpoint}
}
