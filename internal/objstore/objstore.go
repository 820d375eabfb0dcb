// Package objstore opens the buckets that checkpoint storage reads and
// writes through gocloud.dev/blob, configured with Flink's option names.
//
// URLMux returns a mux with file://, mem://, s3://, gs:// and azblob://
// registered:
//   - s3:// goes through gocloud.dev/blob/s3blob (the AWS SDK for Go v2)
//     with the endpoint, credentials and addressing style of the s3.*
//     options.
//   - gs:// goes through gocloud.dev/blob/gcsblob (cloud.google.com/go/storage)
//     with the root URL and key file of the gs.* options, else Google's
//     Application Default Credentials.
//   - azblob:// goes through gocloud.dev/blob/azureblob (the Azure SDK for
//     Go) configured as every Go CDK program is: the account and
//     credentials from AZURE_STORAGE_ACCOUNT with AZURE_STORAGE_KEY,
//     AZURE_STORAGE_SAS_TOKEN or AZURE_STORAGE_CONNECTION_STRING, else
//     Azure's default credential chain; the URL's storage_account, domain,
//     protocol and localemu parameters override the service address.
//
// What the clouds' SDKs already do is not done again here:
//   - Retries: every S3 request goes through the AWS SDK's standard
//     retryer, 3 attempts with exponential back-off and jitter, on
//     throttling, 5xx answers, timeouts and connection errors (a server
//     that is briefly down); AWS_MAX_ATTEMPTS and AWS_RETRY_MODE change it.
//     The GCS client retries with exponential back-off on the same errors;
//     weir lets it retry uploads too (storage.RetryAlways), which is safe
//     because checkpoint storage writes every object once, under a name of
//     its own, and reads its checksum back. The Azure SDK's retry policy
//     (3 retries, exponential back-off) covers azblob://. A failure past
//     the retries fails the checkpoint (or the restore), which the job's
//     tolerable checkpoint failures and restart strategy then handle.
//   - Large objects: s3blob writes through the SDK's transfer manager,
//     which sends an object larger than one part (8 MiB) as a multipart
//     upload of 8 MiB parts, uploaded concurrently and retried per part,
//     and aborts the upload when the write is cancelled; gcsblob uploads
//     a large object as a resumable upload in chunks; azureblob stages a
//     block blob's blocks and commits the list at the end. In each, an
//     object appears whole or not at all.
package objstore

import (
	"context"
	"fmt"
	"log/slog"
	"net/url"
	"slices"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"gocloud.dev/blob"
	"gocloud.dev/blob/azureblob"
	"gocloud.dev/blob/fileblob"
	"gocloud.dev/blob/gcsblob"
	"gocloud.dev/blob/memblob"
	"gocloud.dev/blob/s3blob"

	"github.com/weirstream/weir/config"
)

// S3 is the configuration of s3:// buckets: Flink's s3.* options. Its
// String, GoString and LogValue hide the credentials, so printing or
// logging it shows none.
type S3 struct {
	// Endpoint is the URL of an S3-compatible server; "" is AWS.
	Endpoint string
	// AccessKey and SecretKey are static credentials; both "" use the
	// AWS SDK's default credential chain.
	AccessKey, SecretKey string
	// PathStyle addresses buckets as endpoint/bucket/key.
	PathStyle bool
}

// S3FromConfig returns the s3.* options of c.
func S3FromConfig(c *config.Configuration) S3 {
	return S3{
		Endpoint:  c.String(config.KeyS3Endpoint),
		AccessKey: c.String(config.KeyS3AccessKey),
		SecretKey: c.String(config.KeyS3SecretKey),
		PathStyle: c.Bool(config.KeyS3PathStyleAccess),
	}
}

func (s S3) credentials() string {
	if s.AccessKey != "" || s.SecretKey != "" {
		return "static (hidden)"
	}
	return "AWS default chain"
}

// String describes s without its credentials.
func (s S3) String() string {
	ep := s.Endpoint
	if ep == "" {
		ep = "AWS"
	}
	return fmt.Sprintf("S3{endpoint: %s, path style: %t, credentials: %s}", ep, s.PathStyle, s.credentials())
}

// GoString is String, so that %#v hides the credentials too.
func (s S3) GoString() string { return s.String() }

// LogValue logs s without its credentials.
func (s S3) LogValue() slog.Value {
	return slog.GroupValue(
		slog.String("endpoint", s.Endpoint),
		slog.Bool("path_style", s.PathStyle),
		slog.String("credentials", s.credentials()),
	)
}

