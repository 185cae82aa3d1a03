package deferred

import (
	"bytes"
	"errors"
	"testing"
	"time"

	"github.com/mqgate/mqgate/broker/keyring"
)

type memBlobs map[string][]byte

func (m memBlobs) SaveBlob(name string, b []byte) error {
	m[name] = append([]byte(nil), b...)
	return nil
}
func (m memBlobs) LoadBlob(name string) ([]byte, bool, error) {
	b, ok := m[name]
	return b, ok, nil
}

// A token signed before a rotation stays valid while its key is in the
// ring; new tokens are signed with the newest key; a key of an older
// version (one raw key in the blob) reads as a ring of one.
func TestTokenRotation(t *testing.T) {
	legacy := bytes.Repeat([]byte{9}, 32)
	blobs := memBlobs{TxnKeyBlob: legacy}
	tk, err := LoadToken(blobs, TxnKeyBlob, "t1.")
	if err != nil {
		t.Fatal(err)
	}
	old := tk.Encode(42, 0, "T")
	if tk.Encode(42, 0, "T") != testToken("t1.", legacy).Encode(42, 0, "T") {
		t.Fatal("a raw key of an older version does not sign as it did")
	}
	r, err := LoadRing(blobs, TxnKeyBlob, false)
	if err != nil {
		t.Fatal(err)
	}
	k, err := keyring.NewKey(time.Now())
	if err != nil {
		t.Fatal(err)
	}
	tk.SetRing(r.Rotated(k, 0))
	if off, _, err := tk.Decode(old, "T"); err != nil || off != 42 {
		t.Fatalf("a token of the previous key after a rotation: %d, %v", off, err)
	}
	fresh := tk.Encode(43, 0, "T")
	if fresh == testToken("t1.", legacy).Encode(43, 0, "T") {
		t.Fatal("the rotated ring still signs with the previous key")
	}
	tk.SetRing(keyring.Ring{k})
	if _, _, err := tk.Decode(old, "T"); !errors.Is(err, ErrBadToken) {
		t.Fatalf("a token of a key dropped from the ring: %v", err)
	}
	if _, err := LoadRing(memBlobs{}, RecallKeyBlob, false); err == nil {
		t.Fatal("LoadRing without create made a key")
	}
}
