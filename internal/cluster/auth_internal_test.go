package cluster

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// TestAuthenticatorRefusesReplaysAndSkew: a credential is good once, for
// its method only, within authWindow of the job manager's clock; the
// nonces it remembers are dropped once their window has passed.
func TestAuthenticatorRefusesReplaysAndSkew(t *testing.T) {
	tok := []byte("tok")
	a := newAuthenticator(string(tok), slog.New(slog.DiscardHandler))
	now := time.Unix(1_700_000_000, 0)
	a.now = func() time.Time { return now }
	call := func(cred, method string) error {
		_, err := a.check(metadata.NewIncomingContext(context.Background(), metadata.Pairs("authorization", cred)), method)
		return err
	}
	refused := func(err error, why string) bool {
		return status.Code(err) == codes.Unauthenticated && strings.Contains(err.Error(), why)
	}

	cred, _ := credential(tok, "/m", now)
	if err := call(cred, "/m"); err != nil {
		t.Fatalf("a fresh credential: %v", err)
	}
	if err := call(cred, "/m"); !refused(err, "replayed") {
		t.Errorf("the same credential again: %v", err)
	}
	other, _ := credential(tok, "/m", now)
	if err := call(other, "/other"); !refused(err, "does not match") {
		t.Errorf("a credential for another method: %v", err)
	}
	for _, d := range []time.Duration{-authWindow - time.Minute, authWindow + time.Minute} {
		skewed, _ := credential(tok, "/m", now.Add(d))
		if err := call(skewed, "/m"); !refused(err, "off the job manager's clock") {
			t.Errorf("a credential %s off: %v", d, err)
		}
	}
	forged, _ := credential([]byte("other"), "/m", now)
	if err := call(forged, "/m"); !refused(err, "does not match") {
		t.Errorf("a credential made with another token: %v", err)
	}
	if err := call("Bearer tok", "/m"); !refused(err, "malformed") || strings.Contains(err.Error(), "tok ") {
		t.Errorf("a bearer token: %v", err)
	}

	now = now.Add(2*authWindow + time.Minute)
	later, _ := credential(tok, "/m", now)
	if err := call(later, "/m"); err != nil {
		t.Fatalf("a later credential: %v", err)
	}
	if len(a.seen) != 1 {
		t.Errorf("%d nonces remembered after the window passed, want 1", len(a.seen))
	}
}
