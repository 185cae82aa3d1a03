package broker

import (
	"context"
	"errors"
	"testing"

	"github.com/mqgate/mqgate/broker/mqerr"
	"github.com/mqgate/mqgate/broker/raftstore"
)

// A refusal that memory decides (an unknown handle or transaction id) is
// answered only after the member confirms it still leads; a member that
// no longer does answers the replication error instead, which a client
// retries at the leader. Other errors, and a single node's, pass as they
// are.
func TestRefusalsConfirmedByLeadership(t *testing.T) {
	ctx := context.Background()
	invalid := mqerr.Errorf(mqerr.KindInvalidReceiptHandle, "superseded")
	other := mqerr.Errorf(mqerr.KindBadRequest, "bad")
	asks := 0
	deposed := &Broker{w: writes{current: func(context.Context) error { asks++; return &raftstore.NotLeaderError{LeaderID: 2} }}}
	if err := deposed.confirmRefusal(ctx, invalid); mqerr.KindOf(err) == mqerr.KindInvalidReceiptHandle {
		t.Fatalf("a deposed member's refusal: %v, want a replication error", err)
	}
	if err := deposed.confirmRefusal(ctx, other); !errors.Is(err, other) {
		t.Fatalf("another error: %v", err)
	}
	asks = 0
	errs := deposed.confirmAll(ctx, []error{nil, invalid, other, invalid})
	if errs[0] != nil || mqerr.KindOf(errs[1]) == mqerr.KindInvalidReceiptHandle || !errors.Is(errs[2], other) || mqerr.KindOf(errs[3]) == mqerr.KindInvalidReceiptHandle || asks != 1 {
		t.Fatalf("acks through a deposed member: %v after %d asks", errs, asks)
	}
	leading := &Broker{w: writes{current: func(context.Context) error { return nil }}}
	if err := leading.confirmRefusal(ctx, invalid); !errors.Is(err, invalid) {
		t.Fatalf("the leader's refusal: %v", err)
	}
	single := &Broker{}
	if err := single.confirmRefusal(ctx, invalid); !errors.Is(err, invalid) {
		t.Fatalf("a single node's refusal: %v", err)
	}
}
