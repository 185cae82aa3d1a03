package broker

import (
	"testing"
	"time"

	"github.com/mqgate/mqgate/broker/deferred"
	"github.com/mqgate/mqgate/broker/keyring"
	"github.com/mqgate/mqgate/broker/pop"
)

// A receipt handle names its queue to whoever reads it, authenticated or
// not; a token names the data group that minted it, and one of group 0
// keeps the form tokens always had.
func TestHandleQueueAndTokenGroup(t *testing.T) {
	codec, err := pop.NewHandleCodec([]byte("0123456789abcdef0123"), 7)
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []int32{0, 5, 1023} {
		h := codec.Encode(pop.Handle{Queue: q, Offset: 42, Epoch: 1, Gen: 1, Retrieved: time.Now().UnixMilli(), Invisible: 30000})
		if got, ok := HandleQueue(h); !ok || got != q {
			t.Fatalf("handle of queue %d reads as %d, %v", q, got, ok)
		}
	}
	for _, bad := range []string{"", "r1.", "r1.!!!", "l1.AAAA", "t1.abc"} {
		if _, ok := HandleQueue(bad); ok {
			t.Fatalf("%q read as a handle", bad)
		}
	}
	if got := deferred.GroupPrefix("t1.", 0); got != "t1." {
		t.Fatalf("group 0's prefix %q", got)
	}
	for _, g := range []int{0, 1, 2, 12} {
		k, err := keyring.NewKey(time.Now())
		if err != nil {
			t.Fatal(err)
		}
		blobs := memBlobs{}
		if err := blobs.SaveBlob(deferred.TxnKeyBlob, keyring.Ring{k}.Encode()); err != nil {
			t.Fatal(err)
		}
		tok, err := deferred.LoadToken(blobs, deferred.TxnKeyBlob, deferred.GroupPrefix("t1.", g))
		if err != nil {
			t.Fatal(err)
		}
		s := tok.Encode(100, 0, "orders")
		if got := TokenGroup(s); got != g {
			t.Fatalf("token %q of group %d reads as group %d", s, g, got)
		}
		if off, _, err := tok.Decode(s, "orders"); err != nil || off != 100 {
			t.Fatalf("token of group %d: %d, %v", g, off, err)
		}
	}
	for _, s := range []string{"", "t1.", "t1g.x", "t1g-1.x", "t1g01.x", "nodot"} {
		if got := TokenGroup(s); got != 0 {
			t.Fatalf("%q reads as group %d", s, got)
		}
	}
}

// memBlobs is an in-memory blob store.
type memBlobs map[string][]byte

func (m memBlobs) LoadBlob(name string) ([]byte, bool, error) { b, ok := m[name]; return b, ok, nil }
func (m memBlobs) SaveBlob(name string, b []byte) error       { m[name] = b; return nil }
