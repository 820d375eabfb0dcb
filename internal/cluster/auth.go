package cluster

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"github.com/weirstream/weir/config"
)

// With a token (cluster.auth-token), every call to the job manager, and
// every task manager's session, is authenticated both ways without the
// token crossing the wire. The caller sends, in the "authorization"
// metadata,
//
//	WEIR-HMAC-SHA256 <unix seconds>:<nonce, hex>:<HMAC of the method, time and nonce, hex>
//
// and the job manager accepts the call if the HMAC matches its token, the
// time is within authWindow of its clock and the nonce is new to it, so a
// recorded credential can be neither reused nor moved to another method.
// It answers with a proof of its own in the "weir-auth-proof" header, an
// HMAC of the method and the caller's nonce, which the caller checks
// before it trusts the answer.
const (
	authScheme  = "WEIR-HMAC-SHA256"
	proofHeader = "weir-auth-proof"
	// authWindow is how far a credential's time may be from the job
	// manager's clock.
	authWindow = 5 * time.Minute
)

// ErrAuth is wrapped by the errors of a call or a session that failed
// authentication: the caller and the job manager do not hold the same
// cluster.auth-token (or one of them has none).
var ErrAuth = errors.New("authentication failed")

// mac returns the HMAC-SHA256 keyed by token of label and the parts, each
// prefixed by its length.
func mac(token []byte, label string, parts ...string) []byte {
	m := hmac.New(sha256.New, token)
	var b []byte
	for _, p := range append([]string{label}, parts...) {
		b = binary.AppendUvarint(b, uint64(len(p)))
		b = append(b, p...)
	}
	m.Write(b)
	return m.Sum(nil)
}

func macEqual(a, b []byte) bool { return subtle.ConstantTimeCompare(a, b) == 1 }

// credential returns the authorization metadata value of a call to method
// at now, and its nonce.
func credential(token []byte, method string, now time.Time) (value, nonce string) {
	var n [16]byte
	_, _ = rand.Read(n[:]) // never fails, as crypto/rand documents
	nonce = hex.EncodeToString(n[:])
	ts := strconv.FormatInt(now.Unix(), 10)
	return authScheme + " " + ts + ":" + nonce + ":" + hex.EncodeToString(mac(token, "weir call", method, ts, nonce)), nonce
}

// serverProof is the job manager's answer to a call to method with nonce.
func serverProof(token []byte, method, nonce string) string {
	return hex.EncodeToString(mac(token, "weir job manager", method, nonce))
}

// authenticator checks the credentials of the calls a job manager serves.
type authenticator struct {
	token []byte
	log   *slog.Logger
	now   func() time.Time

	mu sync.Mutex
	// seen holds the nonces of accepted calls until their time leaves the
	// window, in Unix seconds.
	seen      map[string]int64
	lastSweep time.Time
}

func newAuthenticator(token string, log *slog.Logger) *authenticator {
	return &authenticator{token: []byte(token), log: log, now: time.Now, seen: map[string]int64{}}
}

// check authenticates a call to method and returns its nonce. The error
// is an Unauthenticated status saying what is wrong, never with a secret.
func (a *authenticator) check(ctx context.Context, method string) (string, error) {
	nonce, reason := a.verify(ctx, method)
	if reason == "" {
		return nonce, nil
	}
	remote := "unknown"
	if p, ok := peer.FromContext(ctx); ok && p.Addr != nil {
		remote = p.Addr.String()
	}
	a.log.Warn("refused a call that failed authentication", "method", method, "remote", remote, "reason", reason)
	return "", status.Errorf(codes.Unauthenticated, "%s; set %s to the job manager's token", reason, config.KeyClusterAuthToken)
}

// verify returns the call's nonce, or why its credential is refused.
func (a *authenticator) verify(ctx context.Context, method string) (nonce, reason string) {
	md, _ := metadata.FromIncomingContext(ctx)
	vals := md.Get("authorization")
	if len(vals) == 0 {
		return "", "the call carries no credential (the caller has no " + config.KeyClusterAuthToken + ")"
	}
	scheme, rest, _ := strings.Cut(vals[0], " ")
	parts := strings.Split(rest, ":")
	if len(vals) != 1 || scheme != authScheme || len(parts) != 3 {
		return "", "malformed credential"
	}
	ts, nonce, sum := parts[0], parts[1], parts[2]
	got, err := hex.DecodeString(sum)
	if err != nil || !macEqual(got, mac(a.token, "weir call", method, ts, nonce)) {
		return "", "the credential does not match the job manager's " + config.KeyClusterAuthToken
	}
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return "", "malformed credential"
	}
	now := a.now()
	if skew := now.Sub(time.Unix(sec, 0)); skew > authWindow || skew < -authWindow {
		return "", fmt.Sprintf("the credential's time is %s off the job manager's clock, more than %s: synchronize the clocks", skew.Round(time.Second), authWindow)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if now.Sub(a.lastSweep) > authWindow {
		for n, exp := range a.seen {
			if exp < now.Unix() {
				delete(a.seen, n)
			}
		}
		a.lastSweep = now
	}
	if _, dup := a.seen[nonce]; dup {
		return "", "the credential was used before: a replayed call"
	}
	a.seen[nonce] = sec + int64(authWindow/time.Second) + 1
	return nonce, ""
}

