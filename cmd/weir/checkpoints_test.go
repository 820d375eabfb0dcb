package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/weirstream/weir/internal/checkpoint"
	"github.com/weirstream/weir/internal/checkpoint/storage"
	"github.com/weirstream/weir/internal/ops"
)

const (
	jobA = "3f9c2a71"
	jobB = "b00c0ffee"
)

var trigger = time.Date(2025, 12, 1, 0, 0, 10, 0, time.UTC)

// state is one piece of state to write into a checkpoint.
type state struct {
	name string
	data string
	kg   *checkpoint.KeyGroupRange // nil: operator state
}

// sourceState encodes a source subtask's split positions as the source
// checkpoints them.
func sourceState(t *testing.T, id int64, splits map[string]ops.SplitPosition) string {
	t.Helper()
	b, err := ops.EncodeSourceState(id, splits)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// writeCheckpoint writes checkpoint id of job under dir through the
// storage package, as a running job does: state files (or inline state,
// below inline bytes), then _metadata. uids are the operators, states maps a uid to its subtasks'
// states.
func writeCheckpoint(t *testing.T, dir, job string, id int64, inline int, uids []string, states map[string][][]state) *checkpoint.Metadata {
	t.Helper()
	ctx := context.Background()
	st, err := storage.Open(ctx, dir, job, storage.InlineThreshold(inline))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	m := &checkpoint.Metadata{
		Version:        checkpoint.MetadataVersion,
		JobID:          job,
		CheckpointID:   id,
		Kind:           checkpoint.KindCheckpoint,
		TriggerTime:    trigger.Add(time.Duration(id) * 10 * time.Second),
		CompletionTime: trigger.Add(time.Duration(id)*10*time.Second + 250*time.Millisecond),
	}
	for _, uid := range uids {
		op := checkpoint.OperatorState{UID: uid, Parallelism: len(states[uid]), MaxParallelism: 128}
		for i, sub := range states[uid] {
			var ss checkpoint.SubtaskState
			for j, s := range sub {
				w, err := st.CreateState(ctx, id, uid+"-"+string(rune('0'+i))+"-"+string(rune('a'+j)))
				if err != nil {
					t.Fatal(err)
				}
				if _, err := w.Write([]byte(s.data)); err != nil {
					t.Fatal(err)
				}
				h, err := w.Close()
				if err != nil {
					t.Fatal(err)
				}
				if s.kg != nil {
					h.KeyGroups = s.kg
					ss.Keyed = append(ss.Keyed, h)
				} else {
					ss.Operator = append(ss.Operator, h)
				}
			}
			op.Subtasks = append(op.Subtasks, ss)
		}
		m.Operators = append(m.Operators, op)
	}
	if _, err := st.WriteMetadata(ctx, m); err != nil {
		t.Fatal(err)
	}
	return m
}

// checkpointDir builds a checkpoint directory with two jobs:
//
//	jobA  chk-1  completed, source and assemble state, all inline
//	      chk-2  completed, state in files and inline
//	      chk-3  corrupt: a byte of its _metadata flipped
//	      chk-4  incomplete: a state file, no _metadata
//	jobB  chk-5  completed, one operator without state
//
// and returns it with chk-2's metadata.
func checkpointDir(t *testing.T) (string, *checkpoint.Metadata) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "checkpoints")
	kg := func(a, b int) *checkpoint.KeyGroupRange { return &checkpoint.KeyGroupRange{Start: a, End: b} }
	uids := []string{"source", "assemble", "tenant-cost"}
	writeCheckpoint(t, dir, jobA, 1, 1<<10, uids, map[string][][]state{
		"source": {
			{{name: "op", data: sourceState(t, 1, map[string]ops.SplitPosition{"part-00000.jsonl": {}, "part-00002.jsonl": {}})}},
			{{name: "op", data: sourceState(t, 1, map[string]ops.SplitPosition{"part-00001.jsonl": {}})}},
		},
		"assemble":    {{{data: "k0", kg: kg(0, 63)}}, {{data: "k1", kg: kg(64, 127)}}},
		"tenant-cost": {{{data: `{"pending":[]}`}}, {}},
	})
	chk2 := writeCheckpoint(t, dir, jobA, 2, 80, uids, map[string][][]state{
		"source": {
			{{data: sourceState(t, 2, map[string]ops.SplitPosition{"part-00000.jsonl": {Offset: 18231}, "part-00002.jsonl": {Offset: 9120, Ended: true}})}},
			{{data: sourceState(t, 2, map[string]ops.SplitPosition{"part-00001.jsonl": {Offset: 17002}})}},
		},
		"assemble": {
			{{data: strings.Repeat("a", 2000), kg: kg(0, 63)}},
			{{data: strings.Repeat("b", 50), kg: kg(64, 127)}},
		},
		"tenant-cost": {{{data: `{"offset":1,"other":2}`}}, {}},
	})
	writeCheckpoint(t, dir, jobA, 3, 1<<10, uids[:1], map[string][][]state{
		"source": {{{data: sourceState(t, 3, map[string]ops.SplitPosition{"part-00000.jsonl": {Offset: 20000}})}}},
	})
	meta3 := filepath.Join(dir, jobA, "chk-3", storage.MetadataFile)
	b, err := os.ReadFile(meta3)
	if err != nil {
		t.Fatal(err)
	}
	i := bytes.Index(b, []byte(`"checkpoint_id": 3`))
	b[i+len(`"checkpoint_id": `)] = '9'
	if err := os.WriteFile(meta3, b, 0o644); err != nil {
		t.Fatal(err)
	}
	// Checkpoint 4 was being written when the job stopped.
	st, err := storage.Open(context.Background(), dir, jobA, storage.InlineThreshold(0))
	if err != nil {
		t.Fatal(err)
	}
	w, err := st.CreateState(context.Background(), 4, "source-0-op")
	if err != nil {
		t.Fatal(err)
	}
	w.Write([]byte(`{}`))
	if _, err := w.Close(); err != nil {
		t.Fatal(err)
	}
	st.Close()

	writeCheckpoint(t, dir, jobB, 5, 1<<10, []string{"map", "sum"}, map[string][][]state{
		"map": {{}, {}},
		"sum": {{{data: "s", kg: kg(0, 127)}}},
	})
	return dir, chk2
}

