package raftstore

import (
	"errors"
	"strings"
	"syscall"
	"testing"

	"github.com/mqgate/mqgate/storage/metastore"
	"github.com/mqgate/mqgate/storage/vfs"
)

// TestReplicaWaitsForSpace: a committed entry that does not fit on the
// disk (a batch, a metadata change) is not applied and does not stop the
// replica: Apply answers ErrNoSpace, nothing of the entry is stored, and
// the same entry applied again once there is room is stored once, as on
// a member that had room all along. A position that cannot be recorded
// for lack of space (Persist) is recorded later.
func TestReplicaWaitsForSpace(t *testing.T) {
	efs := vfs.NewErrorFS(vfs.Default, nil)
	o := replicaOpts()
	o.Store.FS = efs
	r, err := OpenReplica(t.TempDir(), o)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close(t.Context())
	full := func(what string) {
		efs.SetInject(func(op vfs.Op, path string) error {
			if (op == vfs.OpWrite || op == vfs.OpCreate || op == vfs.OpReserve) && strings.Contains(path, what) {
				return syscall.ENOSPC
			}
			return nil
		})
	}
	ents := entries(t, 6)
	for i := range 2 {
		if err := r.Apply(uint64(i+1), ents[i]); err != nil {
			t.Fatal(err)
		}
	}
	waitFor := func(index uint64, data []byte, what string) {
		t.Helper()
		full(what)
		for range 3 {
			if err := r.Apply(index, data); !errors.Is(err, ErrNoSpace) {
				t.Fatalf("entry %d on a full disk: %v, want ErrNoSpace", index, err)
			}
			if r.Failed() != nil || r.Applied() != index-1 {
				t.Fatalf("entry %d on a full disk: failed %v, applied %d", index, r.Failed(), r.Applied())
			}
		}
		efs.SetInject(nil)
		if err := r.Apply(index, data); err != nil {
			t.Fatalf("entry %d once there is room: %v", index, err)
		}
	}
	waitFor(3, ents[2], "commitlog")
	if n := queueLen(r); n != 3 {
		t.Fatalf("%d messages stored after the entry that waited, want 3", n)
	}
	waitFor(4, metaEntryBytes(t, 1, MetaOp{Kind: MetaPutTopic, Topic: &metastore.Topic{Name: "t2", QueueCount: 2}}), "meta")
	if _, ok := r.Store().Meta().Topic("t2"); !ok {
		t.Fatal("the topic applied once there was room is missing")
	}
	// PersistEvery is 4: entry 8 records the position, which fails here.
	for i := 5; i <= 7; i++ {
		if err := r.Apply(uint64(i), ents[i-3]); err != nil {
			t.Fatal(err)
		}
	}
	full("applied")
	if err := r.Apply(8, nil); err != nil || r.Failed() != nil || r.Applied() != 8 || r.Persisted() != 4 {
		t.Fatalf("position not recorded for lack of space: %v, failed %v, applied %d, recorded %d; want applied 8, recorded 4",
			err, r.Failed(), r.Applied(), r.Persisted())
	}
	efs.SetInject(nil)
	if err := r.Persist(); err != nil || r.Persisted() != 8 {
		t.Fatalf("position once there is room: %v, recorded %d", err, r.Persisted())
	}
	if n := queueLen(r); n != 6 {
		t.Fatalf("%d messages stored, want 6", n)
	}
}
