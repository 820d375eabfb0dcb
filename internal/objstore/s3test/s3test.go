// Package s3test connects integration tests to a real S3-compatible
// server.
//
// A test that needs S3 calls Env, which reads the server from the
// environment: WEIR_S3_ENDPOINT (http://host:port), WEIR_S3_ACCESS_KEY,
// WEIR_S3_SECRET_KEY and WEIR_S3_BUCKET (a bucket that exists). When
// WEIR_S3_ENDPOINT is unset, Env skips the test, so a plain `go test ./...`
// passes on a machine without a server; with WEIR_S3_REQUIRED set it fails
// it instead. CI starts the Versity S3 Gateway (versitygw) with
// .ci/s3/start.sh and sets all of them.
//
// To run the suite by hand:
//
//	eval "$(bash .ci/s3/start.sh /tmp/weir-s3)"   # exports WEIR_S3_*
//	go test -race ./internal/checkpoint/storage/ ./internal/objstore/... ./cmd/weir/
//	bash .ci/s3/stop.sh /tmp/weir-s3
//
// Every test shares the one bucket, so each test works under a prefix of
// its own (Server.Prefix).
package s3test

import (
	"context"
	"os"
	"strings"
	"testing"

	"gocloud.dev/blob"

	"github.com/weirstream/weir/internal/objstore"
	"github.com/weirstream/weir/internal/objstore/storetest"
)

// Environment variables naming the server.
const (
	EnvEndpoint  = "WEIR_S3_ENDPOINT"
	EnvAccessKey = "WEIR_S3_ACCESS_KEY"
	EnvSecretKey = "WEIR_S3_SECRET_KEY"
	EnvBucket    = "WEIR_S3_BUCKET"
	// EnvRequired, when non-empty, makes Env fail a test instead of
	// skipping it if EnvEndpoint is unset.
	EnvRequired = "WEIR_S3_REQUIRED"
)

// Server is the S3-compatible server of the environment.
type Server struct {
	// S3 is the configuration that reaches it: its endpoint, credentials
	// and path-style addressing.
	S3 objstore.S3
	// Bucket is the bucket tests use.
	Bucket string
}

// Env returns the server the environment names, or skips t (fails it
// when WEIR_S3_REQUIRED is set) if there is none.
func Env(t testing.TB) Server {
	t.Helper()
	ep := strings.TrimSpace(os.Getenv(EnvEndpoint))
	if ep == "" {
		if os.Getenv(EnvRequired) != "" {
			t.Fatalf("%s is set but %s is not: the S3 server that should run for these tests is missing", EnvRequired, EnvEndpoint)
		}
		t.Skipf("S3 integration test: set %s, %s, %s and %s to run it (CI starts a server with .ci/s3/start.sh and sets them)",
			EnvEndpoint, EnvAccessKey, EnvSecretKey, EnvBucket)
	}
	s := Server{
		S3: objstore.S3{
			Endpoint:  ep,
			AccessKey: os.Getenv(EnvAccessKey),
			SecretKey: os.Getenv(EnvSecretKey),
			PathStyle: true,
		},
		Bucket: os.Getenv(EnvBucket),
	}
	if s.Bucket == "" {
		t.Fatalf("%s is set but %s is not", EnvEndpoint, EnvBucket)
	}
	return s
}

// Prefix returns a fresh key prefix for t: "weir-test/<random>/", without
// the leading "/". Objects under it are deleted when t ends.
func (s Server) Prefix(t testing.TB) string { return storetest.Prefix(t, s.open) }

// URL returns the s3:// URL of key in the bucket.
func (s Server) URL(key string) string {
	return "s3://" + s.Bucket + "/" + strings.TrimPrefix(key, "/")
}

// Mux returns a URL mux that opens the server's buckets.
func (s Server) Mux() *blob.URLMux { return objstore.NewURLMux(objstore.WithS3(s.S3)) }

// OpenBucket opens the bucket at its root, for reaching around the code
// under test, and closes it when t ends.
func (s Server) OpenBucket(t testing.TB) *blob.Bucket {
	t.Helper()
	b, err := s.open(context.Background())
	if err != nil {
		t.Fatalf("s3test: opening bucket %s: %v", s.Bucket, err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

func (s Server) open(ctx context.Context) (*blob.Bucket, error) {
	return s.Mux().OpenBucket(ctx, "s3://"+s.Bucket)
}

// Defines returns the -D options that configure weir for the server,
// credentials included.
func (s Server) Defines() []string {
	return []string{
		"s3.endpoint=" + s.S3.Endpoint,
		"s3.access-key=" + s.S3.AccessKey,
		"s3.secret-key=" + s.S3.SecretKey,
		"s3.path.style.access=true",
	}
}
