package launch

import "testing"

// TestCheckpointJobDir: a claimed checkpoint's path splits into the
// checkpoint directory and the job id a storage is opened on to delete
// it; a path that is not <dir>/<job-id>/chk-<id> does not.
func TestCheckpointJobDir(t *testing.T) {
	for _, tc := range []struct {
		path     string
		id       int64
		dir, job string
		ok       bool
	}{
		{path: "/data/chk/job-1/chk-7", id: 7, dir: "/data/chk", job: "job-1", ok: true},
		{path: "/data/chk/job-1/chk-7/", id: 7, dir: "/data/chk", job: "job-1", ok: true},
		{path: "s3://bucket/chk/job-1/chk-12", id: 12, dir: "s3://bucket/chk", job: "job-1", ok: true},
		{path: "s3://bucket/chk/job-1/chk-12?region=eu-west-1", id: 12, dir: "s3://bucket/chk?region=eu-west-1", job: "job-1", ok: true},
		{path: "s3://bucket/job-1/chk-3", id: 3, dir: "s3://bucket", job: "job-1", ok: true},
		{path: "s3://job-1/chk-3", id: 3},
		{path: "/data/chk/job-1/chk-7", id: 8},
		{path: "/data/chk/job-1/copy-of-chk-7", id: 7},
		{path: "/chk-7", id: 7},
		{path: "chk-7", id: 7},
	} {
		dir, job, ok := checkpointJobDir(tc.path, tc.id)
		if ok != tc.ok || dir != tc.dir || job != tc.job {
			t.Errorf("checkpointJobDir(%q, %d) = %q, %q, %v; want %q, %q, %v", tc.path, tc.id, dir, job, ok, tc.dir, tc.job, tc.ok)
		}
	}
}
