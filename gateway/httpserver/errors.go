package httpserver

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/grpc-ecosystem/grpc-gateway/v2/runtime"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/mqgate/mqgate/gateway/errcodes"
	v2 "github.com/mqgate/mqgate/gen/apache/rocketmq/v2"
	restv1 "github.com/mqgate/mqgate/gen/mqgate/rest/v1"
)

// This file is where REST errors get their HTTP status and body — the one
// place for the HTTP listener. The body of every error is a
// mqgate.rest.v1.Status: {"code": <v2 code>, "name": "...", "message": "..."}.
//
// The HTTP status follows from the RocketMQ v2 code, whose classes are HTTP
// statuses × 100 (40402 TOPIC_NOT_FOUND → 404, 41301 → 413, 42900 → 429),
// with the exceptions in httpOverrides. Some gRPC codes say more than any
// v2 code can and decide on their own: AlreadyExists → 409 (v2 has no
// conflict code), Unavailable → 503 (draining or the store cannot serve:
// nothing was done, retry elsewhere), and ResourceExhausted with a server
// error's v2 code → 507 (the disk is full: nothing was stored, retry once
// space is freed; with TOO_MANY_REQUESTS it stays 429). Errors without a v2 code
// (grpc-gateway's own, the admin API's plain gRPC codes, the drain
// interceptor) get the one gateway/errcodes gives their gRPC code.

// httpOverrides are the v2 codes whose class would mislead an HTTP client.
var httpOverrides = map[v2.Code]int{
	v2.Code_MESSAGE_BODY_EMPTY:              http.StatusBadRequest,            // 413 would say "too large"
	v2.Code_MESSAGE_PROPERTIES_TOO_LARGE:    http.StatusRequestEntityTooLarge, // 431 is about HTTP headers; properties are body fields here
	v2.Code_HA_NOT_AVAILABLE:                http.StatusServiceUnavailable,
	v2.Code_UNSUPPORTED:                     http.StatusNotImplemented, // 505 is "HTTP version not supported"
	v2.Code_VERSION_UNSUPPORTED:             http.StatusNotImplemented,
	v2.Code_VERIFY_FIFO_MESSAGE_UNSUPPORTED: http.StatusNotImplemented,
}

// httpStatusOf is the HTTP status of an error with gRPC code gc and v2
// code vc (0 when it has none: then gc's v2 code counts).
func httpStatusOf(gc codes.Code, vc v2.Code) int {
	switch gc {
	case codes.AlreadyExists:
		return http.StatusConflict
	case codes.Unavailable:
		return http.StatusServiceUnavailable
	case codes.ResourceExhausted:
		if vc >= 50000 && vc < 60000 {
			return http.StatusInsufficientStorage
		}
	}
	if vc < 40000 || vc >= 60000 {
		vc = errcodes.CodeOfGRPC(gc)
	}
	if s, ok := httpOverrides[vc]; ok {
		return s
	}
	return int(vc / 100)
}

func newStatus(c v2.Code, msg string) *restv1.Status {
	return &restv1.Status{Code: int32(c), Name: c.String(), Message: msg}
}

// errorBody is the Status an error carries (restmessaging attaches one), else
// one derived from its gRPC code.
func errorBody(st *status.Status) *restv1.Status {
	for _, d := range st.Details() {
		if s, ok := d.(*restv1.Status); ok {
			return s
		}
	}
	return newStatus(errcodes.CodeOfGRPC(st.Code()), st.Message())
}

// writeError is grpc-gateway's error handler.
func (s *Server) writeError(_ context.Context, _ *runtime.ServeMux, _ runtime.Marshaler, w http.ResponseWriter, r *http.Request, err error) {
	if bodyTooLarge(r) {
		writeStatus(w, http.StatusRequestEntityTooLarge, s.tooLargeStatus())
		return
	}
	if bodyTimedOut(r) {
		w.Header().Set("Connection", "close")
		writeStatus(w, http.StatusRequestTimeout, newStatus(v2.Code_BAD_REQUEST,
			fmt.Sprintf("the request body did not arrive within %s", s.bodyTimeout)))
		return
	}
	var hs *runtime.HTTPStatusError
	if errors.As(err, &hs) {
		st := status.Convert(hs.Err)
		writeStatus(w, hs.HTTPStatus, errorBody(st))
		return
	}
	st := status.Convert(err)
	body := errorBody(st)
	code := httpStatusOf(st.Code(), v2.Code(body.GetCode()))
	if code >= 500 && code != http.StatusServiceUnavailable && code != http.StatusInsufficientStorage {
		s.opts.Logger.WarnContext(r.Context(), "REST request failed", "method", r.Method, "path", r.URL.Path,
			"http_status", code, "code", body.GetName(), "message", body.GetMessage())
	}
	if code == http.StatusServiceUnavailable || code == http.StatusTooManyRequests || code == http.StatusInsufficientStorage {
		// Nothing was done: the call may be repeated (draining, a store
		// that cannot write, too many waiting receives, a full disk).
		w.Header().Set("Retry-After", retryAfterSeconds)
	}
	writeStatus(w, code, body)
}

// writeRoutingError answers requests no REST rule matches.
func (s *Server) writeRoutingError(_ context.Context, _ *runtime.ServeMux, _ runtime.Marshaler, w http.ResponseWriter, r *http.Request, code int) {
	switch code {
	case http.StatusNotFound:
		writeStatus(w, code, newStatus(v2.Code_NOT_FOUND, fmt.Sprintf("no REST endpoint %s %s (the API is described at /openapi.json)", r.Method, r.URL.Path)))
	case http.StatusMethodNotAllowed:
		writeStatus(w, code, newStatus(v2.Code_BAD_REQUEST, fmt.Sprintf("method %s is not allowed on %s", r.Method, r.URL.Path)))
	default:
		writeStatus(w, code, newStatus(v2.Code_BAD_REQUEST, http.StatusText(code)))
	}
}

var errorJSON = protojson.MarshalOptions{EmitDefaultValues: true}

// writeStatus writes an error response.
func writeStatus(w http.ResponseWriter, code int, st *restv1.Status) {
	b, err := errorJSON.Marshal(st)
	if err != nil {
		b = []byte(`{"code":50000,"name":"INTERNAL_ERROR","message":"failed to encode the error"}`)
		code = http.StatusInternalServerError
	}
	h := w.Header()
	h.Del("Trailer")
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", fmt.Sprint(len(b)+1))
	w.WriteHeader(code)
	_, _ = w.Write(append(b, '\n'))
}
