package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"gocloud.dev/blob"
	"gocloud.dev/blob/memblob"

	"github.com/weirstream/weir/internal/checkpoint"
	"github.com/weirstream/weir/internal/checkpoint/storage"
	"github.com/weirstream/weir/internal/clustercli"
	"github.com/weirstream/weir/internal/objstore"
)

func newCheckpointsCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "checkpoints",
		Short: "List and inspect the checkpoints in a checkpoint directory",
		Long: `checkpoints reads a checkpoint directory (execution.checkpointing.dir), laid
out as <dir>/<job-id>/chk-<n>/ with a _metadata file completing each
checkpoint. It only reads: nothing is created, changed or deleted. An
s3:// directory is reached as -D s3.endpoint, s3.path.style.access and
--config say, with the AWS SDK's credentials (AWS_ACCESS_KEY_ID, ...).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	cmd.AddCommand(newCheckpointsListCmd(), newCheckpointsShowCmd())
	return cmd
}

type checkpointsListOptions struct {
	dir, job string
	json     bool
	cfg      clustercli.ConfigFlags
}

func newCheckpointsListCmd() *cobra.Command {
	o := checkpointsListOptions{}
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List the retained checkpoints of every job under a checkpoint directory",
		Long: `list prints one row per checkpoint directory (chk-<n>) of each job under
--dir, oldest first: its id; its status — completed (its _metadata and the
state files it names verify), incomplete (no _metadata: never completed,
still being written, or being deleted) or corrupt, with the reason; its
completion time; the size of the state it references; and the number of
files in its directory. Without --job it lists every job directory found
under --dir, which must then be a local directory.`,
		Example: `  weir checkpoints list --dir /checkpoints/gatewaymeter
  weir checkpoints list --dir file:///checkpoints/gatewaymeter --job 3f9c2a71
  weir checkpoints list --dir s3://bucket/checkpoints --job 3f9c2a71 -D s3.endpoint=http://127.0.0.1:8333 -D s3.path.style.access=true`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runCheckpointsList(cmd.Context(), cmd.OutOrStdout(), o)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.dir, "dir", "", "checkpoint directory: a path or a URL (file://..., s3://...) (required)")
	f.StringVar(&o.job, "job", "", "list only this job's checkpoints")
	f.BoolVar(&o.json, "json", false, "print the list as JSON")
	o.cfg.AddTo(f)
	return cmd
}

type checkpointsShowOptions struct {
	dir, job string
	json     bool
	cfg      clustercli.ConfigFlags
}

func newCheckpointsShowCmd() *cobra.Command {
	o := checkpointsShowOptions{}
	cmd := &cobra.Command{
		Use:   "show CHECKPOINT",
		Short: "Show what a checkpoint holds: operators, subtasks, state handles, source offsets",
		Long: `show reads and verifies one checkpoint's (or savepoint's) _metadata and
prints what it holds: the job, the checkpoint id and kind, the trigger and
completion times, then for each operator uid its parallelism and maximum
parallelism and, per subtask, its keyed state handles (key-group range,
size, and file or inline) and operator state. For a source operator — one
whose operator state decodes as split offsets — it prints the offset of
every split: S_n, where the sources restart from when the job recovers
from this checkpoint.

CHECKPOINT is a checkpoint id, looked up under --dir (with --job when the
directory holds several jobs), or the path or URL of a checkpoint or
savepoint directory or of its _metadata file. With --json, show prints the
metadata itself as JSON.`,
		Example: `  weir checkpoints show --dir /checkpoints/gatewaymeter 7
  weir checkpoints show /checkpoints/gatewaymeter/3f9c2a71/chk-7
  weir checkpoints show --json /checkpoints/gatewaymeter/3f9c2a71/chk-7/_metadata`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runCheckpointsShow(cmd.Context(), cmd.OutOrStdout(), o, args[0])
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.dir, "dir", "", "checkpoint directory, to look CHECKPOINT up by id")
	f.StringVar(&o.job, "job", "", "job whose checkpoint CHECKPOINT is, when --dir holds several")
	f.BoolVar(&o.json, "json", false, "print the metadata as JSON")
	o.cfg.AddTo(f)
	return cmd
}

