package objstore

import (
	"context"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"strings"

	"cloud.google.com/go/storage"
	"gocloud.dev/blob"
	"gocloud.dev/blob/gcsblob"
	"google.golang.org/api/option"

	"github.com/weirstream/weir/config"
)

// GCS is the configuration of gs:// buckets: the gs.* options.
type GCS struct {
	// RootURL is the root URL of the Cloud Storage JSON API, such as an
	// emulator's http://127.0.0.1:4443/; "" is Google's.
	RootURL string
	// KeyFile is the path of a service account's JSON key; "" uses
	// Application Default Credentials, or none when RootURL is set and
	// GOOGLE_APPLICATION_CREDENTIALS is not.
	KeyFile string
}

// GCSFromConfig returns the gs.* options of c.
func GCSFromConfig(c *config.Configuration) GCS {
	return GCS{
		RootURL: c.String(config.KeyGSStorageRootURL),
		KeyFile: c.String(config.KeyGSServiceAccountKeyFile),
	}
}

// LogValue logs g: a key file's path, never its content.
func (g GCS) LogValue() slog.Value {
	return slog.GroupValue(slog.String("root_url", g.RootURL), slog.String("key_file", g.KeyFile))
}

// gcsMaxAttempts bounds the attempts of one Cloud Storage call.
const gcsMaxAttempts = 4

// gcsOpener opens gs://bucket URLs.
type gcsOpener struct {
	cfg GCS
}

// OpenBucketURL opens the bucket u's host names, through the JSON API.
func (o *gcsOpener) OpenBucketURL(ctx context.Context, u *url.URL) (*blob.Bucket, error) {
	if u.RawQuery != "" {
		return nil, fmt.Errorf("gs://%s: a gs:// URL takes no parameters (%q); the API's root URL and credentials are the options %s and %s",
			u.Host, u.RawQuery, config.KeyGSStorageRootURL, config.KeyGSServiceAccountKeyFile)
	}
	var opts []option.ClientOption
	switch {
	case o.cfg.KeyFile != "":
		if _, err := os.Stat(o.cfg.KeyFile); err != nil {
			return nil, fmt.Errorf("gs://%s: %s: %w", u.Host, config.KeyGSServiceAccountKeyFile, err)
		}
		opts = append(opts, option.WithAuthCredentialsFile(option.ServiceAccount, o.cfg.KeyFile))
	case o.cfg.RootURL != "" && os.Getenv("GOOGLE_APPLICATION_CREDENTIALS") == "":
		// An emulator (fake-gcs-server, the storage testbench) takes no
		// credentials; Google's API refuses a request without them, so
		// nothing is exposed by not sending any.
		opts = append(opts, option.WithoutAuthentication())
	}
	if o.cfg.RootURL != "" {
		// Reads go through the JSON API too, rather than the XML API's
		// host-style addresses, which a root URL cannot redirect.
		opts = append(opts, option.WithEndpoint(strings.TrimSuffix(o.cfg.RootURL, "/")+"/storage/v1/"), storage.WithJSONReads())
	}
	client, err := storage.NewClient(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("gs://%s: %w (without %s, credentials are Google's Application Default Credentials: set GOOGLE_APPLICATION_CREDENTIALS)",
			u.Host, err, config.KeyGSServiceAccountKeyFile)
	}
	// Checkpoint storage writes each object once under a name of its own,
	// so retrying an upload cannot overwrite anything but its own bytes.
	// The client's back-off (1 s, doubling, up to 30 s) is kept; its
	// attempts are bounded, as the AWS SDK's are, so that an outage fails
	// the checkpoint rather than holding it until it expires.
	client.SetRetry(storage.WithPolicy(storage.RetryAlways), storage.WithMaxAttempts(gcsMaxAttempts))
	b, err := gcsblob.OpenBucket(ctx, nil, u.Host, &gcsblob.Options{Client: client})
	if err != nil {
		client.Close()
		return nil, fmt.Errorf("gs://%s: %w", u.Host, err)
	}
	return b, nil
}
