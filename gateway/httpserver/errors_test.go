package httpserver

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"

	"github.com/mqgate/mqgate/gateway/errcodes"
	v2 "github.com/mqgate/mqgate/gen/apache/rocketmq/v2"
)

// Each class of error, by v2 code or by gRPC code, and its HTTP status.
func TestHTTPStatusOf(t *testing.T) {
	cases := []struct {
		gc   codes.Code
		vc   v2.Code
		want int
	}{
		{codes.InvalidArgument, v2.Code_BAD_REQUEST, 400},
		{codes.InvalidArgument, v2.Code_ILLEGAL_TOPIC, 400},
		{codes.InvalidArgument, v2.Code_INVALID_RECEIPT_HANDLE, 400},
		{codes.Unauthenticated, v2.Code_UNAUTHORIZED, 401},
		{codes.PermissionDenied, v2.Code_FORBIDDEN, 403},
		{codes.NotFound, v2.Code_TOPIC_NOT_FOUND, 404},
		{codes.NotFound, v2.Code_CONSUMER_GROUP_NOT_FOUND, 404},
		{codes.AlreadyExists, v2.Code_BAD_REQUEST, 409},
		{codes.InvalidArgument, v2.Code_PAYLOAD_TOO_LARGE, 413},
		{codes.InvalidArgument, v2.Code_MESSAGE_BODY_TOO_LARGE, 413},
		{codes.InvalidArgument, v2.Code_MESSAGE_PROPERTIES_TOO_LARGE, 413},
		{codes.InvalidArgument, v2.Code_MESSAGE_BODY_EMPTY, 400},
		{codes.ResourceExhausted, v2.Code_TOO_MANY_REQUESTS, 429},
		{codes.ResourceExhausted, v2.Code_INTERNAL_SERVER_ERROR, 507}, // the disk is full
		{codes.ResourceExhausted, 0, 429},
		{codes.Internal, v2.Code_INTERNAL_ERROR, 500},
		{codes.Unavailable, v2.Code_INTERNAL_SERVER_ERROR, 503},
		{codes.Unimplemented, v2.Code_NOT_IMPLEMENTED, 501},
		{codes.Unimplemented, v2.Code_UNSUPPORTED, 501},
		// Errors without a v2 code: grpc-gateway's own, the admin API's,
		// the drain interceptor's.
		{codes.InvalidArgument, 0, 400},
		{codes.NotFound, 0, 404},
		{codes.AlreadyExists, 0, 409},
		{codes.Unavailable, 0, 503},
		{codes.Internal, 0, 500},
	}
	for _, c := range cases {
		if got := httpStatusOf(c.gc, c.vc); got != c.want {
			t.Errorf("gRPC %v, v2 %v: HTTP %d, want %d", c.gc, c.vc, got, c.want)
		}
	}
	// Every v2 error code yields a real 4xx/5xx status.
	for n := range v2.Code_name {
		vc := v2.Code(n)
		if vc < 40000 {
			continue
		}
		if s := httpStatusOf(codes.Unknown, vc); s < 400 || s > 599 || http.StatusText(s) == "" {
			t.Errorf("v2 %v → HTTP %d", vc, s)
		}
	}
	// And every gRPC error code, with the v2 code derived from it.
	for c := codes.Canceled; c <= codes.Unauthenticated; c++ {
		if s := httpStatusOf(c, errcodes.CodeOfGRPC(c)); s < 400 || s > 599 {
			t.Errorf("gRPC %v → HTTP %d", c, s)
		}
	}
}

func TestBodyErrorText(t *testing.T) {
	cases := []struct{ err, body, want string }{
		{"proto:\u00a0(line 1:22): invalid google.protobuf.Duration value \"soon\"", `{"invisibleDuration":"soon"}`,
			`invalid JSON body: "invisibleDuration": invalid google.protobuf.Duration value "soon" (line 1, column 22)`},
		{"proto: (line 2:10): invalid value for string field text: 5", "{\"messages\":[\n{\"text\":5}]}",
			`invalid JSON body: invalid value for string field text: 5 (line 2, column 10)`},
		{"proto: syntax error (line 1:29): invalid value xx", `{"messages":[{"text":"a"}]} xx`,
			`invalid JSON body: syntax error: invalid value xx (line 1, column 29)`},
		{"unexpected EOF", `{`, `invalid JSON body: unexpected EOF`},
		{"proto: (line 1:26): unknown field \"colour\"", `{"messages":[{"text":"x","colour":"red"}]}`,
			`invalid JSON body: unknown field "colour" (line 1, column 26)`},
	}
	for _, c := range cases {
		if got := bodyErrorText(errors.New(c.err), []byte(c.body)); got != c.want {
			t.Errorf("%q\n got %q\nwant %q", c.err, got, c.want)
		}
	}
}

// The embedded document is the generated one, and it documents every
// operation's errors as the Status the error handler writes.
func TestOpenAPIIsTheGeneratedDocument(t *testing.T) {
	gen, err := os.ReadFile(filepath.Join("..", "..", "gen", "openapi", "mqgate.swagger.json"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(gen, openAPI) {
		t.Fatal("gateway/httpserver/openapi.json differs from gen/openapi/mqgate.swagger.json: run make generate")
	}
	var doc struct {
		Paths map[string]map[string]struct {
			Responses map[string]struct {
				Schema struct {
					Ref string `json:"$ref"`
				} `json:"schema"`
			} `json:"responses"`
		} `json:"paths"`
	}
	if err := json.Unmarshal(openAPI, &doc); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"/v1/topics/{topic}/messages", "/v1/groups/{group}/topics/{topic}:receive",
		"/v1/groups/{group}/topics/{topic}:ack", "/v1/groups/{group}/topics/{topic}:changeInvisibleDuration",
		"/v1/topics/{topic}/route", "/v1/topics", "/v1/topics/{name}", "/v1/groups", "/v1/groups/{name}",
		"/v1/groups/{group}/topics/{topic}:resetOffset", "/v1/topics/{name}/status", "/v1/groups/{name}/status",
		"/v1/messages"} {
		if doc.Paths[p] == nil {
			t.Errorf("OpenAPI has no path %s", p)
		}
	}
	for path, ops := range doc.Paths {
		for method, op := range ops {
			if !strings.HasSuffix(op.Responses["default"].Schema.Ref, "/restV1Status") {
				t.Errorf("%s %s: the error response is not a mqgate.rest.v1.Status (add it to proto/http/mqgate.openapi.yaml)", method, path)
			}
		}
	}
}
