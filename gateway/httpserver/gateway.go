package httpserver

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/grpc-ecosystem/grpc-gateway/v2/runtime"
	"go.opentelemetry.io/otel/propagation"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	v2 "github.com/mqgate/mqgate/gen/apache/rocketmq/v2"
	adminv1 "github.com/mqgate/mqgate/gen/mqgate/admin/v1"
	restv1 "github.com/mqgate/mqgate/gen/mqgate/rest/v1"
)

// bodyFormatHeader asks mqgate.rest.v1 for text bodies (restmessaging reads it);
// ?body=text sets it.
const bodyFormatHeader = "x-mq-body-format"

// newGateway builds the REST API: grpc-gateway's mux over api for every
// mqgate service with HTTP rules, wrapped (outermost first) in the REST
// telemetry (telemetry.go: HTTP metrics, and HTTP spans from the caller's
// traceparent when spans are recorded) and prepare (request id, trace
// context for the gRPC leg, body limit, ?body=).
func (s *Server) newGateway(api grpc.ClientConnInterface) (http.Handler, error) {
	mux := runtime.NewServeMux(
		runtime.WithMarshalerOption(runtime.MIMEWildcard, newMarshaler()),
		runtime.WithIncomingHeaderMatcher(incomingHeader),
		runtime.WithOutgoingHeaderMatcher(func(string) (string, bool) { return "", false }),
		runtime.WithMetadata(bodyFormat),
		runtime.WithErrorHandler(s.writeError),
		runtime.WithRoutingErrorHandler(s.writeRoutingError),
		runtime.WithMiddlewares(nameSpan),
		runtime.WithWriteContentLength(),
		runtime.WithDisableHTTPMethodOverride(),
	)
	ctx := context.Background() // registration only; every call uses its request's context
	if err := adminv1.RegisterAdminServiceHandlerClient(ctx, mux, adminv1.NewAdminServiceClient(api)); err != nil {
		return nil, fmt.Errorf("register admin REST handlers: %w", err)
	}
	if err := restv1.RegisterMessagingServiceHandlerClient(ctx, mux, restv1.NewMessagingServiceClient(api)); err != nil {
		return nil, fmt.Errorf("register messaging REST handlers: %w", err)
	}
	return newRESTTelemetry(s.opts.MeterProvider, s.opts.TracerProvider).handler(s.prepare(mux)), nil
}

// prepare runs before grpc-gateway: it gives the request an id (the
// caller's X-Mq-Request-Id or X-Request-Id, else a new one; echoed as
// X-Request-Id), points traceparent at the HTTP span so the gRPC leg
// continues the trace, checks ?body= and admits the request (limits.go:
// auth, body limit, in-flight budget, body deadline).
func (s *Server) prepare(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := r.Header.Get("X-Mq-Request-Id")
		if id == "" {
			id = r.Header.Get("X-Request-Id")
		}
		if !validRequestID(id) {
			var b [8]byte
			_, _ = rand.Read(b[:])
			id = hex.EncodeToString(b[:])
		}
		r.Header.Set("X-Request-Id", id)
		w.Header().Set("X-Request-Id", id)
		if st := stateOf(r); st != nil && st.span != nil && st.span.SpanContext().IsValid() {
			propagation.TraceContext{}.Inject(r.Context(), propagation.HeaderCarrier(r.Header))
		}
		switch f := bodyParam(r); f {
		case "", "text", "base64":
		default:
			writeStatus(w, http.StatusBadRequest, newStatus(v2.Code_BAD_REQUEST, fmt.Sprintf("query parameter body=%q: want text or base64", f)))
			return
		}
		r, done, ok := s.admit(w, r)
		if !ok {
			return
		}
		defer done()
		next.ServeHTTP(w, r)
	})
}

// validRequestID accepts what gRPC metadata carries unchanged: 1 to 128
// printable ASCII characters.
func validRequestID(id string) bool {
	if id == "" || len(id) > 128 {
		return false
	}
	for i := 0; i < len(id); i++ {
		if id[i] < 0x21 || id[i] > 0x7e {
			return false
		}
	}
	return true
}

func (s *Server) tooLargeStatus() *restv1.Status {
	return newStatus(v2.Code_PAYLOAD_TOO_LARGE, fmt.Sprintf("the request body is larger than %d bytes; send fewer or smaller messages per request", s.maxBody))
}

// incomingHeader forwards mqgate's own headers (x-mq-*: client id, request
// id, body format, ...), the request id and the W3C trace context to gRPC
// metadata under their own names, and nothing else: grpc-gateway adds
// authorization, x-forwarded-for and x-forwarded-host by itself, and no
// service reads the other HTTP headers (each forwarded one costs every call).
func incomingHeader(key string) (string, bool) {
	switch {
	case len(key) >= 5 && lowerIs(key[:5], "x-mq-"), lowerIs(key, "x-request-id"),
		lowerIs(key, "traceparent"), lowerIs(key, "tracestate"):
		return strings.ToLower(key), true
	}
	return "", false
}

// lowerIs reports whether strings.ToLower(s) == lower, for an ASCII
// lower, without building the lower-case copy.
func lowerIs(s, lower string) bool {
	if len(s) != len(lower) {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != lower[i] {
			return false
		}
	}
	return true
}

// bodyFormat turns ?body=text into the x-mq-body-format metadata.
func bodyFormat(_ context.Context, r *http.Request) metadata.MD {
	if f := bodyParam(r); f != "" {
		return metadata.Pairs(bodyFormatHeader, f)
	}
	return nil
}

