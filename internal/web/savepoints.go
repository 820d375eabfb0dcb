package web

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"

	"github.com/weirstream/weir/internal/checkpoint"
)

// Savepoints as Flink's REST API triggers them:
//
//	POST /jobs/:jobid/savepoints  {"target-directory", "cancel-job", "formatType", "triggerId"}
//	     → 202 {"request-id"}
//	POST /jobs/:jobid/stop  {"targetDirectory", "drain", "formatType", "triggerId"}
//	     → 202 {"request-id"}: stop with a savepoint
//	GET  /jobs/:jobid/savepoints/:triggerid
//	     → {"status": {"id": "IN_PROGRESS" | "COMPLETED"}, "operation": {"location"} or {"failure-cause"}}
//
// A savepoint runs on after the request that triggered it; its result is
// kept for as long as the server lives.

// savepointRequest is the body of POST /jobs/:jobid/savepoints.
type savepointRequest struct {
	TargetDirectory string `json:"target-directory"`
	CancelJob       bool   `json:"cancel-job"`
	FormatType      string `json:"formatType"`
	TriggerID       string `json:"triggerId"`
}

// stopRequest is the body of POST /jobs/:jobid/stop.
type stopRequest struct {
	TargetDirectory string `json:"targetDirectory"`
	Drain           bool   `json:"drain"`
	FormatType      string `json:"formatType"`
	TriggerID       string `json:"triggerId"`
}

// savepointOp is one triggered savepoint, or with checkpoint set one
// triggered checkpoint.
type savepointOp struct {
	done       chan struct{}
	checkpoint bool
	location   string
	id         int64 // the checkpoint's
	err        error
}

// savepoints are a server's triggered savepoints by trigger id.
type savepoints struct {
	mu  sync.Mutex
	ops map[string]*savepointOp
}

// add registers a new operation under triggerID (a new id if ""); an id
// already registered is returned with a nil op.
func (sp *savepoints) add(triggerID string, checkpoint bool) (string, *savepointOp, error) {
	id := triggerID
	if id == "" {
		var b [16]byte
		if _, err := rand.Read(b[:]); err != nil {
			return "", nil, err
		}
		id = hex.EncodeToString(b[:])
	} else if len(id) != 32 || strings.Trim(strings.ToLower(id), "0123456789abcdef") != "" {
		return "", nil, badRequest("triggerId %q: want 32 hexadecimal digits", echo(id))
	}
	sp.mu.Lock()
	defer sp.mu.Unlock()
	if sp.ops == nil {
		sp.ops = map[string]*savepointOp{}
	}
	if prev, dup := sp.ops[id]; dup {
		if prev.checkpoint != checkpoint {
			return "", nil, badRequest("triggerId %s already names another kind of operation", id)
		}
		return id, nil, nil
	}
	op := &savepointOp{done: make(chan struct{}), checkpoint: checkpoint}
	sp.ops[id] = op
	return id, op, nil
}

// decodeBody decodes r's JSON body, if it has one, into v, refusing
// fields v does not have; fields names those it has.
func decodeBody(r *http.Request, v any, fields string) error {
	body, err := io.ReadAll(io.LimitReader(r.Body, 64<<10))
	if err != nil {
		return badRequest("reading the request body: %v", err)
	}
	if len(strings.TrimSpace(string(body))) == 0 {
		return nil
	}
	dec := json.NewDecoder(strings.NewReader(string(body)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return badRequest("request body: %v (fields: %s)", err, fields)
	}
	return nil
}

// runOp runs the operation op on a goroutine of the server's, with a
// context that ends when the server is closed, and marks it done.
func (s *Server) runOp(op *savepointOp, run func(ctx context.Context)) {
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		defer close(op.done)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		go func() {
			select {
			case <-s.stop:
				cancel()
			case <-ctx.Done():
			}
		}()
		run(ctx)
	}()
}

func (sp *savepoints) get(id string) *savepointOp {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	return sp.ops[id]
}

// triggerSavepoint is POST /jobs/:jobid/savepoints, and with stop POST
// /jobs/:jobid/stop.
func (s *Server) triggerSavepoint(r *http.Request, stop bool) (int, any, error) {
	what := "savepoint"
	if stop {
		what = "stop"
	}
	if why := s.opts.gate.mutationRefused(r); why != "" {
		s.opts.logger.Warn("refused to trigger a savepoint", "job_id", s.jm.JobID(), "remote", r.RemoteAddr, "reason", why, "stop", stop)
		return 0, nil, &statusError{http.StatusForbidden, what + " refused: " + why}
	}
	take, fields := s.job.Savepoint, "target-directory, cancel-job, formatType, triggerId"
	if stop {
		fields = "targetDirectory, drain, formatType, triggerId"
	}
	if stop && s.job.Stop == nil || !stop && take == nil {
		if stop {
			return 0, nil, &statusError{http.StatusNotImplemented, "this server cannot stop job " + s.jm.JobID() + " with a savepoint"}
		}
		return 0, nil, &statusError{http.StatusNotImplemented, "this server cannot take savepoints of job " + s.jm.JobID()}
	}
	var req savepointRequest
	var sreq stopRequest
	var into any = &req
	if stop {
		into = &sreq
	}
	if err := decodeBody(r, into, fields); err != nil {
		return 0, nil, err
	}
	if stop {
		req = savepointRequest{TargetDirectory: sreq.TargetDirectory, FormatType: sreq.FormatType, TriggerID: sreq.TriggerID}
		take = func(ctx context.Context, dir string, format checkpoint.SavepointFormat) (string, error) {
			return s.job.Stop(ctx, dir, sreq.Drain, format)
		}
	}
	format, err := checkpoint.ParseSavepointFormat(req.FormatType)
	if err != nil {
		return 0, nil, badRequest("unknown formatType %q: want CANONICAL or NATIVE", echo(req.FormatType))
	}
	if req.CancelJob && s.job.Cancel == nil {
		return 0, nil, &statusError{http.StatusNotImplemented, "this server cannot cancel job " + s.jm.JobID()}
	}
	if s.ended() {
		return 0, nil, &statusError{http.StatusConflict, "job " + s.jm.JobID() + " is not running (" + s.state() + ")"}
	}
	id, op, err := s.sps.add(req.TriggerID, false)
	if err != nil || op == nil {
		return http.StatusAccepted, map[string]string{"request-id": id}, err
	}
	s.opts.logger.Info("taking a savepoint, as a REST request asks", "job_id", s.jm.JobID(), "remote", r.RemoteAddr,
		"dir", req.TargetDirectory, "cancel_job", req.CancelJob, "stop", stop, "drain", sreq.Drain, "trigger_id", id)
	s.runOp(op, func(ctx context.Context) {
		op.location, op.err = take(ctx, req.TargetDirectory, format)
		if op.err == nil && req.CancelJob {
			s.opts.logger.Info("canceling the job after its savepoint, as the REST request asked", "job_id", s.jm.JobID(), "savepoint", op.location)
			s.job.Cancel()
		}
	})
	return http.StatusAccepted, map[string]string{"request-id": id}, nil
}