// localPath returns the local directory a plain path or file:// URL names,
// and false for a URL of another scheme.
func localPath(raw string) (string, bool, error) {
	if !strings.Contains(raw, "://") {
		return raw, true, nil
	}
	u, err := url.Parse(raw)
	if err != nil {
		return "", false, err
	}
	if u.Scheme != "file" {
		return "", false, nil
	}
	p := u.Path
	switch u.Host {
	case "", "localhost":
	case ".":
		p = strings.TrimPrefix(p, "/")
	default:
		return "", false, fmt.Errorf("%s: file URL with host %q", raw, u.Host)
	}
	if p == "" {
		return "", false, fmt.Errorf("%s: no path", raw)
	}
	return filepath.FromSlash(p), true, nil
}

// jobDir is one job's checkpoint directory: the checkpoint directory it
// is in and the job id, as storage.Open takes them.
type jobDir struct {
	dir, job string
}

// findJobs returns the jobs whose checkpoints are under dir: job alone if
// given, otherwise every job directory found. A job directory is a
// directory holding a chk-<n> directory, shared/ or taskowned/. If dir is
// itself a job directory, it is the one job.
func findJobs(dir, job string) ([]jobDir, error) {
	if dir == "" {
		return nil, errors.New("--dir is required: the checkpoint directory")
	}
	local, ok, err := localPath(dir)
	if err != nil {
		return nil, fmt.Errorf("--dir %w", err)
	}
	if !ok {
		// Not a local directory: it cannot be opened without being
		// created, nor listed for jobs; Open takes it as it is.
		if job == "" {
			return nil, fmt.Errorf("--dir %s: give --job to list checkpoints under a URL that is not a local directory", dir)
		}
		return []jobDir{{dir, job}}, nil
	}
	if err := checkDir("--dir", local); err != nil {
		return nil, err
	}
	if job != "" {
		if err := checkDir("--job", filepath.Join(local, job)); err != nil {
			return nil, fmt.Errorf("--dir %s has no job %s", dir, job)
		}
		return []jobDir{{local, job}}, nil
	}
	if isJobDir(local) {
		abs, err := filepath.Abs(local)
		if err != nil {
			return nil, err
		}
		return []jobDir{{filepath.Dir(abs), filepath.Base(abs)}}, nil
	}
	entries, err := os.ReadDir(local)
	if err != nil {
		return nil, fmt.Errorf("--dir %w", err)
	}
	var jobs []jobDir
	for _, e := range entries {
		if e.IsDir() && isJobDir(filepath.Join(local, e.Name())) {
			jobs = append(jobs, jobDir{local, e.Name()})
		}
	}
	return jobs, nil
}

// isJobDir reports whether dir looks like a job's checkpoint directory.
func isJobDir(dir string) bool {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return false
	}
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		if _, ok := parseChk(e.Name()); ok || e.Name() == storage.SharedDir || e.Name() == storage.TaskOwnedDir {
			return true
		}
	}
	return false
}

// parseChk returns n of a directory name chk-<n>.
func parseChk(name string) (int64, bool) {
	s, ok := strings.CutPrefix(name, "chk-")
	if !ok {
		return 0, false
	}
	id, err := strconv.ParseInt(s, 10, 64)
	return id, err == nil && id >= 0 && strconv.FormatInt(id, 10) == s
}

// listedCheckpoint is one row of checkpoints list, and its JSON form.
type listedCheckpoint struct {
	Job            string     `json:"job_id"`
	ID             int64      `json:"checkpoint_id"`
	Path           string     `json:"path"`
	Status         string     `json:"status"`
	Reason         string     `json:"reason,omitempty"`
	TriggerTime    *time.Time `json:"trigger_time,omitempty"`
	CompletionTime *time.Time `json:"completion_time,omitempty"`
	StateSize      int64      `json:"state_size"`
	StoredSize     int64      `json:"stored_size"`
	Files          int        `json:"files"`
}

