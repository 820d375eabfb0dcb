package ha

import (
	"context"
	"fmt"
	"io"
	"net/url"
	"strings"

	"gocloud.dev/blob"
	"gocloud.dev/blob/fileblob"
)

// blobDir is high-availability.storageDir: where a job too big for the
// coordination store goes, a local path or a URL that gocloud.dev/blob
// opens.
type blobDir struct {
	path string
	// mux opens URLs, with the object stores' options (s3.*, gs.*); nil
	// is gocloud's default mux, which knows none of them.
	mux *blob.URLMux
}

func (d blobDir) set() bool { return d.path != "" }

func (d blobDir) bucket(ctx context.Context) (*blob.Bucket, error) {
	if strings.Contains(d.path, "://") {
		mux := d.mux
		if mux == nil {
			mux = blob.DefaultURLMux()
		}
		// gocloud opens the bucket a URL's host names; its path is a
		// directory in it.
		u, err := url.Parse(d.path)
		if err != nil {
			return nil, err
		}
		prefix := strings.Trim(u.Path, "/")
		u.Path, u.RawPath = "", ""
		b, err := mux.OpenBucket(ctx, u.String())
		if err != nil || prefix == "" {
			return b, err
		}
		return blob.PrefixedBucket(b, prefix+"/"), nil
	}
	return fileblob.OpenBucket(d.path, &fileblob.Options{CreateDir: true, NoTempDir: true})
}

func (d blobDir) write(ctx context.Context, key string, data []byte) error {
	b, err := d.bucket(ctx)
	if err != nil {
		return fmt.Errorf("ha: opening high-availability.storageDir %s: %w", d.path, err)
	}
	defer b.Close()
	if err := b.WriteAll(ctx, key, data, nil); err != nil {
		return fmt.Errorf("ha: writing %s to high-availability.storageDir: %w", key, err)
	}
	return nil
}

func (d blobDir) read(ctx context.Context, key string) ([]byte, error) {
	b, err := d.bucket(ctx)
	if err != nil {
		return nil, fmt.Errorf("opening high-availability.storageDir %s: %w", d.path, err)
	}
	defer b.Close()
	data, err := b.ReadAll(ctx, key)
	if err != nil {
		return nil, fmt.Errorf("reading %s from high-availability.storageDir: %w", key, err)
	}
	return data, nil
}

func (d blobDir) remove(ctx context.Context, key string) error {
	b, err := d.bucket(ctx)
	if err != nil {
		return err
	}
	defer b.Close()
	return b.Delete(ctx, key)
}

// list returns the keys under prefix.
func (d blobDir) list(ctx context.Context, prefix string) ([]string, error) {
	b, err := d.bucket(ctx)
	if err != nil {
		return nil, err
	}
	defer b.Close()
	var keys []string
	it := b.List(&blob.ListOptions{Prefix: prefix})
	for {
		o, err := it.Next(ctx)
		if err == io.EOF {
			return keys, nil
		}
		if err != nil {
			return nil, err
		}
		if !o.IsDir {
			keys = append(keys, o.Key)
		}
	}
}
