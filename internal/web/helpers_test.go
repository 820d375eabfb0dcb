package web_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weirstream/weir/config"
	"github.com/weirstream/weir/connector"
	"github.com/weirstream/weir/connector/datagen"
	"github.com/weirstream/weir/internal/launch"
	"github.com/weirstream/weir/internal/web"
	"github.com/weirstream/weir/state"
	"github.com/weirstream/weir/stream"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// counter keeps a running sum per key: keyed state for the checkpoints.
type counter struct{ n state.ValueState[int64] }

func (c *counter) Open(rc *stream.RuntimeContext[int64]) error {
	var err error
	c.n, err = stream.ValueState[int64](rc, "n")
	return err
}

func (c *counter) ProcessElement(ctx *stream.Context[int64, int64], v int64) error {
	n, _ := c.n.Value()
	c.n.Update(n + v)
	return ctx.Emit(n + v)
}

// faults slows, blocks and fails the "count" subtasks on the test's
// command.
type faults struct {
	slow  atomic.Bool
	fail  atomic.Bool
	mu    sync.Mutex
	block chan struct{} // while set, count[0] waits for it to close
}

func (f *faults) fn(_ context.Context, site stream.FaultSite) error {
	task := site.Task
	if site.Point != stream.FaultBatch || task.Vertex != "count" {
		return nil
	}
	if f.slow.Load() {
		// A slow operator: its producers wait for room in its channels.
		time.Sleep(3 * time.Millisecond)
	}
	if task.Subtask != 0 {
		return nil
	}
	f.mu.Lock()
	b := f.block
	f.mu.Unlock()
	if b != nil {
		<-b
	}
	if f.fail.CompareAndSwap(true, false) {
		return errors.New("injected failure")
	}
	return nil
}

func (f *faults) blockNow() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.block = make(chan struct{})
}

func (f *faults) release() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.block != nil {
		close(f.block)
		f.block = nil
	}
}

// fixture is a running job with its REST API.
type fixture struct {
	t      *testing.T
	base   string
	token  string
	env    *stream.Environment
	client *stream.JobClient
	srv    *web.Server
	cancel context.CancelFunc
	faults *faults
}

