package storage

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

// A state file larger than the transfer manager's 8 MiB part goes up as a
// multipart upload, reads back whole and verified, and an aborted one
// leaves neither an object nor an unfinished upload behind.
func TestS3MultipartState(t *testing.T) {
	be := s3Backend(t)
	ctx := context.Background()
	s := be.open(t)
	const partSize = 8 << 20
	data := payload(7, 2*partSize+12345)

	w, err := s.CreateState(ctx, 1, "big")
	if err != nil {
		t.Fatal(err)
	}
	h := writeState(t, w, data)
	attrs, err := be.raw.Attributes(ctx, be.key("chk-1/big"))
	if err != nil {
		t.Fatal(err)
	}
	// S3 (and the servers that follow it) give a multipart object the
	// ETag "<md5 of the parts' md5s>-<number of parts>".
	if want := fmt.Sprintf("-%d\"", 3); !strings.HasSuffix(attrs.ETag, want) && !strings.HasSuffix(attrs.ETag, strings.TrimSuffix(want, `"`)) {
		t.Fatalf("ETag %s: not a multipart upload of 3 parts", attrs.ETag)
	}
	if attrs.Size != int64(len(data)) {
		t.Fatalf("stored %d bytes, want %d", attrs.Size, len(data))
	}
	got, err := s.ReadState(ctx, h)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, data) {
		t.Fatal("the state read back differs from the state written")
	}

	// A corrupted byte deep in the third part is caught.
	be.mutate(t, "chk-1/big", flip(2*partSize+100))
	if _, err := s.ReadState(ctx, h); err == nil {
		t.Fatal("ReadState of a corrupted multipart object succeeded")
	}

	// An abort after two parts went up.
	w, err = s.CreateState(ctx, 2, "aborted")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write(data); err != nil {
		t.Fatal(err)
	}
	w.Abort()
	if ok, err := be.raw.Exists(ctx, be.key("chk-2/aborted")); err != nil || ok {
		t.Fatalf("aborted state: exists=%t (%v)", ok, err)
	}
	var client *s3.Client
	if !be.raw.As(&client) {
		t.Fatal("the bucket is not s3blob's")
	}
	bucket := strings.TrimPrefix(strings.SplitN(strings.TrimPrefix(be.url, "s3://"), "/", 2)[0], "")
	ups, err := client.ListMultipartUploads(ctx, &s3.ListMultipartUploadsInput{Bucket: aws.String(bucket), Prefix: aws.String(be.key("chk-2/"))})
	if err != nil {
		t.Fatal(err)
	}
	if len(ups.Uploads) != 0 {
		t.Fatalf("the aborted write left %d multipart uploads behind", len(ups.Uploads))
	}
}
