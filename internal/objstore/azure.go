package objstore

import (
	"context"
	"fmt"
	"net/url"
	"os"

	"github.com/Azure/azure-sdk-for-go/sdk/azidentity"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/container"
	"gocloud.dev/blob"
	"gocloud.dev/blob/azureblob"
)

// azureOpener opens azblob://container URLs as the Go CDK's own opener
// does, but reads the environment at every open rather than once per
// process: the service address from AZURE_STORAGE_ACCOUNT,
// AZURE_STORAGE_DOMAIN, AZURE_STORAGE_PROTOCOL and
// AZURE_STORAGE_IS_LOCAL_EMULATOR, overridden by the URL's
// storage_account, domain, protocol, localemu and cdn parameters; the
// credentials from AZURE_STORAGE_KEY (a shared key), AZURE_STORAGE_SAS_TOKEN,
// AZURE_STORAGE_CONNECTION_STRING, else Azure's default credential chain
// (azidentity: environment, workload identity, managed identity, the CLI).
type azureOpener struct{}

func (azureOpener) OpenBucketURL(ctx context.Context, u *url.URL) (*blob.Bucket, error) {
	o := &azureblob.URLOpener{
		MakeClient:        azureClient,
		ServiceURLOptions: *azureblob.NewDefaultServiceURLOptions(),
	}
	b, err := o.OpenBucketURL(ctx, u)
	if err != nil {
		return nil, fmt.Errorf("azblob://%s: %w (the account and credentials come from AZURE_STORAGE_ACCOUNT with AZURE_STORAGE_KEY, "+
			"AZURE_STORAGE_SAS_TOKEN or AZURE_STORAGE_CONNECTION_STRING, else Azure's default credential chain; "+
			"the URL may set storage_account, domain, protocol, localemu and cdn)", u.Host, err)
	}
	return b, nil
}

// azureClient returns a client of the container at svcURL with the
// credentials the environment gives.
func azureClient(svcURL azureblob.ServiceURL, name azureblob.ContainerName) (*container.Client, error) {
	containerURL, err := url.JoinPath(string(svcURL), string(name))
	if err != nil {
		return nil, err
	}
	account, key := os.Getenv("AZURE_STORAGE_ACCOUNT"), os.Getenv("AZURE_STORAGE_KEY")
	conn := os.Getenv("AZURE_STORAGE_CONNECTION_STRING")
	if conn == "" {
		conn = os.Getenv("AZURE_STORAGEBLOB_CONNECTIONSTRING")
	}
	switch {
	case account != "" && key != "":
		cred, err := azblob.NewSharedKeyCredential(account, key)
		if err != nil {
			// The SDK's message would quote the key.
			return nil, fmt.Errorf("AZURE_STORAGE_KEY is not a valid base64 account key")
		}
		return container.NewClientWithSharedKeyCredential(containerURL, cred, nil)
	case os.Getenv("AZURE_STORAGE_SAS_TOKEN") != "":
		// The token is part of svcURL.
		return container.NewClientWithNoCredential(containerURL, nil)
	case conn != "":
		return container.NewClientFromConnectionString(conn, string(name), nil)
	default:
		cred, err := azidentity.NewDefaultAzureCredential(nil)
		if err != nil {
			return nil, fmt.Errorf("no Azure credentials: %w", err)
		}
		return container.NewClient(containerURL, cred, nil)
	}
}
