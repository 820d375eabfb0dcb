package storage

import (
	"fmt"

	"gocloud.dev/blob"
)

// DefaultInlineThreshold is the size below which a state is kept inside the
// metadata instead of in a file of its own: 20 KiB, like Flink's
// execution.checkpointing.data-inline-threshold.
const DefaultInlineThreshold = 20 << 10

// An Option configures Open.
type Option func(*config)

type config struct {
	inlineThreshold int
	mux             *blob.URLMux
	bucket          *blob.Bucket
	faults          *Faults
	verifyChecksums bool
}

func defaultConfig() config {
	return config{
		inlineThreshold: DefaultInlineThreshold,
		mux:             blob.DefaultURLMux(),
	}
}

func (c *config) validate() error {
	if c.inlineThreshold < 0 {
		return fmt.Errorf("storage: inline threshold %d is negative", c.inlineThreshold)
	}
	if c.mux == nil {
		return fmt.Errorf("storage: nil URL mux")
	}
	return nil
}

// InlineThreshold sets the size in bytes below which a state is returned
// inline in its StateHandle (and so stored inside _metadata) rather than
// written to a file. Zero writes every state, even an empty one, to a file.
// Default: DefaultInlineThreshold (20 KiB).
func InlineThreshold(n int) Option {
	return func(c *config) { c.inlineThreshold = n }
}

// URLMux sets the gocloud URL mux that opens buckets for URL schemes other
// than file:// (mem://, s3://, gs://, ...). A program adds a scheme by
// importing its driver (for example gocloud.dev/blob/s3blob), which
// registers it with blob.DefaultURLMux, or by registering an opener on its
// own mux and passing it here. Local directories (file:// URLs and plain
// paths) are always opened by this package, which reads them with
// fileblob and writes them itself, durably. Default: blob.DefaultURLMux(),
// which has mem:// and file:// registered.
func URLMux(m *blob.URLMux) Option {
	return func(c *config) { c.mux = m }
}

// Bucket makes Open use b as the bucket its URL names instead of opening
// one: keys are still laid out under the URL's path (for mem://, s3:// and
// the like) or at the bucket's root (for a local directory). Close does not
// close b. Tests use it to share one in-memory bucket between several
// Storages, as a restarted process would share a directory. Resolve and
// CreateSavepoint reuse b for locations in the same bucket. Every write
// goes through b, so it is as durable as b's driver makes it (fileblob:
// not at all; see the package comment). Default: none.
func Bucket(b *blob.Bucket) Option {
	return func(c *config) { c.bucket = b }
}

// WithFaults routes every storage operation through f, which can fail,
// drop, truncate or corrupt chosen reads and writes. For tests. Default:
// none.
func WithFaults(f *Faults) Option {
	return func(c *config) { c.faults = f }
}

// VerifyChecksums makes ReadMetadata, Resolve, Latest and List read every
// state file a checkpoint references and check its CRC-32C, instead of only
// checking that each file exists with the recorded size. It costs a full
// read of the checkpoint. OpenState always verifies what it reads.
// Default: false.
func VerifyChecksums(on bool) Option {
	return func(c *config) { c.verifyChecksums = on }
}