// startJob runs numbers (a datagen source, 4 splits) → keyBy → count (a
// running sum, with the sink chained) at parallelism 2, with the options
// kv, and serves its REST API on a free loopback port.
func startJob(t *testing.T, kv []string, opts ...stream.Option) *fixture {
	t.Helper()
	cfg, err := config.ParseDynamic(append([]string{"parallelism.default=2"}, kv...))
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{t: t, faults: &faults{}}
	env, err := stream.NewEnvironment(append([]stream.Option{stream.WithConfig(cfg), stream.WithLogger(quiet), stream.WithFaults(f.faults.fn)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	src, err := datagen.New(func(p int, seq int64) int64 { return int64(p)*1_000_000 + seq },
		datagen.Partitions(4), datagen.BatchSize(64),
		datagen.Timestamps(func(_ int, seq int64) int64 { return 1_700_000_000_000 + seq }))
	if err != nil {
		t.Fatal(err)
	}
	nums := stream.FromSource(env, src, "numbers", stream.BoundedOutOfOrderness[int64](0))
	sums := stream.Process(stream.KeyBy(nums, func(v int64) int64 { return v % 64 }), stream.KeyedProcessFunction[int64, int64, int64](&counter{}), stream.Uid("count"))
	stream.SinkTo(sums, connector.Discard[int64](), stream.Uid("sink"))
	ctx, cancel := context.WithCancel(context.Background())
	client, err := env.ExecuteAsync(ctx, "numbers")
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	f.env, f.client, f.cancel = env, client, cancel
	t.Cleanup(func() {
		f.faults.release()
		cancel()
		<-client.Done()
	})
	f.serve(web.Job{Master: launch.MasterOf(client), Done: client.Done(), Err: client.Wait, Config: env.Config()})
	return f
}

// serve starts a server for job on a free loopback port.
func (f *fixture) serve(job web.Job, opts ...web.Option) {
	t := f.t
	srv, err := web.New(job, append([]web.Option{web.WithSampleInterval(10 * time.Millisecond), web.WithLogger(quiet)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	addr, stop, err := srv.Listen(context.Background(), "127.0.0.1", 0)
	if err != nil {
		srv.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		stop()
		srv.Close()
	})
	f.srv, f.base = srv, "http://"+addr
}

func (f *fixture) jobID() string { return launch.MasterOf(f.client).JobID() }

// get fetches path and returns the status and body.
func (f *fixture) get(path string) (int, []byte) {
	f.t.Helper()
	req, err := http.NewRequest(http.MethodGet, f.base+path, nil)
	if err != nil {
		f.t.Fatal(err)
	}
	if f.token != "" {
		req.Header.Set("Authorization", "Bearer "+f.token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		f.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		f.t.Fatal(err)
	}
	return resp.StatusCode, b
}

// obj fetches path, which must answer 200 with a JSON object.
func (f *fixture) obj(path string) map[string]any {
	f.t.Helper()
	var m map[string]any
	f.decode(path, &m)
	return m
}

func (f *fixture) decode(path string, v any) {
	f.t.Helper()
	code, b := f.get(path)
	if code != http.StatusOK {
		f.t.Fatalf("GET %s: %d %s", path, code, b)
	}
	if err := json.Unmarshal(b, v); err != nil {
		f.t.Fatalf("GET %s: %v in %s", path, err, b)
	}
}

// waitFor polls cond until it holds, failing the test after 30 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// fields checks that obj has each field of spec ("name:type", type one of
// number, string, bool, object, array, null, or several joined with |).
func fields(t *testing.T, where string, obj any, spec ...string) {
	t.Helper()
	m, ok := obj.(map[string]any)
	if !ok {
		t.Fatalf("%s: %T is not an object", where, obj)
	}
	for _, s := range spec {
		name, types, _ := strings.Cut(s, ":")
		v, ok := m[name]
		if !ok {
			t.Errorf("%s: no field %q (have %v)", where, name, keys(m))
			continue
		}
		if got := jsonType(v); !strings.Contains("|"+types+"|", "|"+got+"|") {
			t.Errorf("%s: field %q is %s (%v), want %s", where, name, got, v, types)
		}
	}
}

func keys(m map[string]any) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	return ks
}

func jsonType(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case float64:
		return "number"
	case string:
		return "string"
	case bool:
		return "bool"
	case []any:
		return "array"
	case map[string]any:
		return "object"
	}
	return fmt.Sprintf("%T", v)
}

func num(v any) float64 {
	f, _ := v.(float64)
	return f
}

func at(v any, path ...string) any {
	for _, p := range path {
		switch x := v.(type) {
		case map[string]any:
			v = x[p]
		case []any:
			i, err := strconv.Atoi(p)
			if err != nil || i >= len(x) {
				return nil
			}
			v = x[i]
		default:
			return nil
		}
	}
	return v
}

// promSample is one sample of the text exposition format.
type promSample struct {
	name   string
	labels map[string]string
	value  float64
}

var (
	metricName = regexp.MustCompile(`^[a-zA-Z_:][a-zA-Z0-9_:]*$`)
	labelName  = regexp.MustCompile(`^[a-zA-Z_][a-zA-Z0-9_]*$`)
)

// parseProm parses the Prometheus text format strictly: HELP and TYPE
// once per family and before its samples, families contiguous, valid
// names, escaped label values, parseable values, no duplicate series,
// counters named _total and not negative.
func parseProm(t *testing.T, text string) (map[string]string, []promSample) {
	t.Helper()
	types := map[string]string{}
	helps := map[string]bool{}
	done := map[string]bool{}
	seen := map[string]bool{}
	var samples []promSample
	current := ""
	family := func(name string) string {
		for _, suf := range []string{"_sum", "_count", "_bucket"} {
			if base, ok := strings.CutSuffix(name, suf); ok {
				if ty := types[base]; ty == "summary" || ty == "histogram" {
					return base
				}
			}
		}
		return name
	}
	enter := func(name string, line int) {
		if name == current {
			return
		}
		if done[name] {
			t.Fatalf("line %d: family %s appears again after others", line, name)
		}
		if current != "" {
			done[current] = true
		}
		current = name
	}
	for n, line := range strings.Split(strings.TrimSuffix(text, "\n"), "\n") {
		n++
		switch {
		case strings.HasPrefix(line, "# HELP "):
			name, _, _ := strings.Cut(strings.TrimPrefix(line, "# HELP "), " ")
			if !metricName.MatchString(name) || helps[name] {
				t.Fatalf("line %d: bad or repeated HELP: %q", n, line)
			}
			helps[name] = true
			enter(name, n)
		case strings.HasPrefix(line, "# TYPE "):
			name, ty, _ := strings.Cut(strings.TrimPrefix(line, "# TYPE "), " ")
			if !metricName.MatchString(name) || types[name] != "" {
				t.Fatalf("line %d: bad or repeated TYPE: %q", n, line)
			}
			switch ty {
			case "counter", "gauge", "summary", "histogram", "untyped":
			default:
				t.Fatalf("line %d: unknown type %q", n, ty)
			}
			if ty == "counter" && !strings.HasSuffix(name, "_total") {
				t.Errorf("line %d: counter %s is not named _total", n, name)
			}
			types[name] = ty
			enter(name, n)
		case strings.HasPrefix(line, "#"):
		default:
			s := parseSample(t, n, line)
			fam := family(s.name)
			if types[fam] == "" {
				t.Fatalf("line %d: sample of %s before its TYPE", n, fam)
			}
			enter(fam, n)
			key := s.name + fmt.Sprint(s.labels)
			if seen[key] {
				t.Fatalf("line %d: duplicate series %s", n, key)
			}
			seen[key] = true
			if types[fam] == "counter" && s.value < 0 {
				t.Errorf("line %d: negative counter", n)
			}
			samples = append(samples, s)
		}
	}
	return types, samples
}

func parseSample(t *testing.T, n int, line string) promSample {
	t.Helper()
	s := promSample{labels: map[string]string{}}
	i := strings.IndexAny(line, "{ ")
	if i < 0 {
		t.Fatalf("line %d: no value: %q", n, line)
	}
	s.name = line[:i]
	if !metricName.MatchString(s.name) {
		t.Fatalf("line %d: bad name %q", n, s.name)
	}
	rest := line[i:]
	if rest[0] == '{' {
		rest = rest[1:]
		for {
			if strings.HasPrefix(rest, "}") {
				rest = rest[1:]
				break
			}
			eq := strings.Index(rest, `="`)
			if eq < 0 {
				t.Fatalf("line %d: bad labels: %q", n, line)
			}
			name := rest[:eq]
			if !labelName.MatchString(name) {
				t.Fatalf("line %d: bad label name %q", n, name)
			}
			rest = rest[eq+2:]
			var val strings.Builder
			for {
				if rest == "" {
					t.Fatalf("line %d: unterminated label value", n)
				}
				c := rest[0]
				rest = rest[1:]
				if c == '"' {
					break
				}
				if c == '\\' {
					switch rest[0] {
					case '\\', '"':
						val.WriteByte(rest[0])
					case 'n':
						val.WriteByte('\n')
					default:
						t.Fatalf("line %d: bad escape", n)
					}
					rest = rest[1:]
					continue
				}
				val.WriteByte(c)
			}
			if _, dup := s.labels[name]; dup {
				t.Fatalf("line %d: label %s twice", n, name)
			}
			s.labels[name] = val.String()
			rest = strings.TrimPrefix(rest, ",")
		}
	}
	if !strings.HasPrefix(rest, " ") {
		t.Fatalf("line %d: no space before the value: %q", n, line)
	}
	fieldsOf := strings.Fields(rest)
	if len(fieldsOf) < 1 || len(fieldsOf) > 2 {
		t.Fatalf("line %d: want a value and an optional timestamp: %q", n, line)
	}
	switch fieldsOf[0] {
	case "+Inf":
		s.value = math.Inf(1)
	case "-Inf":
		s.value = math.Inf(-1)
	case "NaN":
		s.value = math.NaN()
	default:
		v, err := strconv.ParseFloat(fieldsOf[0], 64)
		if err != nil {
			t.Fatalf("line %d: bad value: %v", n, err)
		}
		s.value = v
	}
	return s
}

// find returns the samples of name whose labels include want.
func find(samples []promSample, name string, want map[string]string) []promSample {
	var out []promSample
next:
	for _, s := range samples {
		if s.name != name {
			continue
		}
		for k, v := range want {
			if s.labels[k] != v {
				continue next
			}
		}
		out = append(out, s)
	}
	return out
}
