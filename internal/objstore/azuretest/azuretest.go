// Package azuretest connects integration tests to a real Azure Blob
// Storage API: Azurite, Microsoft's own emulator of it.
//
// A test that needs it calls Env, which reads the emulator from the
// environment: WEIR_AZURE_ENDPOINT (host:port of Azurite's blob service),
// WEIR_AZURE_ACCOUNT, WEIR_AZURE_KEY and WEIR_AZURE_CONTAINER (a container
// that exists). When WEIR_AZURE_ENDPOINT is unset, Env skips the test, so
// a plain `go test ./...` passes on a machine without Azurite; with
// WEIR_AZURE_REQUIRED set it fails it instead. CI starts Azurite with
// .ci/azure/start.sh and sets all of them.
//
// To run the suite by hand:
//
//	eval "$(bash .ci/azure/start.sh /tmp/weir-azure)"   # exports WEIR_AZURE_*
//	go test -race ./internal/checkpoint/storage/ ./internal/objstore/...
//	bash .ci/azure/stop.sh /tmp/weir-azure
//
// weir's azblob:// opener takes its credentials and the service's address
// from the environment, as every Go CDK program does, so Env sets
// AZURE_STORAGE_ACCOUNT, AZURE_STORAGE_KEY, AZURE_STORAGE_DOMAIN,
// AZURE_STORAGE_PROTOCOL and AZURE_STORAGE_IS_LOCAL_EMULATOR for the test
// (t.Setenv: such tests cannot run in parallel).
package azuretest

import (
	"context"
	"os"
	"strings"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/bloberror"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/container"
	"gocloud.dev/blob"

	"github.com/weirstream/weir/internal/objstore"
	"github.com/weirstream/weir/internal/objstore/storetest"
)

// Environment variables naming the emulator.
const (
	EnvEndpoint  = "WEIR_AZURE_ENDPOINT"
	EnvAccount   = "WEIR_AZURE_ACCOUNT"
	EnvKey       = "WEIR_AZURE_KEY"
	EnvContainer = "WEIR_AZURE_CONTAINER"
	// EnvRequired, when non-empty, makes Env fail a test instead of
	// skipping it if EnvEndpoint is unset.
	EnvRequired = "WEIR_AZURE_REQUIRED"
)

// Server is the emulator of the environment.
type Server struct {
	// Endpoint is host:port of its blob service.
	Endpoint string
	// Account and Key are the storage account and its shared key.
	Account, Key string
	// Container is the container tests use.
	Container string
}

// Env returns the emulator the environment names, with the Azure
// credentials set for t, or skips t (fails it when WEIR_AZURE_REQUIRED is
// set) if there is none.
func Env(t testing.TB) Server {
	t.Helper()
	ep := strings.TrimSpace(os.Getenv(EnvEndpoint))
	if ep == "" {
		if os.Getenv(EnvRequired) != "" {
			t.Fatalf("%s is set but %s is not: the Azurite emulator that should run for these tests is missing", EnvRequired, EnvEndpoint)
		}
		t.Skipf("Azure integration test: set %s, %s, %s and %s to run it (CI starts Azurite with .ci/azure/start.sh and sets them)",
			EnvEndpoint, EnvAccount, EnvKey, EnvContainer)
	}
	s := Server{Endpoint: ep, Account: os.Getenv(EnvAccount), Key: os.Getenv(EnvKey), Container: os.Getenv(EnvContainer)}
	if s.Account == "" || s.Key == "" || s.Container == "" {
		t.Fatalf("%s is set but not all of %s, %s and %s", EnvEndpoint, EnvAccount, EnvKey, EnvContainer)
	}
	if tt, ok := t.(interface{ Setenv(k, v string) }); ok {
		for k, v := range s.Environ() {
			tt.Setenv(k, v)
		}
	}
	s.createContainer(t)
	return s
}

// Environ returns the Azure environment variables that point weir's
// azblob:// URLs at the emulator: the account, its key and the emulator's
// address.
func (s Server) Environ() map[string]string {
	return map[string]string{
		"AZURE_STORAGE_ACCOUNT":           s.Account,
		"AZURE_STORAGE_KEY":               s.Key,
		"AZURE_STORAGE_DOMAIN":            s.Endpoint,
		"AZURE_STORAGE_PROTOCOL":          "http",
		"AZURE_STORAGE_IS_LOCAL_EMULATOR": "true",
	}
}

// createContainer creates the container unless it exists.
func (s Server) createContainer(t testing.TB) {
	t.Helper()
	cred, err := azblob.NewSharedKeyCredential(s.Account, s.Key)
	if err != nil {
		t.Fatalf("azuretest: %s: %v", EnvKey, err)
	}
	c, err := container.NewClientWithSharedKeyCredential("http://"+s.Endpoint+"/"+s.Account+"/"+s.Container, cred, nil)
	if err != nil {
		t.Fatalf("azuretest: %v", err)
	}
	if _, err := c.Create(context.Background(), nil); err != nil && !bloberror.HasCode(err, bloberror.ContainerAlreadyExists) {
		t.Fatalf("azuretest: creating container %s: %v", s.Container, err)
	}
}

// Prefix returns a fresh key prefix for t: "weir-test/<random>/". Objects
// under it are deleted when t ends.
func (s Server) Prefix(t testing.TB) string {
	return storetest.Prefix(t, func(ctx context.Context) (*blob.Bucket, error) {
		return s.Mux().OpenBucket(ctx, s.bucketURL(""))
	})
}

// bucketURL is the azblob:// URL of key; the environment Env set
// addresses the emulator.
func (s Server) bucketURL(key string) string {
	u := "azblob://" + s.Container
	if key != "" {
		u += "/" + strings.TrimPrefix(key, "/")
	}
	return u
}

// URL returns the azblob:// URL of key in the container.
func (s Server) URL(key string) string { return s.bucketURL(key) }

// Mux returns a URL mux that opens the emulator's containers.
func (s Server) Mux() *blob.URLMux { return objstore.NewURLMux() }

// OpenBucket opens the container at its root, for reaching around the
// code under test, and closes it when t ends.
func (s Server) OpenBucket(t testing.TB) *blob.Bucket {
	t.Helper()
	b, err := s.Mux().OpenBucket(context.Background(), s.bucketURL(""))
	if err != nil {
		t.Fatalf("azuretest: opening container %s: %v", s.Container, err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}
