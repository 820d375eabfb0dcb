package objstore_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/weirstream/weir/config"
	"github.com/weirstream/weir/internal/objstore"
	"github.com/weirstream/weir/internal/objstore/azuretest"
	"github.com/weirstream/weir/internal/objstore/gcstest"
)

func TestGCSFromConfig(t *testing.T) {
	c, err := config.ParseDynamic([]string{"gs.storage.root.url=http://127.0.0.1:4443/", "gs.auth.service.account.json.keyfile=/etc/weir/sa.json"})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := objstore.GCSFromConfig(c), (objstore.GCS{RootURL: "http://127.0.0.1:4443/", KeyFile: "/etc/weir/sa.json"}); got != want {
		t.Fatalf("GCSFromConfig = %+v, want %+v", got, want)
	}
	if err := config.New().Set(config.KeyGSStorageRootURL, "127.0.0.1:4443"); err == nil {
		t.Error("gs.storage.root.url without a scheme accepted")
	}
}

// A key file that is not there fails the open, naming the option.
func TestGCSMissingKeyFile(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "sa.json")
	mux := objstore.NewURLMux(objstore.WithGCS(objstore.GCS{RootURL: "http://127.0.0.1:1/", KeyFile: missing}))
	b, err := mux.OpenBucket(context.Background(), "gs://bucket")
	if err == nil {
		b.Close()
		t.Fatal("opened with a missing key file")
	}
	if !strings.Contains(err.Error(), config.KeyGSServiceAccountKeyFile) {
		t.Fatalf("error does not name %s: %v", config.KeyGSServiceAccountKeyFile, err)
	}
}

// Objects written through gs:// come back whole, a large one in several
// chunks of a resumable upload, also when every third request to the
// server is answered 503 (as Cloud Storage answers when overloaded): the
// client retries.
func TestGCSRetriesTransientErrors(t *testing.T) {
	srv := gcstest.Start(t)
	ctx := context.Background()
	target, err := url.Parse(srv.GCS.RootURL)
	if err != nil {
		t.Fatal(err)
	}
	var requests, refused atomic.Int64
	rp := httputil.NewSingleHostReverseProxy(target)
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if requests.Add(1)%3 == 0 {
			refused.Add(1)
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprint(w, `{"error":{"code":503,"message":"Service Unavailable"}}`)
			return
		}
		rp.ServeHTTP(w, r)
	}))
	defer proxy.Close()
	b, err := objstore.NewURLMux(objstore.WithGCS(objstore.GCS{RootURL: proxy.URL + "/"})).OpenBucket(ctx, "gs://"+gcstest.Bucket)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()

	roundTrip(t, b, "ckpt/")
	if refused.Load() == 0 {
		t.Fatal("no request was refused: the test tested nothing")
	}
	t.Logf("%d requests, %d answered 503 and retried", requests.Load(), refused.Load())
}

// Against Azurite: a large object goes in as staged blocks and comes back
// whole; a wrong key fails without showing either key.
func TestAzureBlob(t *testing.T) {
	srv := azuretest.Env(t)
	ctx := context.Background()
	prefix := srv.Prefix(t)
	roundTrip(t, srv.OpenBucket(t), prefix)

	// A wrong key fails the write with an error that shows neither key.
	const wrongKey = "d3Jvbmcta2V5LW5ldmVyLXNob3du" // base64, as account keys are
	t.Setenv("AZURE_STORAGE_KEY", wrongKey)
	bad, err := srv.Mux().OpenBucket(ctx, srv.URL(""))
	if err != nil {
		t.Fatal(err)
	}
	defer bad.Close()
	err = bad.WriteAll(ctx, prefix+"x", []byte("x"), nil)
	if err == nil {
		t.Fatal("a write with a wrong account key succeeded")
	}
	if strings.Contains(err.Error(), wrongKey) || strings.Contains(err.Error(), srv.Key) {
		t.Fatalf("the error shows an account key: %v", err)
	}
}