func TestCheckpointsList(t *testing.T) {
	dir, _ := checkpointDir(t)
	if err := os.MkdirAll(filepath.Join(dir, "other", "empty", storage.SharedDir), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		args string // after "checkpoints list"; DIR is the directory
		want string
	}{
		{
			name: "every job",
			args: "--dir DIR",
			want: `
JOB        CHECKPOINT  STATUS      COMPLETED                 STATE SIZE  FILES  REASON
3f9c2a71   1           completed   2025-12-01T00:00:20.250Z  179 B       1
3f9c2a71   2           completed   2025-12-01T00:00:30.250Z  2.2 KiB     3
3f9c2a71   3           corrupt     -                         -           1      _metadata: checksum mismatch: expected crc32c 45fe4acc, got 55ec2015
3f9c2a71   4           incomplete  -                         -           1      no _metadata
b00c0ffee  5           completed   2025-12-01T00:01:00.250Z  1 B         1
`,
		},
		{
			name: "one job, as a file URL",
			args: "--dir file://DIR --job " + jobB,
			want: `
JOB        CHECKPOINT  STATUS     COMPLETED                 STATE SIZE  FILES  REASON
b00c0ffee  5           completed  2025-12-01T00:01:00.250Z  1 B         1
`,
		},
		{
			name: "a job directory as --dir",
			args: "--dir DIR/" + jobB,
			want: `
JOB        CHECKPOINT  STATUS     COMPLETED                 STATE SIZE  FILES  REASON
b00c0ffee  5           completed  2025-12-01T00:01:00.250Z  1 B         1
`,
		},
		{
			name: "a job without checkpoints",
			args: "--dir DIR/other",
			want: `
JOB    CHECKPOINT  STATUS          COMPLETED  STATE SIZE  FILES  REASON
empty  -           no checkpoints
`,
		},
		{
			name: "no jobs",
			args: "--dir DIR/other/empty/shared",
			want: `
no job directories under DIR/other/empty/shared
`,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := strings.NewReplacer("DIR", filepath.ToSlash(dir))
			args := strings.Fields("checkpoints list " + r.Replace(tc.args))
			stdout, err := runWeir(t, args...)
			if err != nil {
				t.Fatal(err)
			}
			if want := r.Replace(strings.TrimPrefix(tc.want, "\n")); stdout != want {
				t.Errorf("weir %s:\n%s\nwant:\n%s", strings.Join(args, " "), stdout, want)
			}
		})
	}
}

