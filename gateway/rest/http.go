package rest

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"
)

// Options configure the HTTP listener.
type Options struct {
	// Ready reports whether the whole node serves traffic; /readyz is 200
	// only while it returns nil.
	Ready func() error
	// Metrics serves /metrics; nil leaves it unregistered.
	Metrics http.Handler
	Logger  *slog.Logger
}

// Server is the HTTP listener.
type Server struct {
	mux  *http.ServeMux
	srv  *http.Server
	opts Options
}

// New builds the HTTP server with the operational endpoints registered.
func New(o Options) *Server {
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	s := &Server{mux: http.NewServeMux(), opts: o}
	s.mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		fmt.Fprintln(w, "ok")
	})
	s.mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		if o.Ready != nil {
			if err := o.Ready(); err != nil {
				w.WriteHeader(http.StatusServiceUnavailable)
				fmt.Fprintf(w, "not ready: %v\n", err)
				return
			}
		}
		fmt.Fprintln(w, "ready")
	})
	if o.Metrics != nil {
		s.mux.Handle("GET /metrics", o.Metrics)
	}
	s.srv = &http.Server{
		Handler:           s.mux,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		ErrorLog:          slog.NewLogLogger(o.Logger.Handler(), slog.LevelWarn),
	}
	return s
}

// Handle registers an extra handler (REST API, OpenAPI document).
func (s *Server) Handle(pattern string, h http.Handler) { s.mux.Handle(pattern, h) }

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
