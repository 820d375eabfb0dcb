package web

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/weirstream/weir/config"
)

// Loopback reports whether host, a bind address, reaches only the local
// machine: "localhost" or a loopback IP address. An empty host, a
// wildcard address (0.0.0.0, ::) and any other name do not.
func Loopback(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(strings.Trim(host, "[]"))
	return ip != nil && ip.IsLoopback()
}

// CheckBind enforces the rule on where the REST API may listen: anywhere
// but a loopback address only with a bearer token.
func CheckBind(host, token string) error {
	if token == "" && !Loopback(host) {
		shown := host
		if shown == "" {
			shown = "(all interfaces)"
		}
		return fmt.Errorf("web: %s=%s is reachable from other machines: set %s to require a bearer token on every request, or bind %s to localhost",
			config.KeyRESTBindAddress, shown, config.KeyRESTAuthToken, config.KeyRESTBindAddress)
	}
	return nil
}

// shutdownTimeout bounds how long stopping waits for requests in flight.
const shutdownTimeout = 2 * time.Second

// Listen serves the API on host:port (port 0: any free port) until stop is
// called or ctx is done, and returns the address it listens on. It refuses
// a non-loopback host unless the server has an auth token (CheckBind).
func (s *Server) Listen(ctx context.Context, host string, port int) (addr string, stop func(), err error) {
	return listen(ctx, s, s.opts, host, port)
}

// listen serves h on host:port as Listen describes.
func listen(ctx context.Context, h http.Handler, opts options, host string, port int) (addr string, stop func(), err error) {
	if err := CheckBind(host, opts.token); err != nil {
		return "", nil, err
	}
	if port < 0 || port > 65535 {
		return "", nil, fmt.Errorf("web: %s=%d is not a port (0 to 65535)", config.KeyRESTPort, port)
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(strings.Trim(host, "[]"), strconv.Itoa(port)))
	if errors.Is(err, syscall.EADDRINUSE) {
		return "", nil, fmt.Errorf("web: listening on %s=%s, %s=%d: %w; another process (another weir?) uses the port: stop it, or choose another port with -D %s=<port> (0 picks a free one)", config.KeyRESTBindAddress, host, config.KeyRESTPort, port, err, config.KeyRESTPort)
	}
	if err != nil {
		return "", nil, fmt.Errorf("web: listening on %s=%s, %s=%d: %w", config.KeyRESTBindAddress, host, config.KeyRESTPort, port, err)
	}
	srv := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 10 * time.Second,
		BaseContext:       func(net.Listener) context.Context { return context.WithoutCancel(ctx) },
	}
	served := make(chan struct{})
	go func() {
		defer close(served)
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			opts.logger.Warn("REST API stopped", "err", err)
		}
	}()
	stopped := make(chan struct{})
	var once sync.Once
	stopFn := func() {
		once.Do(func() {
			close(stopped)
			sctx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
			defer cancel()
			if err := srv.Shutdown(sctx); err != nil {
				srv.Close()
			}
			<-served
		})
	}
	go func() {
		select {
		case <-ctx.Done():
			srv.Close()
		case <-stopped:
		}
	}()
	return ln.Addr().String(), stopFn, nil
}