func TestCheckpointsListJSON(t *testing.T) {
	dir, _ := checkpointDir(t)
	stdout, err := runWeir(t, "checkpoints", "list", "--dir", dir, "--json")
	if err != nil {
		t.Fatal(err)
	}
	var rows []listedCheckpoint
	if err := json.Unmarshal([]byte(stdout), &rows); err != nil {
		t.Fatalf("%v:\n%s", err, stdout)
	}
	var got []string
	for _, r := range rows {
		got = append(got, r.Job+"/"+r.Status)
	}
	want := []string{jobA + "/completed", jobA + "/completed", jobA + "/corrupt", jobA + "/incomplete", jobB + "/completed"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("statuses %v, want %v", got, want)
	}
	if rows[1].CompletionTime == nil || !rows[1].CompletionTime.Equal(trigger.Add(20*time.Second+250*time.Millisecond)) {
		t.Errorf("completion time of checkpoint 2: %v", rows[1].CompletionTime)
	}
}

func TestCheckpointsShow(t *testing.T) {
	dir, _ := checkpointDir(t)
	chk2 := filepath.Join(dir, jobA, "chk-2")
	want := `checkpoint 2 of job 3f9c2a71
  path       CHK2
  kind       CHECKPOINT
  triggered  2025-12-01T00:00:30.000Z
  completed  2025-12-01T00:00:30.250Z (250ms after the trigger)
  state      2.2 KiB (2239 B) in 5 handles: 2 in files, 3 inline
  operators  3

operator source: parallelism 2, max parallelism 128
  SUBTASK  STATE     KEY GROUPS  SIZE  FILE              CRC32C
  0        operator  -           96 B  chk-2/source-0-a  27556aa9
  1        operator  -           71 B  inline            6ebf81e7
  source offsets S_2, by split:
    SPLIT             SUBTASK  OFFSET
    part-00000.jsonl  0        18231
    part-00001.jsonl  1        17002
    part-00002.jsonl  0        9120 (ended)

operator assemble: parallelism 2, max parallelism 128
  SUBTASK  STATE  KEY GROUPS  SIZE              FILE                CRC32C
  0        keyed  0-63        2.0 KiB (2000 B)  chk-2/assemble-0-a  1e1fb826
  1        keyed  64-127      50 B              inline              fbc756b2

operator tenant-cost: parallelism 2, max parallelism 128
  SUBTASK  STATE     KEY GROUPS  SIZE  FILE    CRC32C
  0        operator  -           22 B  inline  daae3ea3
  1        none
`
	want = strings.ReplaceAll(want, "CHK2", chk2)
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"id", []string{"--dir", dir, "--job", jobA, "2"}},
		{"id under a file URL", []string{"--dir", "file://" + filepath.ToSlash(dir), "--job", jobA, "2"}},
		{"id under a job directory", []string{"--dir", filepath.Join(dir, jobA), "2"}},
		{"directory", []string{chk2}},
		{"_metadata", []string{filepath.Join(chk2, storage.MetadataFile)}},
		{"file URL", []string{"file://" + filepath.ToSlash(chk2)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := append([]string{"checkpoints", "show"}, tc.args...)
			stdout, err := runWeir(t, args...)
			if err != nil {
				t.Fatal(err)
			}
			if stdout != want {
				t.Errorf("weir %s:\n%s\nwant:\n%s", strings.Join(args, " "), stdout, want)
			}
		})
	}
}

