package weir

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/pflag"

	"github.com/weirstream/weir/stream"
)

// TestCheckpointDirHasOneSource: the checkpoint directory comes from
// --checkpoint-dir, from execution.checkpointing.dir (or its deprecated
// key) in --config or -D, or from the job's defaults, and two different
// ones given are an error.
func TestCheckpointDirHasOneSource(t *testing.T) {
	defaults := []string{"execution.checkpointing.dir=./default"}
	for _, tc := range []struct {
		name    string
		flag    string // --checkpoint-dir, "" if not given
		dynamic []string
		want    string
		wantErr string
	}{
		{name: "default", want: "./default"},
		{name: "flag", flag: "B", want: "B"},
		{name: "-D", dynamic: []string{"execution.checkpointing.dir=A"}, want: "A"},
		{name: "deprecated -D", dynamic: []string{"state.checkpoints.dir=A"}, want: "A"},
		{name: "both, equal", flag: "A", dynamic: []string{"execution.checkpointing.dir=./A"}, want: "./A"},
		{name: "both, different", flag: "B", dynamic: []string{"execution.checkpointing.dir=A"},
			wantErr: "--checkpoint-dir B and execution.checkpointing.dir=A (from --config or -D) disagree"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := runFlags{checkpointDir: tc.flag}
			f.config.Dynamic = tc.dynamic
			f.config.Getenv = func(string) string { return "" }
			cfg, err := f.jobConfig(defaults, tc.flag != "")
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := cfg.String("execution.checkpointing.dir"); got != tc.want {
				t.Fatalf("the job checkpoints to %q, want %q", got, tc.want)
			}
		})
	}
}

// testJob is a job with flags of its own, one of which the resume line
// leaves out.
func testJob() Job {
	return Job{
		Name: "test",
		Flags: func(fs *pflag.FlagSet) {
			fs.String("input", "", "")
			fs.String("output", "", "")
			fs.Bool("bounded", false, "")
		},
		NotResumed: []string{"output"},
		Build:      func(*stream.Environment, []string) error { return nil },
	}
}

// TestResumeLine: the printed resume line carries the flags the run was
// given, run's and the job's, except --from, --allow-non-restored-state and the claim mode (a
// savepoint it names cannot be claimed), --fail-after, sensitive
// options and those the job names in NotResumed.
func TestResumeLine(t *testing.T) {
	job := testJob()
	cmd, _, err := Command("prog", job).Find([]string{"run", "test"})
	if err != nil {
		t.Fatal(err)
	}
	args := []string{"--input", "my trace", "--output", "o", "--fail-after", "10", "-D", "rest.port=9000",
		"-D", "execution.state-recovery.path=x", "--from", "old", "--claim-mode", "claim", "-D", "execution.state-recovery.claim-mode=CLAIM", "-n",
		"--bounded", "-D", "s3.secret-key=hush", "-D", "s3.access-key=me"}
	if err := cmd.ParseFlags(args); err != nil {
		t.Fatal(err)
	}
	got := shellJoin(resumeCommand("prog", cmd, append(notResumed, job.NotResumed...)))
	want := `prog run test --bounded=true --define rest.port=9000 --input 'my trace'`
	if got != want {
		t.Fatalf("resume line\n got %s\nwant %s", got, want)
	}
}

// TestClaimModeFlag: --claim-mode sets execution.state-recovery.claim-mode,
// in either spelling; a mode weir does not implement is refused, naming
// the flag, the key and the modes there are.
func TestClaimModeFlag(t *testing.T) {
	for _, tc := range []struct {
		flag, want, wantErr string
	}{
		{flag: "", want: "NO_CLAIM"},
		{flag: "claim", want: "CLAIM"},
		{flag: "no-claim", want: "NO_CLAIM"},
		{flag: "NO_CLAIM", want: "NO_CLAIM"},
		{flag: "legacy", wantErr: "NO_CLAIM, CLAIM"},
	} {
		t.Run(tc.flag, func(t *testing.T) {
			f := runFlags{from: "somewhere", claimMode: tc.flag}
			f.config.Getenv = func(string) string { return "" }
			cfg, err := f.jobConfig([]string{"execution.checkpointing.dir=./chk"}, false)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), "--claim-mode") || !strings.Contains(err.Error(), "execution.state-recovery.claim-mode") ||
					!strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want a refusal naming --claim-mode, the key and %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := cfg.String("execution.state-recovery.claim-mode"); got != tc.want {
				t.Fatalf("claim mode %q, want %q", got, tc.want)
			}
		})
	}
}

