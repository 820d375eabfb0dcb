package storage

import (
	"context"
	"path/filepath"
	"testing"

	"gocloud.dev/blob"
	"gocloud.dev/blob/memblob"
)

func TestParseLocation(t *testing.T) {
	wd, err := filepath.Abs(".")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		in      string
		loc     location
		key     string
		display string // display of key, "" to skip
	}{
		{"/var/ckpt", location{scheme: "file", dir: "/var/ckpt"}, "", "/var/ckpt"},
		{"ckpt/x", location{scheme: "file", dir: filepath.Join(wd, "ckpt/x")}, "", ""},
		{"file:///var/ckpt/", location{scheme: "file", dir: "/var/ckpt"}, "", ""},
		{"file://localhost/var/ckpt", location{scheme: "file", dir: "/var/ckpt"}, "", ""},
		{"file://./rel", location{scheme: "file", dir: filepath.Join(wd, "rel")}, "", ""},
		{"mem://", location{scheme: "mem"}, "", "mem:///"},
		{"s3://bucket/ckpts/prod?region=eu-west-1", location{scheme: "s3", host: "bucket", query: "region=eu-west-1"}, "ckpts/prod", "s3://bucket/ckpts/prod?region=eu-west-1"},
		{"s3://bucket?prefix=ckpts/&region=eu-west-1", location{scheme: "s3", host: "bucket", query: "region=eu-west-1"}, "ckpts", ""},
		{"gs://bucket/a/../b/", location{scheme: "gs", host: "bucket"}, "b", "gs://bucket/b"},
	} {
		loc, key, err := parseLocation(tc.in)
		if err != nil {
			t.Errorf("%s: %v", tc.in, err)
			continue
		}
		if loc != tc.loc || key != tc.key {
			t.Errorf("%s: got %+v %q, want %+v %q", tc.in, loc, key, tc.loc, tc.key)
		}
		if tc.display != "" && loc.display(key) != tc.display {
			t.Errorf("%s: display %q, want %q", tc.in, loc.display(key), tc.display)
		}
		if tc.display != "" {
			// What is displayed parses back to the same place.
			l2, k2, err := parseLocation(loc.display(key))
			if err != nil || l2 != loc || k2 != key {
				t.Errorf("%s: display %q parses to %+v %q (%v)", tc.in, loc.display(key), l2, k2, err)
			}
		}
	}
	for _, bad := range []string{"", "file://host/x", "file:///x?create_dir=1", "file://"} {
		if _, _, err := parseLocation(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

func TestURLMuxAddsSchemes(t *testing.T) {
	// A build adds s3:// or gs:// by importing the driver; here a scheme
	// of our own stands in for one.
	mux := new(blob.URLMux)
	mux.RegisterBucket("fake", &memblob.URLOpener{})
	ctx := context.Background()
	s, err := Open(ctx, "fake://bucket/checkpoints", testJob, URLMux(mux))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	writeCheckpoint(t, s, 1, 30<<10)
	if got, want := s.CheckpointPath(1), "fake://bucket/checkpoints/"+testJob+"/chk-1"; got != want {
		t.Fatalf("CheckpointPath = %s, want %s", got, want)
	}
	if m, _ := mustLatest(t, s); m.CheckpointID != 1 {
		t.Fatal("no checkpoint")
	}
	snap, err := s.Resolve(ctx, s.CheckpointPath(1))
	if err != nil {
		t.Fatal(err)
	}
	snap.Close()

	if _, err := Open(ctx, "s3://bucket/x", testJob, URLMux(mux)); err == nil {
		t.Fatal("opened a scheme nobody registered")
	}
}
