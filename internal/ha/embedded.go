package ha

import (
	"fmt"
	"net"
	"net/url"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
)

// Server is a single-member etcd server run inside this process
// (go.etcd.io/etcd/server/v3/embed), for trying high availability on one
// machine ("weir etcd") and for tests. A production cluster runs etcd on
// its own, with three or five members.
type Server struct {
	etcd *embed.Etcd
	// Endpoint is where clients reach it, host:port.
	Endpoint string
}

// ServerOption configures StartServer.
type ServerOption func(*embed.Config)

// ServerLogLevel sets etcd's log level: debug, info, warn, error (the
// default), panic or fatal. Tests choose panic: closing etcd logs errors.
func ServerLogLevel(level string) ServerOption { return func(c *embed.Config) { c.LogLevel = level } }

// StartServer starts a one-member etcd keeping its data in dir, serving
// clients on clientAddr and its (unused) peer port on peerAddr, both
// host:port; port 0 picks a free one. It returns once etcd serves.
func StartServer(dir, clientAddr, peerAddr string, opts ...ServerOption) (*Server, error) {
	var err error
	if clientAddr, err = freeAddr(clientAddr); err != nil {
		return nil, err
	}
	if peerAddr, err = freeAddr(peerAddr); err != nil {
		return nil, err
	}
	cfg := embed.NewConfig()
	cfg.Name = "weir"
	cfg.Dir = dir
	cu := url.URL{Scheme: "http", Host: clientAddr}
	pu := url.URL{Scheme: "http", Host: peerAddr}
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{cu}, []url.URL{cu}
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{pu}, []url.URL{pu}
	cfg.InitialCluster = cfg.Name + "=" + pu.String()
	cfg.LogLevel = "error"
	for _, o := range opts {
		o(cfg)
	}
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		return nil, fmt.Errorf("ha: starting etcd in %s: %w", dir, err)
	}
	select {
	case <-e.Server.ReadyNotify():
	case err := <-e.Err():
		e.Close()
		return nil, fmt.Errorf("ha: starting etcd: %w", err)
	case <-time.After(time.Minute):
		e.Close()
		return nil, fmt.Errorf("ha: etcd in %s did not start within a minute", dir)
	}
	return &Server{etcd: e, Endpoint: clientAddr}, nil
}

// Err receives the server's fatal errors.
func (s *Server) Err() <-chan error { return s.etcd.Err() }

// Close stops the server.
func (s *Server) Close() { s.etcd.Close() }

// freeAddr resolves port 0 of addr to a port free now.
func freeAddr(addr string) (string, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", fmt.Errorf("ha: address %q: %w", addr, err)
	}
	if port != "0" {
		return addr, nil
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		return "", fmt.Errorf("ha: finding a free port on %s: %w", host, err)
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}
