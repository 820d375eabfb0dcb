package ha

import (
	"context"
	"fmt"
	"strings"

	"gocloud.dev/blob"
	"gocloud.dev/blob/fileblob"
)

// blobDir is high-availability.storageDir: where a job too big for the
// coordination store goes, a local path or a URL that gocloud.dev/blob
// opens.
type blobDir string

func (d blobDir) bucket(ctx context.Context) (*blob.Bucket, error) {
	if strings.Contains(string(d), "://") {
		return blob.OpenBucket(ctx, string(d))
	}
	return fileblob.OpenBucket(string(d), &fileblob.Options{CreateDir: true, NoTempDir: true})
}

func (d blobDir) write(ctx context.Context, key string, data []byte) error {
	b, err := d.bucket(ctx)
	if err != nil {
		return fmt.Errorf("ha: opening high-availability.storageDir %s: %w", string(d), err)
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
		return nil, fmt.Errorf("opening high-availability.storageDir %s: %w", string(d), err)
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