// savepointStatus is GET /jobs/:jobid/savepoints/:triggerid.
func (s *Server) savepointStatus(id string) (int, any, error) {
	op := s.sps.get(id)
	if op == nil || op.checkpoint {
		return 0, nil, notFoundf("there is no savepoint operation %s for job %s", echo(id), s.jm.JobID())
	}
	return s.operationStatus(op)
}

// checkpointStatus is GET /jobs/:jobid/checkpoints/:triggerid.
func (s *Server) checkpointStatus(id string) (int, any, error) {
	op := s.sps.get(id)
	if op == nil || !op.checkpoint {
		return 0, nil, notFoundf("there is no checkpoint operation %s for job %s", echo(id), s.jm.JobID())
	}
	return s.operationStatus(op)
}

// checkpointRequest is the body of POST /jobs/:jobid/checkpoints.
type checkpointRequest struct {
	CheckpointType string `json:"checkpointType"`
	TriggerID      string `json:"triggerId"`
}

// triggerCheckpoint is POST /jobs/:jobid/checkpoints: a checkpoint now,
// whatever the interval, as Flink's manual checkpoints.
func (s *Server) triggerCheckpoint(r *http.Request) (int, any, error) {
	if why := s.opts.gate.mutationRefused(r); why != "" {
		s.opts.logger.Warn("refused to trigger a checkpoint", "job_id", s.jm.JobID(), "remote", r.RemoteAddr, "reason", why)
		return 0, nil, &statusError{http.StatusForbidden, "checkpoint refused: " + why}
	}
	if s.job.Checkpoint == nil {
		return 0, nil, &statusError{http.StatusNotImplemented, "this server cannot trigger checkpoints of job " + s.jm.JobID()}
	}
	var req checkpointRequest
	if err := decodeBody(r, &req, "checkpointType, triggerId"); err != nil {
		return 0, nil, err
	}
	switch strings.ToUpper(req.CheckpointType) {
	case "", "CONFIGURED", "FULL":
	case "INCREMENTAL":
		return 0, nil, badRequest("checkpointType INCREMENTAL: weir's heap state backend takes full checkpoints; ask for FULL or CONFIGURED")
	default:
		return 0, nil, badRequest("unknown checkpointType %q: want CONFIGURED, FULL or INCREMENTAL", echo(req.CheckpointType))
	}
	if s.ended() {
		return 0, nil, &statusError{http.StatusConflict, "job " + s.jm.JobID() + " is not running (" + s.state() + ")"}
	}
	id, op, err := s.sps.add(req.TriggerID, true)
	if err != nil || op == nil {
		return http.StatusAccepted, map[string]string{"request-id": id}, err
	}
	s.opts.logger.Info("taking a checkpoint, as a REST request asks", "job_id", s.jm.JobID(), "remote", r.RemoteAddr, "trigger_id", id)
	s.runOp(op, func(ctx context.Context) { op.id, op.err = s.job.Checkpoint(ctx) })
	return http.StatusAccepted, map[string]string{"request-id": id}, nil
}

// operationStatus reports a triggered savepoint or checkpoint as Flink's
// asynchronous operations do.
func (s *Server) operationStatus(op *savepointOp) (int, any, error) {
	type status struct {
		ID string `json:"id"`
	}
	select {
	case <-op.done:
	default:
		return http.StatusOK, map[string]any{"status": status{"IN_PROGRESS"}}, nil
	}
	if op.err != nil {
		msg := op.err.Error()
		if errors.Is(op.err, context.Canceled) {
			msg = "the REST server stopped before the savepoint completed: " + msg
		}
		return http.StatusOK, map[string]any{"status": status{"COMPLETED"}, "operation": map[string]any{
			"failure-cause": map[string]string{
				"class":                "java.util.concurrent.CompletionException",
				"stack-trace":          "java.util.concurrent.CompletionException: " + msg,
				"serialized-throwable": "",
			},
		}}, nil
	}
	if op.checkpoint {
		return http.StatusOK, map[string]any{"status": status{"COMPLETED"}, "operation": map[string]int64{"checkpointId": op.id}}, nil
	}
	return http.StatusOK, map[string]any{"status": status{"COMPLETED"}, "operation": map[string]string{"location": op.location}}, nil
}
