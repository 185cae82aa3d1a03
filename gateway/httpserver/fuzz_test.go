package httpserver

import (
	"bytes"
	"errors"
	"io"
	"path"
	"strings"
	"testing"

	restv1 "github.com/mqgate/mqgate/gen/mqgate/rest/v1"
)

// FuzzJSONBody feeds arbitrary request bodies to the REST decoder (the one
// grpc-gateway uses for every call) for the largest request type: it must
// never panic, and a refusal must be a readable "invalid JSON body" error.
func FuzzJSONBody(f *testing.F) {
	for _, s := range []string{
		`{"messages":[{"text":"hello","tag":"a","keys":["k"],"properties":{"p":"v"}}]}`,
		`{"messages":[{"body":"aGVsbG8="}]}`,
		`{"messages":[{"text":`,
		`{"messages":[{"deliveryTime":"soon"}]}`,
		"{\n  \"messages\": [\n    {\"body\": \"%%%\"}\n  ]\n}",
		`{"unknown":1}`,
		``,
		`   `,
		`[]`,
		"\x00\xff",
	} {
		f.Add([]byte(s))
	}
	m := newMarshaler()
	f.Fuzz(func(t *testing.T, body []byte) {
		var req restv1.SendMessagesRequest
		err := m.NewDecoder(bytes.NewReader(body)).Decode(&req)
		if err == nil || errors.Is(err, io.EOF) {
			return
		}
		if !strings.HasPrefix(err.Error(), "invalid JSON body: ") {
			t.Fatalf("decoder error %q does not say the body is invalid", err)
		}
	})
}

// FuzzCleanPath: what canonicalPaths lets through is its own clean form,
// and cleaning is idempotent.
func FuzzCleanPath(f *testing.F) {
	for _, s := range []string{"/v1/../x", "/v1/topics/", "//v1", "/./", "", "a/b", "/v1/topics/orders/messages"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, p string) {
		c := cleanPath(p)
		if cleanPath(c) != c {
			t.Fatalf("cleanPath(%q) = %q is not clean", p, c)
		}
		if !strings.HasPrefix(c, "/") {
			t.Fatalf("cleanPath(%q) = %q is not absolute", p, c)
		}
		if trimmed := strings.TrimSuffix(c, "/"); trimmed != "" && path.Clean(trimmed) != trimmed {
			t.Fatalf("cleanPath(%q) = %q has unclean segments", p, c)
		}
	})
}
