// Package storagetest checks, for tests, that a checkpoint directory holds
// what the job's retained checkpoints name and nothing else.
package storagetest

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/weirstream/weir/internal/checkpoint"
	"github.com/weirstream/weir/internal/checkpoint/storage"
)

// Paths returns the paths of the state files md names, relative to its
// job's directory.
func Paths(md *checkpoint.Metadata) []string {
	var out []string
	for _, op := range md.Operators {
		for _, sub := range op.Subtasks {
			for _, hs := range [][]checkpoint.StateHandle{sub.Keyed, sub.Operator, sub.InputChannels} {
				for _, h := range hs {
					if h.Path != "" {
						out = append(out, h.Path)
					}
				}
			}
		}
	}
	return out
}

// Unreferenced looks at the directories of jobs under the local checkpoint
// directory dir. It returns each job's completed checkpoints and what
// under the jobs' directories none of them accounts for, as paths
// relative to dir: files other than the completed checkpoints' _metadata,
// the files those name and the job's LatestFile, and chk-<n> directories
// (ending in "/") of checkpoints that did not complete, empty or not.
func Unreferenced(ctx context.Context, dir string, jobs ...string) (retained map[string][]int64, stray []string, err error) {
	jobs = slices.Compact(slices.Sorted(slices.Values(jobs)))
	allowed := map[string]bool{}
	retained = map[string][]int64{}
	for _, job := range jobs {
		allowed[job+"/"+storage.LatestFile] = true
		st, err := storage.Open(ctx, dir, job)
		if err != nil {
			return nil, nil, err
		}
		infos, err := st.List(ctx)
		if err != nil {
			st.Close()
			return nil, nil, err
		}
		for _, info := range infos {
			md, err := st.ReadMetadata(ctx, st.CheckpointPath(info.ID))
			if err != nil {
				continue // incomplete: its files must not be there
			}
			retained[job] = append(retained[job], info.ID)
			allowed[fmt.Sprintf("%s/chk-%d/%s", job, info.ID, storage.MetadataFile)] = true
			for _, p := range Paths(md) {
				allowed[job+"/"+p] = true
			}
		}
		st.Close()
	}
	for _, job := range jobs {
		root := filepath.Join(dir, job)
		err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			if err != nil {
				return err
			}
			rel, _ := filepath.Rel(dir, p)
			rel = filepath.ToSlash(rel)
			if d.IsDir() {
				num, ok := strings.CutPrefix(d.Name(), "chk-")
				if id, err := strconv.ParseInt(num, 10, 64); ok && err == nil && filepath.Dir(p) == root && !slices.Contains(retained[job], id) {
					stray = append(stray, rel+"/")
					return filepath.SkipDir
				}
				return nil
			}
			if !allowed[rel] {
				stray = append(stray, rel)
			}
			return nil
		})
		if err != nil {
			return nil, nil, err
		}
	}
	return retained, stray, nil
}
