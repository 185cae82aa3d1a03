package httpserver

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net"
	"net/http"
	"path"
	"strings"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/mqgate/mqgate/gateway/admission"
	"github.com/mqgate/mqgate/gateway/auth"
	v2 "github.com/mqgate/mqgate/gen/apache/rocketmq/v2"
)

// This file holds what keeps the HTTP listener up under bad, oversized,
// unauthenticated, slow or too many requests. Before a REST request's body
// is read (admit, called by prepare):
//
//   - with auth on, the caller's signature (the Authorization and
//     X-Mq-Date-Time headers the gRPC leg checks again) is verified: an
//     unsigned request is answered 401 without its body being read;
//   - a body announced larger than the limit is answered 413; one that
//     turns out larger is cut at the limit (http.MaxBytesReader, 413);
//   - the body's size (the limit when it is not announced) is reserved in
//     the listener's in-flight budget until the request ends; a request
//     that does not fit is answered 429 with Retry-After;
//   - the body must arrive within BodyTimeout: a slower one is answered
//     408 and its connection closed.
//
// Paths that are not in canonical form ("/v1/../x", "//v1") are answered
// 400 in JSON rather than redirected by the ServeMux.

// DefaultMaxInFlightBytes is the in-flight budget when
// Options.MaxInFlightBytes is 0.
const DefaultMaxInFlightBytes = 64 << 20

// DefaultBodyTimeout is Options.BodyTimeout when 0.
const DefaultBodyTimeout = 30 * time.Second

// retryAfterSeconds is what a request refused for the budget, or answered
// 503 or 429 by the services, is told.
const retryAfterSeconds = "1"

type requestStateKey struct{}

// requestState is what the layers of one REST request share through its
// context, in one allocation (restTelemetry.handler makes it): the
// server's own ResponseWriter, whose connection deadlines
// http.ResponseController sets, the writer and body counters of the
// telemetry (telemetry.go), the route (nameSpan), the HTTP span (nil when
// spans are off) and the body's guard once admit set it.
type requestState struct {
	raw     http.ResponseWriter
	rw      responseRecorder
	body    countedBody
	route   *string
	span    trace.Span
	guard   bodyGuard
	guarded bool
}

func stateOf(r *http.Request) *requestState {
	st, _ := r.Context().Value(requestStateKey{}).(*requestState)
	return st
}

// admit runs the checks above. It returns the request to serve and a
// function to call when it is done, or ok false when it answered the
// request itself.
func (s *Server) admit(w http.ResponseWriter, r *http.Request) (_ *http.Request, done func(), ok bool) {
	if a := s.opts.Auth; a != nil {
		if _, err := a.V2(r.Header.Get("Authorization"), r.Header.Get("X-Mq-Date-Time")); err != nil {
			peer := r.RemoteAddr
			a.Refused(r.Context(), s.opts.Logger, auth.Refusal{Listener: "grpc", Peer: peer + " (REST)", Call: r.Method + " " + r.URL.Path, Err: err})
			writeStatus(w, http.StatusUnauthorized, newStatus(v2.Code_UNAUTHORIZED, err.Error()))
			return nil, nil, false
		}
	}
	if r.ContentLength > s.maxBody {
		writeStatus(w, http.StatusRequestEntityTooLarge, s.tooLargeStatus())
		return nil, nil, false
	}
	if r.Body == nil || r.Body == http.NoBody || r.ContentLength == 0 {
		return r, func() {}, true
	}
	n := r.ContentLength
	if n < 0 {
		n = s.maxBody
	}
	if !s.budget.TryAcquire(n) {
		w.Header().Set("Retry-After", retryAfterSeconds)
		writeStatus(w, http.StatusTooManyRequests, newStatus(v2.Code_TOO_MANY_REQUESTS,
			fmt.Sprintf("the server holds %d MiB of request bodies in flight, its limit; retry later", s.budget.Max()>>20)))
		return nil, nil, false
	}
	st := stateOf(r)
	if st == nil {
		st = &requestState{}
		r = r.WithContext(context.WithValue(r.Context(), requestStateKey{}, st))
	}
	g := &st.guard
	*g = bodyGuard{ReadCloser: http.MaxBytesReader(w, r.Body, s.maxBody), size: r.ContentLength}
	st.guarded = true
	if st.raw != nil {
		rc := http.NewResponseController(st.raw)
		if rc.SetReadDeadline(time.Now().Add(s.bodyTimeout)) == nil {
			g.rc = rc
		}
	}
	r.Body = g
	return r, func() {
		g.clearDeadline()
		s.budget.Release(n)
	}, true
}

