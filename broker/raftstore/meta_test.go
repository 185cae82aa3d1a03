package raftstore

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/mqgate/mqgate/broker/pop"
	"github.com/mqgate/mqgate/storage"
	"github.com/mqgate/mqgate/storage/metastore"
)

func metaEntryBytes(t testing.TB, seq uint64, op MetaOp) []byte {
	t.Helper()
	b, err := encodeMeta(&metaEntry{proposer: 99, seq: seq, storeTime: 1_700_000_000_000, storeHost: "h:1", op: op})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// Metadata changes apply to the replica's metadata store in log order;
// a change the store refuses for its content is skipped alike by every
// member (nothing stops); a topic's deletion record lands in the log.
func TestReplicaAppliesMetaChanges(t *testing.T) {
	r, err := OpenReplica(t.TempDir(), replicaOpts())
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close(t.Context())
	key := bytes.Repeat([]byte{7}, 36)
	ops := []MetaOp{
		{Kind: MetaBootstrap, Bootstrap: &Bootstrap{ClusterID: "c1", HandleKey: key}},
		{Kind: MetaBootstrap, Bootstrap: &Bootstrap{ClusterID: "c1", HandleKey: bytes.Repeat([]byte{8}, 36)}}, // later ones change nothing
		{Kind: MetaPutTopic, Topic: &metastore.Topic{Name: "t", QueueCount: 2}},
		{Kind: MetaPutTopic, Topic: &metastore.Topic{Name: "bad", QueueCount: 0}}, // refused by the store: skipped
		{Kind: MetaPutGroup, Group: &metastore.Group{Name: "g"}},
		{Kind: MetaCommitOffset, OffsetKey: &metastore.OffsetKey{Group: "g", Topic: "t", QueueID: 1}, Offset: 5},
		{Kind: MetaBarrier},
		{Kind: MetaDeleteGroup, Name: "nobody"}, // not found: skipped
		{Kind: MetaDropQueues, Name: "t"},
	}
	for i, op := range ops {
		if err := r.Apply(uint64(i+1), metaEntryBytes(t, uint64(i), op)); err != nil {
			t.Fatalf("entry %d (%s): %v", i+1, op.Kind, err)
		}
	}
	m := r.Store().Meta()
	if got, ok, _ := m.LoadBlob(pop.KeyBlob); !ok || !bytes.Equal(got, key) {
		t.Fatalf("handle key %x, want the first bootstrap's", got)
	}
	if !r.Bootstrapped() {
		t.Fatal("not bootstrapped")
	}
	if _, ok := m.Topic("t"); !ok {
		t.Fatal("topic t not applied")
	}
	if _, ok := m.Topic("bad"); ok {
		t.Fatal("an invalid topic was stored")
	}
	if off, ok := m.Offset(metastore.OffsetKey{Group: "g", Topic: "t", QueueID: 1}); !ok || off != 5 {
		t.Fatalf("offset %d %v", off, ok)
	}
	if _, end := r.Store().LogRange(); end == 0 {
		t.Fatal("the topic's deletion record is not in the log")
	}
	if r.Failed() != nil {
		t.Fatal(r.Failed())
	}
}

// A member configured for one cluster stops at a bootstrap of another.
func TestReplicaRefusesAnotherClustersBootstrap(t *testing.T) {
	o := replicaOpts()
	o.ClusterID = "mine"
	r, err := OpenReplica(t.TempDir(), o)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close(t.Context())
	err = r.Apply(1, metaEntryBytes(t, 1, MetaOp{Kind: MetaBootstrap, Bootstrap: &Bootstrap{ClusterID: "theirs", HandleKey: make([]byte, 36)}}))
	if err == nil || !strings.Contains(err.Error(), "theirs") {
		t.Fatalf("apply: %v", err)
	}
	if r.Failed() == nil {
		t.Fatal("the replica goes on after another cluster's bootstrap")
	}
}

func TestProposeMetaChecksFields(t *testing.T) {
	r, err := OpenReplica(t.TempDir(), replicaOpts())
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close(t.Context())
	if _, err := r.ProposeMeta(t.Context(), MetaOp{Kind: MetaPutTopic}); !errors.Is(err, storage.ErrInvalid) {
		t.Fatalf("a put-topic without its topic: %v", err)
	}
}

func FuzzDecodeMeta(f *testing.F) {
	f.Add(metaEntryBytes(f, 1, MetaOp{Kind: MetaPutTopic, Topic: &metastore.Topic{Name: "t", QueueCount: 2}}))
	f.Add(metaEntryBytes(f, 2, MetaOp{Kind: MetaBarrier}))
	f.Add(metaEntryBytes(f, 3, MetaOp{Kind: MetaBootstrap, Bootstrap: &Bootstrap{ClusterID: "c", HandleKey: make([]byte, 20)}}))
	f.Add([]byte{1, 2})
	f.Fuzz(func(t *testing.T, b []byte) {
		e, err := decodeMeta(b)
		if err != nil {
			if !errors.Is(err, ErrBadEntry) {
				t.Fatalf("error not ErrBadEntry: %v", err)
			}
			return
		}
		if err := e.op.check(); err != nil {
			t.Fatalf("decoded an op that fails its check: %v", err)
		}
		// What decodes encodes to an entry that decodes the same.
		again, err := encodeMeta(e)
		if err != nil {
			t.Fatalf("re-encode: %v", err)
		}
		e2, err := decodeMeta(again)
		if err != nil || e2.proposer != e.proposer || e2.seq != e.seq || e2.op.Kind != e.op.Kind {
			t.Fatalf("re-decoded %+v, %v; was %+v", e2, err, e)
		}
	})
}

// FuzzDecodeChange: a change proposed through another member never
// panics its decoder; what decodes is a catalog change that passes its
// check and encodes to a change that decodes the same; anything else is
// refused as ErrRefused.
func FuzzDecodeChange(f *testing.F) {
	for _, op := range []MetaOp{
		{Kind: MetaPutTopic, Topic: &metastore.Topic{Name: "t", QueueCount: 2}},
		{Kind: MetaDeleteGroup, Name: "g"},
		{Kind: MetaDropQueues, Name: "t"},
		{Kind: MetaBarrier},
		{Kind: MetaBootstrap, Bootstrap: &Bootstrap{ClusterID: "c", HandleKey: make([]byte, 20)}},
	} {
		b, err := EncodeChange(op)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte(`{"kind":"put-topic"}`))
	f.Add([]byte(`{"kind":"delete-topic","name":"t"} {}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		op, err := DecodeChange(b)
		if err != nil {
			if !errors.Is(err, ErrRefused) {
				t.Fatalf("error not ErrRefused: %v", err)
			}
			return
		}
		if err := op.check(); err != nil {
			t.Fatalf("decoded a change that fails its check: %v", err)
		}
		again, err := EncodeChange(op)
		if err != nil {
			t.Fatal(err)
		}
		op2, err := DecodeChange(again)
		if err != nil || op2.Kind != op.Kind || op2.Name != op.Name {
			t.Fatalf("re-decoded %+v, %v; was %+v", op2, err, op)
		}
	})
}
