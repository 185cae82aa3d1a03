package raftstore

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mqgate/mqgate/broker/deferred"
	"github.com/mqgate/mqgate/broker/keyring"
	"github.com/mqgate/mqgate/broker/pop"
	"github.com/mqgate/mqgate/storage/vfs"
)

func keyRing(t *testing.T, created time.Time) keyring.Ring {
	t.Helper()
	k, err := keyring.NewKey(created)
	if err != nil {
		t.Fatal(err)
	}
	return keyring.Ring{k}
}

// A group's entry format rises only by a set-format entry; a change the
// format does not allow yet is applied as a no-op (as undecodable) by
// every member and refused to a proposer; a set-format above what this
// version reads stops the member with advice; the format survives a
// reopen with the applied position.
func TestFormatGate(t *testing.T) {
	dir := t.TempDir()
	r, err := OpenReplica(dir, replicaOpts())
	if err != nil {
		t.Fatal(err)
	}
	if r.Format() != 1 {
		t.Fatalf("a new replica's format is %d, want 1", r.Format())
	}
	keys := map[string][]byte{deferred.TxnKeyBlob: keyRing(t, time.Now()).Encode()}
	idx := uint64(0)
	apply := func(op MetaOp) error {
		idx++
		return r.Apply(idx, metaEntryBytes(t, idx, op))
	}
	if err := apply(MetaOp{Kind: MetaPutKeys, Keys: keys}); err != nil {
		t.Fatal(err)
	}
	if r.KeysReplicated() || r.Undecodable() != 1 {
		t.Fatalf("put-keys under format 1: replicated %v, %d undecodable; want a no-op", r.KeysReplicated(), r.Undecodable())
	}
	r.Attach(loopRaft{proposed: make(chan []byte, 1)})
	if _, err := r.ProposeMeta(context.Background(), MetaOp{Kind: MetaPutKeys, Keys: keys}); !errors.Is(err, ErrFormat) {
		t.Fatalf("proposing put-keys under format 1: %v, want ErrFormat", err)
	}
	if err := apply(MetaOp{Kind: MetaSetFormat, Format: 2}); err != nil || r.Format() != 2 {
		t.Fatalf("set-format 2: %v, format %d", err, r.Format())
	}
	if err := apply(MetaOp{Kind: MetaPutKeys, Keys: keys}); err != nil || !r.KeysReplicated() {
		t.Fatalf("put-keys under format 2: %v, replicated %v", err, r.KeysReplicated())
	}
	if err := r.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	r, err = OpenReplica(dir, replicaOpts())
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close(context.Background())
	if r.Format() != 2 {
		t.Fatalf("format %d after a reopen, want 2", r.Format())
	}
	err = r.Apply(idx+1, metaEntryBytes(t, idx+1, MetaOp{Kind: MetaSetFormat, Format: FormatVersion + 1}))
	if err == nil || !strings.Contains(err.Error(), "run a version of mqgate that reads format") || r.Failed() == nil {
		t.Fatalf("set-format above this version's: %v, failed %v", err, r.Failed())
	}
}

// A state record of a version without formats reads as format 1.
func TestStateOfAnOlderVersion(t *testing.T) {
	fs := vfs.Default
	path := filepath.Join(t.TempDir(), stateFile)
	old := encodeState(appliedState{index: 7, logEnd: 100, storeTime: 5, format: 1})
	// The older record: magic MQA1, no format byte.
	old1 := append([]byte(stateMagic1), old[4:28]...)
	old1 = binary.BigEndian.AppendUint32(old1, crc32.Checksum(old1, castagnoli))
	if err := vfs.WriteFileAtomic(fs, path, old1); err != nil {
		t.Fatal(err)
	}
	st, err := readState(fs, path)
	if err != nil || st.index != 7 || st.logEnd != 100 || st.format != 1 {
		t.Fatalf("older state: %+v, %v", st, err)
	}
}

// The leader makes the rings it holds the group's (a receipt-handle key
// of the bootstrap's older form included, so its handles stay valid),
// and rotates them: the new key heads each ring, the previous ones stay.
func TestEnsureAndRotateKeys(t *testing.T) {
	r, err := OpenReplica(t.TempDir(), replicaOpts())
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close(context.Background())
	lr := loopRaft{proposed: make(chan []byte, 1)}
	r.Attach(lr)
	idx := uint64(0)
	// committed runs a proposing call and applies what it proposes, on
	// this goroutine, as the raft loop would.
	committed := func(call func() error) error {
		errc := make(chan error, 1)
		go func() { errc <- call() }()
		idx++
		if err := r.Apply(idx, <-lr.proposed); err != nil {
			t.Fatal(err)
		}
		return <-errc
	}
	legacy := append([]byte{0, 0, 0, 42}, bytes.Repeat([]byte{5}, 32)...)
	idx++
	if err := r.Apply(idx, metaEntryBytes(t, idx, MetaOp{Kind: MetaBootstrap, Bootstrap: &Bootstrap{ClusterID: "c", HandleKey: legacy}})); err != nil {
		t.Fatal(err)
	}
	idx++
	if err := r.Apply(idx, metaEntryBytes(t, idx, MetaOp{Kind: MetaSetFormat, Format: 2})); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	if err := committed(func() error { return r.EnsureKeys(context.Background(), now) }); err != nil {
		t.Fatal(err)
	}
	m := r.Store().Meta()
	hr, err := pop.LoadKeyRing(m, false)
	if err != nil || hr.Newest().ID != 42 || !bytes.Equal(hr.Newest().Secret, legacy[4:]) || hr.Newest().Created != now.UnixMilli() {
		t.Fatalf("the handle ring after EnsureKeys: %+v, %v", hr, err)
	}
	for _, name := range []string{deferred.TxnKeyBlob, deferred.RecallKeyBlob} {
		if _, err := deferred.LoadRing(m, name, false); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
	}
	if rotated, err := r.RotateKeys(context.Background(), now.Add(time.Hour), 24*time.Hour); rotated || err != nil {
		t.Fatalf("rotation before it is due: %v, %v", rotated, err)
	}
	var rotated bool
	if err := committed(func() (err error) {
		rotated, err = r.RotateKeys(context.Background(), now.Add(25*time.Hour), 24*time.Hour)
		return err
	}); !rotated || err != nil {
		t.Fatalf("rotation when due: %v, %v", rotated, err)
	}
	hr2, err := pop.LoadKeyRing(m, false)
	if err != nil || len(hr2) != 2 || hr2.Newest().ID == 42 || hr2[1].ID != 42 {
		t.Fatalf("the handle ring after a rotation: %+v, %v", hr2, err)
	}
}
