package mqerr

import (
	"context"
	"errors"
	"fmt"
	"io"
	"testing"
)

func TestKindOfAndMessage(t *testing.T) {
	base := Errorf(KindTopicNotFound, "topic %q does not exist", "orders")
	wrapped := fmt.Errorf("send: %w", base)
	if got := KindOf(wrapped); got != KindTopicNotFound {
		t.Fatalf("KindOf = %v", got)
	}
	if got := Message(wrapped); got != `topic "orders" does not exist` {
		t.Fatalf("Message = %q", got)
	}
	if !errors.Is(wrapped, Sentinel(KindTopicNotFound)) || errors.Is(wrapped, Sentinel(KindGroupNotFound)) {
		t.Fatal("errors.Is by kind broken")
	}
	io := Errorf(KindStoreUnavailable, "append: %w", io.ErrUnexpectedEOF)
	if !errors.Is(io, io2()) || io.Error() != "append: unexpected EOF" {
		t.Fatalf("wrapped cause: %v", io)
	}
	if KindOf(errors.New("x")) != KindInternal || Message(errors.New("secret detail")) != "internal error" {
		t.Fatal("unclassified errors must be internal with a generic message")
	}
	if KindOf(fmt.Errorf("x: %w", context.DeadlineExceeded)) != KindRequestTimeout {
		t.Fatal("deadline not recognised")
	}
	if Wrap(KindInternal, nil, "x") != nil {
		t.Fatal("Wrap(nil) must be nil")
	}
}

func io2() error { return io.ErrUnexpectedEOF }

func TestEveryKindHasAName(t *testing.T) {
	seen := map[string]Kind{}
	for _, k := range Kinds() {
		n := k.String()
		if n == "" || n[0] == 'k' && len(n) > 5 && n[:5] == "kind(" {
			t.Fatalf("kind %d has no name", int(k))
		}
		if prev, dup := seen[n]; dup {
			t.Fatalf("kinds %d and %d share name %q", prev, k, n)
		}
		seen[n] = k
	}
}
