package main

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/weirstream/weir/config"
	"github.com/weirstream/weir/connector/datagen"
	"github.com/weirstream/weir/internal/clustercli"
	"github.com/weirstream/weir/stream"
	"github.com/weirstream/weir/streamtest"
)

// TestStartREST: the REST API of a job started as weir run starts it,
// configured by rest.bind-address, rest.port and rest.auth-token.
func TestStartREST(t *testing.T) {
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	cfg, err := config.ParseDynamic([]string{"execution.checkpointing.interval=20 ms", "rest.port=0"})
	if err != nil {
		t.Fatal(err)
	}
	env, err := stream.NewEnvironment(stream.WithConfig(cfg), stream.WithLogger(logger))
	if err != nil {
		t.Fatal(err)
	}
	src, err := datagen.New(func(_ int, seq int64) int64 { return seq }, datagen.Partitions(2), datagen.RatePerSecond(1000))
	if err != nil {
		t.Fatal(err)
	}
	stream.SinkTo(stream.FromSource(env, src, "numbers", stream.NoWatermarks[int64]()), streamtest.NewCollector[int64](false), stream.Uid("sink"))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	client, err := env.ExecuteAsync(ctx, "numbers")
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		cancel()
		<-client.Done()
	}()

	get := func(url, token string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, url, nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}

	addr, stop, err := clustercli.StartREST(context.Background(), client, nil, cfg, cfg, logger)
	if err != nil {
		t.Fatal(err)
	}
	if host, _, _ := net.SplitHostPort(addr); host != "127.0.0.1" && host != "::1" {
		t.Errorf("listening on %s: the default bind address is localhost", addr)
	}
	code, body := get("http://"+addr+"/jobs", "")
	var jobs struct {
		Jobs []struct{ ID, Status string }
	}
	if code != http.StatusOK || json.Unmarshal([]byte(body), &jobs) != nil || len(jobs.Jobs) != 1 || jobs.Jobs[0].ID != env.JobID() {
		t.Errorf("GET /jobs: %d %s", code, body)
	}
	if code, body := get("http://"+addr+"/metrics", ""); code != http.StatusOK || !strings.Contains(body, `weir_job_info{job_id="`+env.JobID()+`"`) {
		t.Errorf("GET /metrics: %d %s", code, body)
	}
	stop()
	if _, err := http.Get("http://" + addr + "/jobs"); err == nil {
		t.Error("the REST API still answers after stop")
	}

	// rest.flink-dashboard.dir: a directory without index.html is refused,
	// naming the key; one with it is served under /flink/. And
	// metrics.prometheus.names: flink gives /metrics Flink's names.
	dash := cfg.Clone()
	empty := t.TempDir()
	if err := dash.Set(config.KeyRESTFlinkDashboardDir, empty); err != nil {
		t.Fatal(err)
	}
	if _, _, err := clustercli.StartREST(context.Background(), client, nil, dash, dash, logger); err == nil ||
		!strings.Contains(err.Error(), config.KeyRESTFlinkDashboardDir) || !strings.Contains(err.Error(), "index.html") {
		t.Fatalf("%s without index.html: %v, want an error naming the key", config.KeyRESTFlinkDashboardDir, err)
	}
	if err := os.WriteFile(filepath.Join(empty, "index.html"), []byte("<flink-root></flink-root>"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := dash.Set(config.KeyMetricsPrometheusNames, "flink"); err != nil {
		t.Fatal(err)
	}
	addr, stop, err = clustercli.StartREST(context.Background(), client, nil, dash, dash, logger)
	if err != nil {
		t.Fatal(err)
	}
	if code, body := get("http://"+addr+"/flink/", ""); code != http.StatusOK || !strings.Contains(body, "<flink-root>") {
		t.Errorf("GET /flink/: %d %s", code, body)
	}
	if code, body := get("http://"+addr+"/metrics", ""); code != http.StatusOK || !strings.Contains(body, `flink_jobmanager_job_uptime{job_id="`+env.JobID()+`"`) ||
		strings.Contains(body, "weir_job_info") {
		t.Errorf("GET /metrics with Flink's names: %d %.300s", code, body)
	}
	stop()

	open := cfg.Clone()
	if err := open.Set(config.KeyRESTBindAddress, "0.0.0.0"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := clustercli.StartREST(context.Background(), client, nil, open, open, logger); err == nil ||
		!strings.Contains(err.Error(), "rest.bind-address") || !strings.Contains(err.Error(), "rest.auth-token") {
		t.Fatalf("binding 0.0.0.0 without a token: %v, want an error naming rest.bind-address and rest.auth-token", err)
	}
	if err := open.Set(config.KeyRESTAuthToken, "s3cret"); err != nil {
		t.Fatal(err)
	}
	addr, stop, err = clustercli.StartREST(context.Background(), client, cancel, open, open, logger)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	_, port, _ := net.SplitHostPort(addr)
	if code, _ := get("http://127.0.0.1:"+port+"/overview", ""); code != http.StatusUnauthorized {
		t.Errorf("without the token: %d", code)
	}
	if code, _ := get("http://127.0.0.1:"+port+"/overview", "s3cret"); code != http.StatusOK {
		t.Errorf("with the token: %d", code)
	}
	// The API cancels the job, as Flink's clients ask it to.
	req, _ := http.NewRequest(http.MethodPatch, "http://127.0.0.1:"+port+"/jobs/"+env.JobID()+"?mode=cancel", nil)
	req.Header.Set("Authorization", "Bearer s3cret")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("PATCH ?mode=cancel: %d, want 202", resp.StatusCode)
	}
	select {
	case <-client.Done():
	case <-time.After(30 * time.Second):
		t.Fatal("the job did not stop after a cancel through the REST API")
	}
}
