// Package objstore opens the buckets that checkpoint storage reads and
// writes through gocloud.dev/blob, configured with Flink's option names.
//
// URLMux returns a mux with file://, mem:// and s3:// registered. s3://
// goes through gocloud.dev/blob/s3blob (the AWS SDK for Go v2) with the
// endpoint, credentials and addressing style of the s3.* options. gs://
// and azblob:// are refused with an error that says so, instead of being
// accepted and failing later.
//
// What the AWS SDK already does is not done again here:
//   - Retries: every request goes through the SDK's standard retryer, 3
//     attempts with exponential back-off and jitter, on throttling, 5xx
//     answers, timeouts and connection errors (a server that is briefly
//     down). AWS_MAX_ATTEMPTS and AWS_RETRY_MODE change it, as for any
//     program built on the SDK. A failure past the retries fails the
//     checkpoint (or the restore), which the job's tolerable checkpoint
//     failures and restart strategy then handle.
//   - Multipart upload: s3blob writes through the SDK's transfer manager,
//     which sends an object larger than one part (8 MiB) as a multipart
//     upload of 8 MiB parts, uploaded concurrently and retried per part,
//     and aborts the upload when the write is cancelled, so a state file
//     appears whole or not at all.
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
	"gocloud.dev/blob/fileblob"
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

// URLMux returns a mux that opens file:// and mem:// buckets and s3://
// buckets configured by c's s3.* options, for storage.URLMux.
func URLMux(c *config.Configuration) *blob.URLMux {
	return NewURLMux(S3FromConfig(c))
}

// NewURLMux returns a mux that opens file:// and mem:// buckets, s3://
// buckets as s says, and refuses gs:// and azblob://.
func NewURLMux(s S3) *blob.URLMux {
	m := new(blob.URLMux)
	m.RegisterBucket(fileblob.Scheme, &fileblob.URLOpener{})
	m.RegisterBucket(memblob.Scheme, &memblob.URLOpener{})
	m.RegisterBucket(s3blob.Scheme, &s3Opener{cfg: s})
	for _, scheme := range []string{"gs", "azblob"} {
		m.RegisterBucket(scheme, unsupported(scheme))
	}
	return m
}

// unsupported refuses a scheme gocloud has a driver for that weir does
// not build in.
type unsupported string

func (u unsupported) OpenBucketURL(context.Context, *url.URL) (*blob.Bucket, error) {
	return nil, fmt.Errorf("%s:// is not supported: weir stores checkpoints in local directories (or file://) and in S3 or S3-compatible stores (s3://); "+
		"for Google Cloud Storage use s3:// with %s=https://storage.googleapis.com and an HMAC key", string(u), config.KeyS3Endpoint)
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