func runCheckpointsList(ctx context.Context, w io.Writer, o checkpointsListOptions) error {
	cfg, err := o.cfg.Config()
	if err != nil {
		return err
	}
	mux := objstore.URLMux(cfg)
	jobs, err := findJobs(o.dir, o.job)
	if err != nil {
		return err
	}
	rows := []listedCheckpoint{}
	for _, j := range jobs {
		infos, err := listJob(ctx, j, mux)
		if err != nil {
			return err
		}
		for _, info := range infos {
			rows = append(rows, listedRow(j.job, info))
		}
	}
	if o.json {
		return writeJSON(w, rows)
	}
	if len(jobs) == 0 {
		fmt.Fprintf(w, "no job directories under %s\n", o.dir)
		return nil
	}
	tw := newAlignedTable(w)
	fmt.Fprintln(tw, "JOB\tCHECKPOINT\tSTATUS\tCOMPLETED\tSTATE SIZE\tFILES\tREASON")
	for _, r := range rows {
		completed, size := "-", "-"
		if r.CompletionTime != nil {
			completed, size = fmtTime(*r.CompletionTime), fmtBytes(r.StateSize)
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%d\t%s\n", r.Job, r.ID, r.Status, completed, size, r.Files, r.Reason)
	}
	for _, j := range jobs {
		if !slices.ContainsFunc(rows, func(r listedCheckpoint) bool { return r.Job == j.job }) {
			fmt.Fprintf(tw, "%s\t-\tno checkpoints\t\n", j.job)
		}
	}
	return tw.Flush()
}

func listJob(ctx context.Context, j jobDir, mux *blob.URLMux) ([]storage.Info, error) {
	st, err := storage.Open(ctx, j.dir, j.job, storage.VerifyChecksums(true), storage.URLMux(mux))
	if err != nil {
		return nil, err
	}
	defer st.Close()
	return st.List(ctx)
}

// listedRow makes the row of one checkpoint of job, naming its status in
// lower case and, unless it is completed, why.
func listedRow(job string, info storage.Info) listedCheckpoint {
	r := listedCheckpoint{
		Job:        job,
		ID:         info.ID,
		Path:       info.Path,
		StateSize:  info.StateSize,
		StoredSize: info.StoredSize,
		Files:      info.Files,
	}
	switch {
	case info.Status == storage.Completed:
		r.Status = "completed"
		r.TriggerTime, r.CompletionTime = &info.TriggerTime, &info.CompletionTime
	case info.Status == storage.Incomplete:
		r.Status, r.Reason = "incomplete", "no "+storage.MetadataFile
	case errors.Is(info.Err, storage.ErrCorrupt):
		r.Status, r.Reason = "corrupt", failureReason(info.Path, info.Err)
	case errors.Is(info.Err, storage.ErrUnsupportedVersion):
		r.Status, r.Reason = "unsupported", failureReason(info.Path, info.Err)
	default:
		r.Status, r.Reason = "unreadable", failureReason(info.Path, info.Err)
	}
	return r
}

// failureReason says why the checkpoint in dir failed verification, naming the
// failing file relative to dir when it is inside it.
func failureReason(dir string, err error) string {
	var ce *storage.CorruptError
	if errors.As(err, &ce) {
		p := ce.Path
		if rel, rerr := filepath.Rel(dir, p); rerr == nil && !strings.HasPrefix(rel, "..") {
			p = rel
		}
		return p + ": " + ce.Reason
	}
	return strings.TrimPrefix(err.Error(), "storage: ")
}

func runCheckpointsShow(ctx context.Context, w io.Writer, o checkpointsShowOptions, arg string) error {
	snap, closeAll, err := openCheckpoint(ctx, o, arg)
	if err != nil {
		return err
	}
	defer closeAll()
	if o.json {
		return writeJSON(w, snap.Metadata)
	}
	var buf bytes.Buffer
	describeCheckpoint(ctx, &buf, snap)
	_, err = w.Write(buf.Bytes())
	return err
}

// openCheckpoint resolves show's CHECKPOINT argument. The snapshot may
// read its state through the storage it was resolved with, so both stay
// open until closeAll.
func openCheckpoint(ctx context.Context, o checkpointsShowOptions, arg string) (snap *storage.Snapshot, closeAll func(), err error) {
	cfg, err := o.cfg.Config()
	if err != nil {
		return nil, nil, err
	}
	mux := objstore.URLMux(cfg)
	var st *storage.Storage
	if id, perr := strconv.ParseInt(arg, 10, 64); perr == nil {
		if o.dir == "" {
			return nil, nil, fmt.Errorf("checkpoint id %d: give --dir, the checkpoint directory to look it up in, or a path", id)
		}
		jobs, err := findJobs(o.dir, o.job)
		if err != nil {
			return nil, nil, err
		}
		switch len(jobs) {
		case 0:
			return nil, nil, fmt.Errorf("--dir %s: no job directories", o.dir)
		case 1:
		default:
			names := make([]string, len(jobs))
			for i, j := range jobs {
				names[i] = j.job
			}
			return nil, nil, fmt.Errorf("--dir %s holds several jobs (%s): give --job", o.dir, strings.Join(names, ", "))
		}
		if st, err = storage.Open(ctx, jobs[0].dir, jobs[0].job, storage.VerifyChecksums(true), storage.URLMux(mux)); err != nil {
			return nil, nil, err
		}
		if snap, err = st.Resolve(ctx, st.CheckpointPath(id)); err != nil {
			st.Close()
			return nil, nil, fmt.Errorf("checkpoint %d of job %s: %w", id, jobs[0].job, err)
		}
	} else {
		if local, ok, err := localPath(arg); err != nil {
			return nil, nil, err
		} else if ok {
			if _, err := os.Stat(local); errors.Is(err, fs.ErrNotExist) {
				return nil, nil, fmt.Errorf("%s: no such checkpoint directory or _metadata file", arg)
			}
		}
		// Resolve opens the bucket a path names by itself; the storage it
		// is called on only has to exist, so it is an empty in-memory one.
		if st, err = storage.Open(ctx, "mem://", "show", storage.Bucket(memblob.OpenBucket(nil)), storage.URLMux(mux)); err != nil {
			return nil, nil, err
		}
		if snap, err = st.Resolve(ctx, arg); err != nil {
			st.Close()
			return nil, nil, err
		}
	}
	return snap, func() { snap.Close(); st.Close() }, nil
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// describeCheckpoint writes what show prints of a checkpoint.
func describeCheckpoint(ctx context.Context, w io.Writer, snap *storage.Snapshot) {
	m := snap.Metadata
	var handles, files int
	for _, op := range m.Operators {
		for _, s := range op.Subtasks {
			for _, h := range slices.Concat(s.Keyed, s.Operator) {
				handles++
				if h.Path != "" {
					files++
				}
			}
		}
	}
	fmt.Fprintf(w, "%s %d of job %s\n", strings.ToLower(m.Kind.String()), m.CheckpointID, m.JobID)
	tw := newAlignedTable(w)
	fmt.Fprintf(tw, "  path\t%s\n", snap.Path)
	fmt.Fprintf(tw, "  kind\t%s\n", m.Kind)
	fmt.Fprintf(tw, "  triggered\t%s\n", fmtTime(m.TriggerTime))
	completed := fmtTime(m.CompletionTime)
	if !m.TriggerTime.IsZero() && !m.CompletionTime.IsZero() {
		completed += fmt.Sprintf(" (%v after the trigger)", m.CompletionTime.Sub(m.TriggerTime).Round(time.Microsecond))
	}
	fmt.Fprintf(tw, "  completed\t%s\n", completed)
	fmt.Fprintf(tw, "  state\t%s in %d handles: %d in files, %d inline\n", fmtSize(m.Size()), handles, files, handles-files)
	fmt.Fprintf(tw, "  operators\t%d\n", len(m.Operators))
	tw.Flush()

	for _, op := range m.Operators {
		fmt.Fprintf(w, "\noperator %s: parallelism %d, max parallelism %d", op.UID, op.Parallelism, op.MaxParallelism)
		if !slices.ContainsFunc(op.Subtasks, func(s checkpoint.SubtaskState) bool { return len(s.Keyed)+len(s.Operator) > 0 }) {
			fmt.Fprintln(w, ", no state")
			continue
		}
		fmt.Fprintln(w)
		tw := newAlignedTable(w)
		fmt.Fprintln(tw, "  SUBTASK\tSTATE\tKEY GROUPS\tSIZE\tFILE\tCRC32C")
		for i, s := range op.Subtasks {
			if len(s.Keyed)+len(s.Operator) == 0 {
				fmt.Fprintf(tw, "  %d\tnone\t\t\t\t\n", i)
			}
			for _, h := range s.Keyed {
				kg := "?"
				if h.KeyGroups != nil {
					kg = fmt.Sprintf("%d-%d", h.KeyGroups.Start, h.KeyGroups.End)
				}
				fmt.Fprintf(tw, "  %d\tkeyed\t%s\t%s\t%s\t%08x\n", i, kg, fmtSize(h.Size), handleLocation(h), h.CRC32C)
			}
			for _, h := range s.Operator {
				fmt.Fprintf(tw, "  %d\toperator\t-\t%s\t%s\t%08x\n", i, fmtSize(h.Size), handleLocation(h), h.CRC32C)
			}
		}
		tw.Flush()
		offsets, err := clustercli.SourceOffsets(ctx, snap, op)
		switch {
		case err != nil:
			fmt.Fprintf(w, "  operator state unreadable: %v\n", err)
		case len(offsets) > 0:
			fmt.Fprintf(w, "  source offsets S_%d, by split:\n", m.CheckpointID)
			tw := newAlignedTable(w)
			fmt.Fprintln(tw, "    SPLIT\tSUBTASK\tOFFSET")
			for _, s := range offsets {
				ended := ""
				if s.Ended {
					ended = " (ended)"
				}
				fmt.Fprintf(tw, "    %s\t%d\t%d%s\n", s.Split, s.Subtask, s.Offset, ended)
			}
			tw.Flush()
		}
	}
}

// alignedTable aligns tab-separated cells in columns two spaces apart, without
// trailing blanks on the lines whose last cells are empty.
type alignedTable struct {
	tw  *tabwriter.Writer
	buf bytes.Buffer
	w   io.Writer
}

func newAlignedTable(w io.Writer) *alignedTable {
	t := &alignedTable{w: w}
	t.tw = tabwriter.NewWriter(&t.buf, 0, 0, 2, ' ', 0)
	return t
}

func (t *alignedTable) Write(p []byte) (int, error) { return t.tw.Write(p) }

// Flush writes the table.
func (t *alignedTable) Flush() error {
	if err := t.tw.Flush(); err != nil {
		return err
	}
	for line := range strings.Lines(t.buf.String()) {
		if _, err := io.WriteString(t.w, strings.TrimRight(line, " \n")+"\n"); err != nil {
			return err
		}
	}
	t.buf.Reset()
	return nil
}

// handleLocation says where a handle's bytes are: its file, relative to the job's
// checkpoint directory, or inline in _metadata.
func handleLocation(h checkpoint.StateHandle) string {
	if h.Path == "" {
		return "inline"
	}
	return h.Path
}

// fmtSize shows a size in bytes, exactly and, from 1 KiB, with a unit.
func fmtSize(n int64) string {
	if n < 1024 {
		return fmt.Sprintf("%d B", n)
	}
	return fmt.Sprintf("%s (%d B)", fmtBytes(n), n)
}