func (a *authenticator) unary(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	nonce, err := a.check(ctx, info.FullMethod)
	if err != nil {
		return nil, err
	}
	if err := grpc.SetHeader(ctx, metadata.Pairs(proofHeader, serverProof(a.token, info.FullMethod, nonce))); err != nil {
		return nil, err
	}
	return handler(ctx, req)
}

func (a *authenticator) stream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	nonce, err := a.check(ss.Context(), info.FullMethod)
	if err != nil {
		return err
	}
	if err := ss.SetHeader(metadata.Pairs(proofHeader, serverProof(a.token, info.FullMethod, nonce))); err != nil {
		return err
	}
	return handler(srv, ss)
}

// DialOption configures how a client or a task manager connects to the
// job manager.
type DialOption func(*dialOptions)

type dialOptions struct {
	token []byte
}

// WithToken authenticates every call with the cluster's shared secret
// (cluster.auth-token), which the job manager must hold too; the token
// itself is never sent. Empty: no authentication.
func WithToken(tok string) DialOption {
	return func(o *dialOptions) {
		o.token = nil
		if tok != "" {
			o.token = []byte(tok)
		}
	}
}

// grpcDialOptions returns the gRPC options of a connection to the job
// manager at addr.
func grpcDialOptions(addr string, opts []DialOption) []grpc.DialOption {
	var o dialOptions
	for _, f := range opts {
		f(&o)
	}
	if o.token == nil {
		return nil
	}
	c := &callAuth{token: o.token, addr: addr}
	return []grpc.DialOption{grpc.WithUnaryInterceptor(c.unary), grpc.WithStreamInterceptor(c.stream)}
}

// callAuth authenticates the calls of a connection and checks the job
// manager's proofs.
type callAuth struct {
	token []byte
	addr  string
}

// errNoProof is the error of a call whose answer lacks the job manager's
// proof or has a wrong one.
func (c *callAuth) errNoProof() error {
	return fmt.Errorf("%w: the job manager at %s did not prove it holds this %s: it has none, or another",
		ErrAuth, c.addr, config.KeyClusterAuthToken)
}

func (c *callAuth) proofOK(md metadata.MD, method, nonce string) bool {
	v := md.Get(proofHeader)
	if len(v) != 1 {
		return false
	}
	got, err := hex.DecodeString(v[0])
	want, _ := hex.DecodeString(serverProof(c.token, method, nonce))
	return err == nil && macEqual(got, want)
}

func (c *callAuth) unary(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	cred, nonce := credential(c.token, method, time.Now())
	ctx = metadata.AppendToOutgoingContext(ctx, "authorization", cred)
	var hdr metadata.MD
	if err := invoker(ctx, method, req, reply, cc, append(opts, grpc.Header(&hdr))...); err != nil {
		return err
	}
	if !c.proofOK(hdr, method, nonce) {
		return c.errNoProof()
	}
	return nil
}

func (c *callAuth) stream(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	cred, nonce := credential(c.token, method, time.Now())
	ctx = metadata.AppendToOutgoingContext(ctx, "authorization", cred)
	cs, err := streamer(ctx, desc, cc, method, opts...)
	if err != nil {
		return nil, err
	}
	return &authStream{ClientStream: cs, c: c, method: method, nonce: nonce}, nil
}

// authStream checks the job manager's proof before the first message
// received is trusted.
type authStream struct {
	grpc.ClientStream
	c             *callAuth
	method, nonce string
	checked       bool
}

func (s *authStream) RecvMsg(m any) error {
	if !s.checked {
		md, err := s.Header()
		if err != nil {
			return err
		}
		if !s.c.proofOK(md, s.method, s.nonce) {
			// A refused stream ends without headers: its status says why.
			if err := s.ClientStream.RecvMsg(m); err != nil {
				return err
			}
			return s.c.errNoProof()
		}
		s.checked = true
	}
	return s.ClientStream.RecvMsg(m)
}

// authError turns the job manager's refusal of a call to addr into an
// error wrapping ErrAuth; other errors are returned as they are.
func authError(addr string, err error) error {
	if status.Code(err) != codes.Unauthenticated {
		return err
	}
	return fmt.Errorf("%w: the job manager at %s refused the call: %s", ErrAuth, addr, status.Convert(err).Message())
}

// CheckListen enforces the rule on where the job manager's port and the
// data plane may listen: anywhere but a loopback address only with a
// token, since whoever reaches the port could otherwise submit and cancel
// jobs or feed subtasks records.
func CheckListen(addr net.Addr, token string) error {
	if token != "" {
		return nil
	}
	if tcp, ok := addr.(*net.TCPAddr); ok && tcp.IP.IsLoopback() {
		return nil
	}
	return fmt.Errorf("%s is reachable from other machines: set %s (the same on every process of the cluster) to require it of every connection, or listen on a loopback address",
		addr, config.KeyClusterAuthToken)
}
