package forwarding

import (
	"context"
	"testing"

	"google.golang.org/grpc/metadata"
)

// TestContext: a forwarded call carries the caller's metadata and the
// mark, not the transport's, and the member receiving it sees the mark.
func TestContext(t *testing.T) {
	in := metadata.Pairs("authorization", "MQv2-HMAC-SHA1 ...", "x-mq-client-id", "c1",
		":authority", "m1:8081", "grpc-timeout", "1S", "content-type", "application/grpc", "user-agent", "x", "te", "trailers")
	ctx := metadata.NewIncomingContext(context.Background(), in)
	if Forwarded(ctx) {
		t.Fatal("a caller's own request reported forwarded")
	}
	out, _ := metadata.FromOutgoingContext(Context(ctx))
	want := metadata.Pairs("authorization", "MQv2-HMAC-SHA1 ...", "x-mq-client-id", "c1", Key, "1")
	if len(out) != len(want) {
		t.Fatalf("forwarded metadata %v, want %v", out, want)
	}
	for k, v := range want {
		if got := out.Get(k); len(got) != 1 || got[0] != v[0] {
			t.Fatalf("forwarded %s = %v, want %v", k, got, v)
		}
	}
	if !Forwarded(metadata.NewIncomingContext(context.Background(), out)) {
		t.Fatal("the member receiving a forwarded request does not see the mark")
	}
}
