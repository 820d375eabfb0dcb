// Package storetest holds what the object store test servers (s3test,
// gcstest, azuretest) share.
package storetest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"testing"

	"gocloud.dev/blob"
)

// Prefix returns a fresh key prefix for t, "weir-test/<random>/", and
// deletes the objects under it, in the bucket open opens, when t ends:
// tests sharing one bucket each work under a prefix of their own.
func Prefix(t testing.TB, open func(context.Context) (*blob.Bucket, error)) string {
	t.Helper()
	var r [8]byte
	if _, err := rand.Read(r[:]); err != nil {
		t.Fatal(err)
	}
	p := "weir-test/" + hex.EncodeToString(r[:]) + "/"
	t.Cleanup(func() {
		ctx := context.Background()
		b, err := open(ctx)
		if err != nil {
			t.Logf("storetest: cleaning %s: %v", p, err)
			return
		}
		defer b.Close()
		it := b.List(&blob.ListOptions{Prefix: p})
		for {
			o, err := it.Next(ctx)
			if err != nil {
				return
			}
			_ = b.Delete(ctx, o.Key)
		}
	})
	return p
}
