package objstore_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"

	"gocloud.dev/blob"

	"github.com/weirstream/weir/config"
	"github.com/weirstream/weir/internal/objstore"
	"github.com/weirstream/weir/internal/objstore/s3test"
)

const (
	accessKey = "AKIA-test-access-key"
	secretKey = "test-secret-key-never-shown"
)

func TestS3FromConfig(t *testing.T) {
	c, err := config.ParseDynamic([]string{"s3.endpoint=http://127.0.0.1:9000", "s3.access-key=" + accessKey,
		"s3.secret-key=" + secretKey, "s3.path.style.access=true"})
	if err != nil {
		t.Fatal(err)
	}
	got := objstore.S3FromConfig(c)
	want := objstore.S3{Endpoint: "http://127.0.0.1:9000", AccessKey: accessKey, SecretKey: secretKey, PathStyle: true}
	if got != want {
		t.Fatalf("S3FromConfig = %+v", got)
	}
	// An endpoint is an http(s) URL and nothing else.
	for _, bad := range []string{"127.0.0.1:9000", "ftp://h", "http://", "http://u:p@h", "http://h?x=1"} {
		err := config.New().Set(config.KeyS3Endpoint, bad)
		if err == nil {
			t.Errorf("s3.endpoint=%s accepted", bad)
		}
	}
	// A refused secret is not echoed.
	err = config.New().Set(config.KeyS3SecretKey, "")
	if err == nil || strings.Contains(err.Error(), secretKey) {
		t.Errorf("empty s3.secret-key: %v", err)
	}
}

// Printing or logging the configuration shows no credentials.
func TestS3HidesCredentials(t *testing.T) {
	s := objstore.S3{Endpoint: "http://h:1", AccessKey: accessKey, SecretKey: secretKey, PathStyle: true}
	var logged bytes.Buffer
	slog.New(slog.NewTextHandler(&logged, nil)).Info("s3", "cfg", s)
	slog.New(slog.NewJSONHandler(&logged, nil)).Info("s3", "cfg", s)
	for _, out := range []string{fmt.Sprint(s), fmt.Sprintf("%v %+v %#v %s", s, s, s, s), logged.String()} {
		if strings.Contains(out, secretKey) || strings.Contains(out, accessKey) {
			t.Errorf("credentials shown: %s", out)
		}
		if !strings.Contains(out, "http://h:1") {
			t.Errorf("endpoint not shown: %s", out)
		}
	}
}

func TestURLMuxRefuses(t *testing.T) {
	ctx := context.Background()
	t.Setenv("AZURE_STORAGE_ACCOUNT", "")
	mux := objstore.NewURLMux(objstore.WithS3(objstore.S3{Endpoint: "http://127.0.0.1:1", AccessKey: accessKey, SecretKey: secretKey}),
		objstore.WithGCS(objstore.GCS{RootURL: "http://127.0.0.1:1/"}))
	for url, want := range map[string]string{
		"s3://bucket/ckpt?endpoint=http://x:1":                      `unknown URL parameter "endpoint"`,
		"gs://bucket/ckpt?endpoint=http://x:1":                      "a gs:// URL takes no parameters",
		"azblob://container/ckpt?endpoint=x":                        `unknown query parameter "endpoint"`,
		"azblob://container/ckpt?storage_account=a&protocol=gopher": `invalid protocol "gopher"`,
		"azblob://container/ckpt":                                   "AccountName is required",
	} {
		b, err := mux.OpenBucket(ctx, url)
		if err == nil {
			b.Close()
			t.Errorf("%s opened", url)
			continue
		}
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want it to say %q", url, err, want)
		}
	}
	half := objstore.NewURLMux(objstore.WithS3(objstore.S3{Endpoint: "http://127.0.0.1:1", SecretKey: secretKey}))
	if _, err := half.OpenBucket(ctx, "s3://bucket"); err == nil || !strings.Contains(err.Error(), "s3.access-key and s3.secret-key") ||
		strings.Contains(err.Error(), secretKey) {
		t.Errorf("a secret key without an access key: %v", err)
	}
}

// Against a real server: a wrong secret key fails with an error that
// shows neither key, and the right one reads and writes.
func TestS3Credentials(t *testing.T) {
	srv := s3test.Env(t)
	ctx := context.Background()
	prefix := srv.Prefix(t)

	wrong := srv.S3
	wrong.SecretKey = secretKey
	b, err := objstore.NewURLMux(objstore.WithS3(wrong)).OpenBucket(ctx, "s3://"+srv.Bucket)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	err = b.WriteAll(ctx, prefix+"x", []byte("x"), nil)
	if err == nil {
		t.Fatal("a write with a wrong secret key succeeded")
	}
	if strings.Contains(err.Error(), secretKey) || strings.Contains(err.Error(), srv.S3.SecretKey) {
		t.Fatalf("the error shows a secret key: %v", err)
	}

	good := srv.OpenBucket(t)
	if err := good.WriteAll(ctx, prefix+"x", []byte("x"), nil); err != nil {
		t.Fatal(err)
	}
	if got, err := good.ReadAll(ctx, prefix+"x"); err != nil || string(got) != "x" {
		t.Fatalf("read back %q, %v", got, err)
	}
}

// Transient errors are retried: with every third request answered
// 503 Slow Down (as S3 answers when throttling), small objects and a
// multipart upload still go in and come back whole.
func TestS3RetriesTransientErrors(t *testing.T) {
	srv := s3test.Env(t)
	ctx := context.Background()
	prefix := srv.Prefix(t)
	target, err := url.Parse(srv.S3.Endpoint)
	if err != nil {
		t.Fatal(err)
	}
	var requests, refused atomic.Int64
	rp := httputil.NewSingleHostReverseProxy(target)
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if requests.Add(1)%3 == 0 {
			refused.Add(1)
			// The request's body is not read: the client must send it
			// again.
			w.Header().Set("Content-Type", "application/xml")
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprint(w, `<?xml version="1.0" encoding="UTF-8"?><Error><Code>SlowDown</Code><Message>Please reduce your request rate.</Message></Error>`)
			return
		}
		rp.ServeHTTP(w, r)
	}))
	defer proxy.Close()
	s := srv.S3
	s.Endpoint = proxy.URL
	b, err := objstore.NewURLMux(objstore.WithS3(s)).OpenBucket(ctx, "s3://"+srv.Bucket)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()

	roundTrip(t, b, prefix)
	if refused.Load() == 0 {
		t.Fatal("no request was refused: the test tested nothing")
	}
	t.Logf("%d requests, %d answered 503 and retried", requests.Load(), refused.Load())
}

// roundTrip writes a small object, one larger than a part, chunk or block
// (20 MiB), and a small one again under prefix, and reads each back whole.
func roundTrip(t *testing.T, b *blob.Bucket, prefix string) {
	t.Helper()
	ctx := context.Background()
	big := bytes.Repeat([]byte("0123456789abcdef"), (20<<20)/16+3)
	for i, data := range [][]byte{[]byte("small"), big, []byte("small again")} {
		key := fmt.Sprintf("%sobj-%d", prefix, i)
		if err := b.WriteAll(ctx, key, data, &blob.WriterOptions{ContentType: "application/octet-stream"}); err != nil {
			t.Fatalf("write %s: %v", key, err)
		}
		got, err := b.ReadAll(ctx, key)
		if err != nil {
			t.Fatalf("read %s: %v", key, err)
		}
		if !bytes.Equal(got, data) {
			t.Fatalf("%s: read %d bytes back, wrote %d", key, len(got), len(data))
		}
	}
}
