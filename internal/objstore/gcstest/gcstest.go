// Package gcstest runs a Cloud Storage server in the test's process for
// gs:// tests: fake-gcs-server's fakestorage, which serves the JSON API
// (simple, multipart and resumable uploads, listing, ranged reads) over
// real HTTP on a loopback port, as kfake serves Kafka's protocol. weir's
// gs:// opener reaches it through the gs.storage.root.url option, exactly
// as it reaches Google's API.
package gcstest

import (
	"context"
	"strings"
	"testing"

	"github.com/fsouza/fake-gcs-server/fakestorage"
	"gocloud.dev/blob"

	"github.com/weirstream/weir/internal/objstore"
	"github.com/weirstream/weir/internal/objstore/storetest"
)

// Bucket is the bucket every Server holds.
const Bucket = "weir"

// Server is a running Cloud Storage server with one bucket.
type Server struct {
	// GCS is the configuration that reaches it.
	GCS objstore.GCS
}

// Start starts a server with an empty bucket and stops it when t ends.
func Start(t testing.TB) Server {
	t.Helper()
	srv, err := fakestorage.NewServerWithOptions(fakestorage.Options{
		Scheme:     "http",
		Host:       "127.0.0.1",
		Port:       0,
		NoListener: false,
	})
	if err != nil {
		t.Fatalf("gcstest: starting the server: %v", err)
	}
	t.Cleanup(srv.Stop)
	srv.CreateBucketWithOpts(fakestorage.CreateBucketOpts{Name: Bucket})
	return Server{GCS: objstore.GCS{RootURL: srv.URL() + "/"}}
}

// Prefix returns a fresh key prefix for t: "weir-test/<random>/".
func (s Server) Prefix(t testing.TB) string {
	return storetest.Prefix(t, func(ctx context.Context) (*blob.Bucket, error) {
		return s.Mux().OpenBucket(ctx, "gs://"+Bucket)
	})
}

// URL returns the gs:// URL of key in the bucket.
func (s Server) URL(key string) string {
	return "gs://" + Bucket + "/" + strings.TrimPrefix(key, "/")
}

// Mux returns a URL mux that opens the server's buckets.
func (s Server) Mux() *blob.URLMux { return objstore.NewURLMux(objstore.WithGCS(s.GCS)) }

// OpenBucket opens the bucket at its root, for reaching around the code
// under test, and closes it when t ends.
func (s Server) OpenBucket(t testing.TB) *blob.Bucket {
	t.Helper()
	b, err := s.Mux().OpenBucket(context.Background(), "gs://"+Bucket)
	if err != nil {
		t.Fatalf("gcstest: opening bucket %s: %v", Bucket, err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

// Defines returns the -D options that configure weir for the server.
func (s Server) Defines() []string {
	return []string{"gs.storage.root.url=" + s.GCS.RootURL}
}