// URLMux returns a mux that opens file://, mem://, s3://, gs:// and
// azblob:// buckets configured by c's s3.* and gs.* options, for
// storage.URLMux.
func URLMux(c *config.Configuration) *blob.URLMux {
	return NewURLMux(WithS3(S3FromConfig(c)), WithGCS(GCSFromConfig(c)))
}

// An Option configures the buckets a mux opens.
type Option func(*muxConfig)

type muxConfig struct {
	s3  S3
	gcs GCS
}

// WithS3 configures s3:// buckets; without it they use AWS and the AWS
// SDK's default credential chain.
func WithS3(s S3) Option { return func(c *muxConfig) { c.s3 = s } }

// WithGCS configures gs:// buckets; without it they use Google's API and
// Application Default Credentials.
func WithGCS(g GCS) Option { return func(c *muxConfig) { c.gcs = g } }

// NewURLMux returns a mux that opens file://, mem://, s3://, gs:// and
// azblob:// buckets as opts say.
func NewURLMux(opts ...Option) *blob.URLMux {
	var c muxConfig
	for _, o := range opts {
		o(&c)
	}
	m := new(blob.URLMux)
	m.RegisterBucket(fileblob.Scheme, &fileblob.URLOpener{})
	m.RegisterBucket(memblob.Scheme, &memblob.URLOpener{})
	m.RegisterBucket(s3blob.Scheme, &s3Opener{cfg: c.s3})
	m.RegisterBucket(gcsblob.Scheme, &gcsOpener{cfg: c.gcs})
	m.RegisterBucket(azureblob.Scheme, azureOpener{})
	return m
}

// urlParams are the query parameters an s3:// URL may carry.
var urlParams = []string{"region"}

// s3Opener opens s3://bucket?region=... URLs.
type s3Opener struct {
	cfg S3
}

// OpenBucketURL opens the bucket u's host names. The region is u's
// region parameter, else the AWS SDK's (AWS_REGION, the shared config),
// else, with an endpoint set, us-east-1, which S3-compatible servers
// accept.
func (o *s3Opener) OpenBucketURL(ctx context.Context, u *url.URL) (*blob.Bucket, error) {
	q := u.Query()
	for k := range q {
		if !slices.Contains(urlParams, k) {
			return nil, fmt.Errorf("s3://%s: unknown URL parameter %q: an s3:// URL takes only region; the endpoint, credentials and addressing are the options %s, %s, %s and %s",
				u.Host, k, config.KeyS3Endpoint, config.KeyS3AccessKey, config.KeyS3SecretKey, config.KeyS3PathStyleAccess)
		}
	}
	if (o.cfg.AccessKey == "") != (o.cfg.SecretKey == "") {
		return nil, fmt.Errorf("s3://%s: %s and %s are set together or not at all (neither uses the AWS default credential chain)",
			u.Host, config.KeyS3AccessKey, config.KeyS3SecretKey)
	}
	var loadOpts []func(*awsconfig.LoadOptions) error
	if r := q.Get("region"); r != "" {
		loadOpts = append(loadOpts, awsconfig.WithRegion(r))
	}
	if o.cfg.AccessKey != "" {
		loadOpts = append(loadOpts, awsconfig.WithCredentialsProvider(
			credentials.NewStaticCredentialsProvider(o.cfg.AccessKey, o.cfg.SecretKey, "")))
	}
	awsCfg, err := awsconfig.LoadDefaultConfig(ctx, loadOpts...)
	if err != nil {
		return nil, fmt.Errorf("s3://%s: loading the AWS configuration: %w", u.Host, err)
	}
	if awsCfg.Region == "" {
		if o.cfg.Endpoint == "" {
			return nil, fmt.Errorf("s3://%s: no AWS region: set AWS_REGION or add ?region=... to the URL", u.Host)
		}
		awsCfg.Region = "us-east-1"
	}
	client := s3.NewFromConfig(awsCfg, func(so *s3.Options) {
		if o.cfg.Endpoint != "" {
			so.BaseEndpoint = aws.String(o.cfg.Endpoint)
		}
		so.UsePathStyle = o.cfg.PathStyle
		// Reading an object uploaded in parts, the SDK cannot check its
		// checksum and says so on stderr, every time. Checkpoint
		// storage checks every state file's CRC-32C itself.
		so.DisableLogOutputChecksumValidationSkipped = true
	})
	b, err := s3blob.OpenBucket(ctx, client, u.Host, &s3blob.Options{
		// The transfer manager that uploads does not take this from the
		// client; without it, it would not follow
		// AWS_REQUEST_CHECKSUM_CALCULATION.
		RequestChecksumCalculation: awsCfg.RequestChecksumCalculation,
	})
	if err != nil {
		return nil, fmt.Errorf("s3://%s: %w", u.Host, err)
	}
	return b, nil
}