func TestCheckpointsShowJSON(t *testing.T) {
	dir, chk2 := checkpointDir(t)
	stdout, err := runWeir(t, "checkpoints", "show", "--json", filepath.Join(dir, jobA, "chk-2"))
	if err != nil {
		t.Fatal(err)
	}
	var got checkpoint.Metadata
	if err := json.Unmarshal([]byte(stdout), &got); err != nil {
		t.Fatalf("%v:\n%s", err, stdout)
	}
	if !reflect.DeepEqual(&got, chk2) {
		t.Errorf("show --json:\n%+v\nwant the metadata written:\n%+v", got, *chk2)
	}
}

func TestCheckpointsRejects(t *testing.T) {
	dir, _ := checkpointDir(t)
	missing := filepath.Join(t.TempDir(), "missing")
	for _, tc := range []struct {
		args string // DIR is the directory, MISSING a path that does not exist
		want string
	}{
		{"list", "--dir is required"},
		{"list --dir MISSING", "--dir " + missing + ": no such directory"},
		{"list --dir DIR --job nope", "has no job nope"},
		{"list --dir mem://", "give --job"},
		{"show --dir DIR --job " + jobA + " 3", "checkpoint 3 of job " + jobA + ": storage: corrupt " + filepath.Join(dir, jobA, "chk-3", "_metadata") + ": checksum mismatch"},
		{"show DIR/" + jobA + "/chk-4", "incomplete: no _metadata"},
		{"show --dir DIR --job " + jobA + " 9", "incomplete: no _metadata"},
		{"show 2", "give --dir"},
		{"show --dir DIR 2", "holds several jobs (" + jobA + ", " + jobB + "): give --job"},
		{"show MISSING/chk-2", "no such checkpoint directory"},
		{"show", "accepts 1 arg(s), received 0"},
		{"bogus", "unknown command"},
	} {
		args := strings.Fields("checkpoints " + strings.NewReplacer("DIR", dir, "MISSING", missing).Replace(tc.args))
		_, err := runWeir(t, args...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("weir %s: error %v, want one containing %q", strings.Join(args, " "), err, tc.want)
		}
	}
	if _, err := os.Stat(missing); !os.IsNotExist(err) {
		t.Errorf("a missing --dir was created: %v", err)
	}
}

func TestCheckpointsShowSavepoint(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	st, err := storage.Open(ctx, filepath.Join(root, "checkpoints"), jobA)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	sp, err := st.CreateSavepoint(ctx, filepath.Join(root, "savepoints"))
	if err != nil {
		t.Fatal(err)
	}
	defer sp.Close()
	w, err := sp.CreateState(ctx, "source-0-op")
	if err != nil {
		t.Fatal(err)
	}
	w.Write([]byte(sourceState(t, 12, map[string]ops.SplitPosition{"part-00000.jsonl": {Offset: 42}})))
	h, err := w.Close()
	if err != nil {
		t.Fatal(err)
	}
	p, err := sp.WriteMetadata(ctx, &checkpoint.Metadata{
		JobID: jobA, CheckpointID: 12, Kind: checkpoint.KindSavepoint, TriggerTime: trigger, CompletionTime: trigger,
		Operators: []checkpoint.OperatorState{{UID: "source", Parallelism: 1, MaxParallelism: 128,
			Subtasks: []checkpoint.SubtaskState{{Operator: []checkpoint.StateHandle{h}}}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := runWeir(t, "checkpoints", "show", p)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"savepoint 12 of job " + jobA + "\n",
		"  kind       SAVEPOINT\n",
		"  completed  2025-12-01T00:00:10.000Z (0s after the trigger)\n",
		"  source offsets S_12, by split:\n",
		"    part-00000.jsonl  0        42\n",
	} {
		if !strings.Contains(stdout, want) {
			t.Errorf("output lacks %q:\n%s", want, stdout)
		}
	}
}
