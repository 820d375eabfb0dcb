package storage

import (
	"context"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

// abortUploads aborts the unfinished multipart uploads of key, if st is
// an S3 bucket. A write is abandoned by cancelling its context, and the
// AWS SDK's transfer manager then tries to abort its multipart upload
// with that cancelled context, which fails: the parts already uploaded
// would stay in the bucket, unseen and billed, until a lifecycle rule
// removes them. Nothing else writes key (each state file and _metadata
// has one writer), so every upload of it is this write's. Errors are
// ignored: the object itself never appeared.
func abortUploads(ctx context.Context, st *store, key string) {
	var client *s3.Client
	if st.loc.scheme != "s3" || !st.bucket.As(&client) {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	out, err := client.ListMultipartUploads(ctx, &s3.ListMultipartUploadsInput{Bucket: aws.String(st.loc.host), Prefix: aws.String(key)})
	if err != nil {
		return
	}
	for _, u := range out.Uploads {
		if aws.ToString(u.Key) != key {
			continue
		}
		_, _ = client.AbortMultipartUpload(ctx, &s3.AbortMultipartUploadInput{Bucket: aws.String(st.loc.host), Key: u.Key, UploadId: u.UploadId})
	}
}