// TestFlinkRestoreFlags: Flink's -s (the savepoint or checkpoint to
// resume from) and -n (allow non-restored state) set
// execution.state-recovery.path and
// execution.state-recovery.ignore-unclaimed-state.
func TestFlinkRestoreFlags(t *testing.T) {
	cmd, _, err := Command("prog", testJob()).Find([]string{"run", "test"})
	if err != nil {
		t.Fatal(err)
	}
	f := &runFlags{}
	fs := pflag.NewFlagSet("run", pflag.ContinueOnError)
	f.add(fs)
	if err := fs.Parse([]string{"-s", "/ckpt/j/chk-3", "-n"}); err != nil {
		t.Fatal(err)
	}
	f.config.Getenv = func(string) string { return "" }
	cfg, err := f.jobConfig([]string{"execution.checkpointing.dir=./chk"}, false)
	if err != nil {
		t.Fatal(err)
	}
	if got := cfg.String("execution.state-recovery.path"); got != "/ckpt/j/chk-3" {
		t.Fatalf("state-recovery.path %q", got)
	}
	if !cfg.Bool("execution.state-recovery.ignore-unclaimed-state") {
		t.Fatal("-n did not set execution.state-recovery.ignore-unclaimed-state")
	}
	if cmd.InheritedFlags().ShorthandLookup("n") == nil || cmd.InheritedFlags().ShorthandLookup("s") == nil {
		t.Fatal("run JOB has no -n or -s")
	}
}

func TestJobCheckpointDir(t *testing.T) {
	for _, tc := range []struct{ dir, want string }{
		{"/data/ckpt", "/data/ckpt/j1"},
		{"s3://bucket/ckpt", "s3://bucket/ckpt/j1"},
		{"s3://bucket/ckpt/?region=eu-west-1", "s3://bucket/ckpt/j1?region=eu-west-1"},
		{"s3://bucket", "s3://bucket/j1"},
		{"file:///data/ckpt", "file:///data/ckpt/j1"},
	} {
		if got := jobCheckpointDir(tc.dir, "j1"); got != tc.want {
			t.Errorf("jobCheckpointDir(%q) = %q, want %q", tc.dir, got, tc.want)
		}
	}
}

// TestFlagArgs: the job's flags reach Build as --name=value, as given,
// and parse back to the same values.
func TestFlagArgs(t *testing.T) {
	fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
	testJob().Flags(fs)
	if err := fs.Parse([]string{"--input", "a b", "--bounded"}); err != nil {
		t.Fatal(err)
	}
	got := strings.Join(flagArgs(fs), " ")
	if want := "--bounded=true --input=a b"; got != want {
		t.Fatalf("flagArgs = %q, want %q", got, want)
	}
}

// TestProgramName: the resume line names go run when go run built the
// binary, with the main package's directory in its module.
func TestProgramName(t *testing.T) {
	const mod = "github.com/weirstream/weir"
	for _, tc := range []struct{ arg0, pkg, want string }{
		{"/tmp/go-build123/b001/exe/weir", mod + "/cmd/weir", "go run ./cmd/weir"},
		{"/tmp/go-build123/b001/exe/wc", mod, "go run ."},
		{"/tmp/go-build123/b001/exe/main", "command-line-arguments", "/tmp/go-build123/b001/exe/main"},
		{"./weir", mod + "/cmd/weir", "./weir"},
	} {
		if got := programName(tc.arg0, tc.pkg, mod); got != tc.want {
			t.Errorf("programName(%q, %q) = %q, want %q", tc.arg0, tc.pkg, got, tc.want)
		}
	}
	if program() == "" {
		t.Errorf("program() is empty (os.Args[0] %q)", os.Args[0])
	}
}

// TestCommandRejectsAShadowingFlag: a job cannot declare a flag run has.
func TestCommandRejectsAShadowingFlag(t *testing.T) {
	job := testJob()
	job.Flags = func(fs *pflag.FlagSet) { fs.String("from", "", "") }
	defer func() {
		if r := recover(); r == nil || !strings.Contains(r.(string), "--from") {
			t.Fatalf("recover() = %v, want a panic naming --from", r)
		}
	}()
	Command("prog", job)
}

// TestBuildGetsTheFlagsPrepareSettled: Build receives the job's flags as
// given and as Prepare set them, then the arguments after --; a bad flag
// and an unknown job are errors that say what is allowed.
func TestBuildGetsTheFlagsPrepareSettled(t *testing.T) {
	errStop := errors.New("stop")
	var built []string
	job := testJob()
	job.Prepare = func(_ context.Context, r *Run) error {
		if in, _ := r.Flags.GetString("input"); in != "given" {
			return fmt.Errorf("Prepare sees --input %q, want given", in)
		}
		return r.Flags.Set("output", "settled")
	}
	job.Build = func(_ *stream.Environment, args []string) error {
		built = args
		return errStop
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"run", "test", "--input", "given", "-D", "rest.port=0", "--", "extra"}, "stop"},
		{[]string{"run", "nope"}, `unknown job "nope" (known: test)`},
		{[]string{"run", "test", "--input", "given", "--fail-after", "soon"}, `--fail-after "soon"`},
		{[]string{"run", "test", "stray"}, "the job's own arguments go after --"},
	} {
		cmd := Command("prog", job)
		cmd.SetArgs(tc.args)
		cmd.SetOut(io.Discard)
		cmd.SetErr(io.Discard)
		if err := cmd.ExecuteContext(context.Background()); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("prog %s: error %v, want one saying %q", strings.Join(tc.args, " "), err, tc.want)
		}
	}
	if want := []string{"--input=given", "--output=settled", "extra"}; !slices.Equal(built, want) {
		t.Fatalf("Build got %q, want %q", built, want)
	}
}