// bodyGuard remembers why reading the body failed — the size limit (413
// rather than the decoder's "bad body" 400) or the body deadline (408) —
// and lifts the deadline once the body was read. One goroutine (the
// request's) reads it and handles its error.
type bodyGuard struct {
	io.ReadCloser
	size     int64 // Content-Length, or -1
	rc       *http.ResponseController
	tooLarge bool
	timedOut bool
}

func (g *bodyGuard) Read(p []byte) (int, error) {
	n, err := g.ReadCloser.Read(p)
	if err == nil {
		return n, nil
	}
	if errors.Is(err, io.EOF) {
		// Read whole: the connection goes back to waiting for the next
		// request (and, meanwhile, noticing a client that goes away).
		g.clearDeadline()
	} else {
		g.failed(err)
	}
	return n, err
}

// failed notes why a read failed (apart from EOF, a separate function so
// that the common path allocates nothing for errors.As).
func (g *bodyGuard) failed(err error) {
	var mbe *http.MaxBytesError
	var ne net.Error
	switch {
	case errors.As(err, &mbe):
		g.tooLarge = true
	case errors.As(err, &ne) && ne.Timeout():
		g.timedOut = true
	}
}

// clearDeadline lifts the body deadline, unless it passed: then it stays,
// so that the server's discarding of the unread body fails at once and
// the connection is closed.
func (g *bodyGuard) clearDeadline() {
	if g.rc != nil && !g.timedOut {
		_ = g.rc.SetReadDeadline(time.Time{})
		g.rc = nil
	}
}

func guardOf(r *http.Request) *bodyGuard {
	if st := stateOf(r); st != nil && st.guarded {
		return &st.guard
	}
	return nil
}

func bodyTooLarge(r *http.Request) bool {
	g := guardOf(r)
	return g != nil && g.tooLarge
}

func bodyTimedOut(r *http.Request) bool {
	g := guardOf(r)
	return g != nil && g.timedOut
}

// canonicalPaths answers 400 for a path that is not in canonical form,
// which the ServeMux would otherwise redirect with an HTML page.
func canonicalPaths(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if p := r.URL.Path; p != "" && r.Method != http.MethodConnect && p != cleanPath(p) {
			writeStatus(w, http.StatusBadRequest, newStatus(v2.Code_BAD_REQUEST,
				fmt.Sprintf("path %q is not in canonical form (no '.' or '..' segments, no empty ones)", p)))
			return
		}
		next.ServeHTTP(w, r)
	})
}

// cleanPath is path.Clean keeping a trailing slash, as the ServeMux
// compares paths.
func cleanPath(p string) string {
	if p == "" || p[0] != '/' {
		p = "/" + p
	}
	np := path.Clean(p)
	if strings.HasSuffix(p, "/") && np != "/" {
		np += "/"
	}
	return np
}

// errorLogEvery is how often the http.Server's own error lines (TLS
// handshakes, bad connections) may be logged; the rest are counted.
const errorLogEvery = 10 * time.Second

// throttledErrorLog is the http.Server's ErrorLog: one line per
// errorLogEvery, with the number held back since the last.
func throttledErrorLog(l *slog.Logger) *log.Logger {
	return log.New(&throttledWriter{log: l, lim: admission.NewLogLimiter(errorLogEvery)}, "", 0)
}

type throttledWriter struct {
	log *slog.Logger
	lim *admission.LogLimiter
}

func (t *throttledWriter) Write(p []byte) (int, error) {
	if ok, suppressed := t.lim.Allow(); ok {
		t.log.Warn("http: "+strings.TrimSpace(strings.TrimPrefix(string(p), "http: ")), "listener", "http", "suppressed_since_last", suppressed)
	}
	return len(p), nil
}
