package httpserver

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"

	"github.com/mqgate/mqgate/gateway/admission"
	"github.com/mqgate/mqgate/gateway/auth"
)

// Options configure the HTTP listener.
type Options struct {
	// Ready reports whether the whole node serves traffic; /readyz is 200
	// only while it returns nil.
	Ready func() error
	// ReadyNotice, when set, is a condition a ready node still has (new
	// messages refused on a full disk): /readyz adds it to its answer.
	ReadyNotice func() string
	Logger      *slog.Logger
	// API is the gRPC connection the REST API (/v1/...) calls: the node's
	// own gRPC server in process (grpcserver.Server.InProcess; any
	// connection serving the services will do). nil serves only the
	// operational endpoints and /openapi.json.
	API grpc.ClientConnInterface
	// MeterProvider and TracerProvider receive the HTTP metrics and spans
	// (nil: OpenTelemetry's globals).
	MeterProvider  metric.MeterProvider
	TracerProvider trace.TracerProvider
	// MaxRequestBytes caps a REST request body; larger ones get 413
	// (default DefaultMaxRequestBytes).
	MaxRequestBytes int64
	// Console, when set, is the web console's handler, served at
	// /console/ (its pages call the REST API under /v1/).
	Console http.Handler
	// MCP, when set, is the Model Context Protocol endpoint, served at
	// /mcp.
	MCP http.Handler
	// Auth, when set, authenticates every REST request from its headers
	// before its body is read (limits.go); the gRPC leg checks what the
	// call touches.
	Auth *auth.Authenticator
	// MaxInFlightBytes bounds the request bodies held at once (0:
	// DefaultMaxInFlightBytes).
	MaxInFlightBytes int64
	// BodyTimeout bounds how long a request body may take to arrive (0:
	// DefaultBodyTimeout).
	BodyTimeout time.Duration
	// HeaderTimeout bounds how long a request's headers may take to
	// arrive, a new connection's first request's included (0:
	// DefaultHeaderTimeout).
	HeaderTimeout time.Duration
}

// DefaultHeaderTimeout is Options.HeaderTimeout when 0.
const DefaultHeaderTimeout = 10 * time.Second

// DefaultMaxRequestBytes fits a send up to the gRPC receive limit (a 4 MiB
// body and envelopes, 6 MiB) in base64, with room for JSON.
const DefaultMaxRequestBytes = 10 << 20

// Server is the HTTP listener.
type Server struct {
	srv         *http.Server
	opts        Options
	maxBody     int64
	budget      *admission.Budget
	bodyTimeout time.Duration
}

// New builds the HTTP server with the operational endpoints, /openapi.json
// and, when o.API is set, the REST API under /v1/.
func New(o Options) (*Server, error) {
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	mux := http.NewServeMux()
	s := &Server{opts: o, maxBody: o.MaxRequestBytes}
	if s.maxBody <= 0 {
		s.maxBody = DefaultMaxRequestBytes
	}
	inflight := o.MaxInFlightBytes
	if inflight <= 0 {
		inflight = DefaultMaxInFlightBytes
	}
	s.budget = admission.NewBudget(inflight)
	s.bodyTimeout = o.BodyTimeout
	if s.bodyTimeout <= 0 {
		s.bodyTimeout = DefaultBodyTimeout
	}
	MountHealth(mux, func() (string, error) {
		if o.Ready == nil {
			return "", nil
		}
		return "", o.Ready()
	}, o.ReadyNotice)
	mux.HandleFunc("GET /openapi.json", serveOpenAPI)
	var api http.Handler
	if o.API != nil {
		var err error
		if api, err = s.newGateway(o.API); err != nil {
			return nil, err
		}
		mux.Handle("/v1/", api)
	}
	if o.Console != nil {
		mux.Handle("/console", o.Console)
		mux.Handle("/console/", o.Console)
	}
	if o.MCP != nil {
		mux.Handle("/mcp", o.MCP)
	}
	s.srv = &http.Server{
		Handler:           canonicalPaths(mux),
		ReadHeaderTimeout: cmp.Or(o.HeaderTimeout, DefaultHeaderTimeout),
		IdleTimeout:       2 * time.Minute,
		ErrorLog:          throttledErrorLog(o.Logger),
	}
	return s, nil
}

// Serve serves lis until Stop; it returns nil after a clean stop.
func (s *Server) Serve(lis net.Listener) error {
	if err := s.srv.Serve(lis); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// Stop stops accepting, waits for in-flight requests until ctx ends, then
// closes what remains.
func (s *Server) Stop(ctx context.Context) error {
	err := s.srv.Shutdown(ctx)
	if err != nil {
		_ = s.srv.Close()
		return fmt.Errorf("HTTP requests still running at the deadline were closed: %w", err)
	}
	return nil
}