// bodyParam is the ?body= query parameter ("" without a query).
func bodyParam(r *http.Request) string {
	if r.URL.RawQuery == "" {
		return ""
	}
	return r.URL.Query().Get("body")
}

// nameSpan names the HTTP span and labels the HTTP metrics by route
// ("POST /v1/topics/{topic}/messages"), never by the concrete path; a
// request no route matched never gets here, so it has no route label.
// grpc-gateway wraps each registered handler, which serves one pattern,
// on its own, so the route is worked out on the first call and kept.
func nameSpan(next runtime.HandlerFunc) runtime.HandlerFunc {
	var route atomic.Pointer[string]
	return func(w http.ResponseWriter, r *http.Request, params map[string]string) {
		rt := route.Load()
		if rt == nil {
			if p, ok := runtime.HTTPPattern(r.Context()); ok {
				s := strings.ReplaceAll(p.String(), "=*}", "}")
				rt = &s
				route.Store(rt)
			}
		}
		if rt != nil {
			if st := stateOf(r); st != nil {
				st.route = rt
				if st.span != nil && st.span.IsRecording() {
					st.span.SetName(r.Method + " " + *rt)
				}
			}
		}
		next(w, r, params)
	}
}

// marshaler is grpc-gateway's protojson marshaler with mqgate's choices:
// lowerCamelCase names, default values emitted (an empty receive is
// {"messages":[]}), unknown fields refused, and a decoder that reads the
// whole body (trailing garbage is an error) and names the field at fault.
type marshaler struct {
	*runtime.JSONPb
}

func newMarshaler() *marshaler {
	return &marshaler{&runtime.JSONPb{
		MarshalOptions:   protojson.MarshalOptions{EmitDefaultValues: true},
		UnmarshalOptions: protojson.UnmarshalOptions{DiscardUnknown: false},
	}}
}

func (m *marshaler) NewDecoder(r io.Reader) runtime.Decoder {
	return runtime.DecoderFunc(func(v any) error {
		b, err := readBody(r)
		if err != nil {
			return fmt.Errorf("reading the request body: %w", err)
		}
		if len(bytes.TrimSpace(b)) == 0 {
			return io.EOF // no body: every field keeps its default
		}
		if req, ok := v.(*restv1.SendMessagesRequest); ok && decodeSendRequest(b, req) {
			return nil
		}
		pm, ok := v.(proto.Message)
		if !ok {
			return m.JSONPb.Unmarshal(b, v)
		}
		if err := m.UnmarshalOptions.Unmarshal(b, pm); err != nil {
			return errors.New(bodyErrorText(err, b))
		}
		return nil
	})
}

// Marshal encodes a send's response by hand (sendjson.go), anything else
// with protojson.
func (m *marshaler) Marshal(v any) ([]byte, error) {
	if r, ok := v.(*restv1.SendMessagesResponse); ok {
		if b, ok := appendSendResponse(make([]byte, 0, sendResponseSize(r)), r); ok {
			return b, nil
		}
	}
	return m.JSONPb.Marshal(v)
}

// readBody reads r whole, into one buffer of the request's Content-Length
// when it is known (io.ReadAll would grow its buffer several times).
func readBody(r io.Reader) ([]byte, error) {
	g, ok := r.(*bodyGuard)
	if !ok || g.size <= 0 {
		return io.ReadAll(r)
	}
	b := make([]byte, 0, g.size+1) // +1: EOF needs no second buffer
	for {
		n, err := r.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = nil
			}
			return b, err
		}
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)] // longer than announced: let it grow
		}
	}
}

// protojsonError matches protojson's "proto: [syntax error ](line L:C): what".
var protojsonError = regexp.MustCompile(`^proto:\s*(syntax error\s*)?\(line (\d+):(\d+)\):\s*(.*)$`)

// jsonKey matches an object key.
var jsonKey = regexp.MustCompile(`"((?:[^"\\]|\\.)*)"\s*:`)

// bodyErrorText rewrites a protojson error for people, naming the field
// when protojson does not (bad durations, timestamps, base64):
// `invalid JSON body: "invisibleDuration": invalid google.protobuf.Duration
// value "soon" (line 1, column 22)`.
func bodyErrorText(err error, body []byte) string {
	msg := strings.ReplaceAll(err.Error(), "\u00a0", " ") // protojson's non-breaking spaces
	m := protojsonError.FindStringSubmatch(msg)
	if m == nil {
		return "invalid JSON body: " + strings.TrimPrefix(msg, "proto: ")
	}
	what := m[4]
	if m[1] != "" {
		what = "syntax error: " + what
	} else {
		line, _ := strconv.Atoi(m[2])
		col, _ := strconv.Atoi(m[3])
		if key := keyBefore(body, line, col); key != "" && !strings.Contains(what, key) && !strings.HasPrefix(what, "unknown field") {
			what = strconv.Quote(key) + ": " + what
		}
	}
	return fmt.Sprintf("invalid JSON body: %s (line %s, column %s)", what, m[2], m[3])
}

// keyBefore is the last object key before 1-based line and column: the
// field whose value protojson refused.
func keyBefore(body []byte, line, col int) string {
	off := 0
	for l := 1; l < line; l++ {
		i := bytes.IndexByte(body[off:], '\n')
		if i < 0 {
			return ""
		}
		off += i + 1
	}
	off = min(off+col-1, len(body))
	if off < 0 {
		return ""
	}
	ms := jsonKey.FindAllSubmatch(body[:off], -1)
	if len(ms) == 0 {
		return ""
	}
	return string(ms[len(ms)-1][1])
}
