package metastore

import (
	"errors"
	"reflect"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mqgate/mqgate/storage/internal/serr"
	"github.com/mqgate/mqgate/storage/vfs"
)

func open(t *testing.T, fs vfs.FS, o Options) *Store {
	t.Helper()
	s, err := Open(fs, "/m", o)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestRoundTrip(t *testing.T) {
	fs := vfs.NewMem()
	s := open(t, fs, Options{})
	topic := Topic{Name: "T", Type: TopicFIFO, QueueCount: 8, Perm: PermReadWrite, Attributes: map[string]string{"a": "b"}, CreateTime: 5}
	group := Group{Name: "G", MaxDeliveryAttempts: 16, FIFO: true,
		RetryPolicy: RetryPolicy{Initial: time.Second, Max: time.Minute, Multiplier: 2, Customized: []time.Duration{time.Second}}}
	if err := s.PutTopic(topic); err != nil {
		t.Fatal(err)
	}
	if err := s.PutGroup(group); err != nil {
		t.Fatal(err)
	}
	k := OffsetKey{"G", "T", 3}
	if d := s.CommitOffset(k, 42); d != DurabilityMemory {
		t.Fatal("commit offset claims durability")
	}
	if err := s.SaveBlob("revive", []byte{1, 2, 3}); err != nil {
		t.Fatal(err)
	}
	if err := s.SaveBlob("empty", nil); err != nil {
		t.Fatal(err)
	}
	// Offsets are not durable before Flush: a power loss forgets them.
	crashed := open(t, fs.CrashClone(nil), Options{})
	if _, ok := crashed.Offset(k); ok {
		t.Fatal("unflushed offset survived a crash")
	}
	if got, ok := crashed.Topic("T"); !ok || !reflect.DeepEqual(got, topic) {
		t.Fatalf("durable topic lost: %+v", got)
	}
	if err := s.Flush(); err != nil {
		t.Fatal(err)
	}
	r := open(t, fs.CrashClone(nil), Options{})
	if got, _ := r.Group("G"); !reflect.DeepEqual(got, group) {
		t.Fatalf("group %+v", got)
	}
	if v, ok := r.Offset(k); !ok || v != 42 {
		t.Fatalf("offset %d %v", v, ok)
	}
	if b, ok, err := r.LoadBlob("revive"); err != nil || !ok || string(b) != "\x01\x02\x03" {
		t.Fatalf("blob %v %v %v", b, ok, err)
	}
	if b, ok, err := r.LoadBlob("empty"); err != nil || !ok || len(b) != 0 {
		t.Fatalf("empty blob %v %v %v", b, ok, err)
	}
	if _, ok, err := r.LoadBlob("none"); ok || err != nil {
		t.Fatal("missing blob")
	}
	if err := r.DeleteTopic("T"); err != nil {
		t.Fatal(err)
	}
	if _, ok := r.Offset(k); ok {
		t.Fatal("offsets of deleted topic kept")
	}
	if err := r.DeleteTopic("T"); !errors.Is(err, serr.ErrNotFound) {
		t.Fatal(err)
	}
	if err := r.PutTopic(Topic{Name: "", QueueCount: 1}); !errors.Is(err, serr.ErrInvalid) {
		t.Fatal(err)
	}
}

func TestCorruptSnapshot(t *testing.T) {
	fs := vfs.NewMem()
	s := open(t, fs, Options{})
	s.PutTopic(Topic{Name: "A", QueueCount: 1})
	s.PutTopic(Topic{Name: "B", QueueCount: 1}) // topics.snap.prev holds {A}
	f, _ := fs.OpenRW("/m/topics.snap")
	f.WriteAt([]byte{'X'}, 20)
	f.Close()
	_, err := Open(fs, "/m", Options{})
	if !errors.Is(err, serr.ErrCorrupt) || !strings.Contains(err.Error(), "topics.snap") {
		t.Fatalf("corrupt snapshot: %v", err)
	}
	r := open(t, fs, Options{FallbackToPrevious: true})
	if _, ok := r.Topic("A"); !ok {
		t.Fatal("previous snapshot not used")
	}
	if _, ok := r.Topic("B"); ok {
		t.Fatal("corrupt snapshot used")
	}
}

// TestCrashBetweenWriteAndRename: a power loss at any step of a snapshot
// write leaves either the old or the new contents, never nothing.
func TestCrashBetweenWriteAndRename(t *testing.T) {
	for _, failOn := range []string{"write", "sync", "rename1", "rename2", "syncdir"} {
		t.Run(failOn, func(t *testing.T) {
			mem := vfs.NewMem()
			efs := vfs.NewErrorFS(mem, nil)
			s := open(t, efs, Options{})
			if err := s.PutTopic(Topic{Name: "old", QueueCount: 1}); err != nil {
				t.Fatal(err)
			}
			renames := 0
			efs.SetInject(func(op vfs.Op, path string) error {
				switch {
				case failOn == "write" && op == vfs.OpWrite,
					failOn == "sync" && op == vfs.OpSync,
					failOn == "syncdir" && op == vfs.OpSyncDir:
					return syscall.EIO
				case op == vfs.OpRename:
					renames++
					if failOn == "rename1" && renames == 1 || failOn == "rename2" && renames == 2 {
						return syscall.EIO
					}
				}
				return nil
			})
			if err := s.PutTopic(Topic{Name: "new", QueueCount: 1}); err == nil {
				t.Fatal("injected failure not reported")
			}
			r := open(t, mem.CrashClone(nil), Options{})
			_, hasOld := r.Topic("old")
			_, hasNew := r.Topic("new")
			if !hasOld {
				t.Fatalf("after crash: old=%v new=%v", hasOld, hasNew)
			}
		})
	}
}

func FuzzDecodeSnapshot(f *testing.F) {
	f.Add(EncodeSnapshot([]byte(`[{"name":"T"}]`)))
	f.Add([]byte("MQGS"))
	f.Fuzz(func(t *testing.T, b []byte) {
		p, err := DecodeSnapshot(b)
		if err != nil {
			return
		}
		if string(EncodeSnapshot(p)) != string(b) {
			t.Fatal("accepted snapshot does not re-encode identically")
		}
	})
}

// TestSnapshotNewerVersionRefused: a snapshot written by a newer mqgate
// is refused with ErrFormat, even with FallbackToPrevious (the previous
// snapshot would lose what the newer one holds).
func TestSnapshotNewerVersionRefused(t *testing.T) {
	fs := vfs.NewMem()
	s, err := Open(fs, "/m", Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.PutTopic(Topic{Name: "A", QueueCount: 1}); err != nil {
		t.Fatal(err)
	}
	if err := s.PutTopic(Topic{Name: "B", QueueCount: 1}); err != nil {
		t.Fatal(err)
	}
	s.Close()
	b, err := vfs.ReadFile(fs, "/m/topics.snap")
	if err != nil {
		t.Fatal(err)
	}
	b[4] = SnapshotVersion + 1
	if err := vfs.WriteFileAtomic(fs, "/m/topics.snap", b); err != nil {
		t.Fatal(err)
	}
	if _, err := DecodeSnapshot(b); !errors.Is(err, serr.ErrFormat) || errors.Is(err, serr.ErrCorrupt) {
		t.Fatalf("decode: %v", err)
	}
	for _, fb := range []bool{false, true} {
		_, err := Open(fs, "/m", Options{FallbackToPrevious: fb})
		if !errors.Is(err, serr.ErrFormat) || !strings.Contains(err.Error(), "format version 2; this mqgate supports up to 1") {
			t.Fatalf("open (fallback %v): %v", fb, err)
		}
	}
}

// TestFailedWriteChangesNothing: when a metadata snapshot cannot be
// written (a meta directory that refuses writes, a full disk), the change
// is refused and memory stays as it was: nothing is accepted against a
// topic or group that a restart would not know, and a deletion that did
// not persist does not hide what is still on disk.
func TestFailedWriteChangesNothing(t *testing.T) {
	for _, failOn := range []vfs.Op{vfs.OpCreate, vfs.OpWrite, vfs.OpSync, vfs.OpRename} {
		t.Run(failOn.String(), func(t *testing.T) {
			mem := vfs.NewMem()
			efs := vfs.NewErrorFS(mem, nil)
			s := open(t, efs, Options{})
			if err := s.PutTopic(Topic{Name: "kept", QueueCount: 1}); err != nil {
				t.Fatal(err)
			}
			if err := s.PutGroup(Group{Name: "G"}); err != nil {
				t.Fatal(err)
			}
			efs.SetInject(func(op vfs.Op, path string) error {
				if op == failOn && strings.HasPrefix(path, "/m/") {
					return syscall.EROFS
				}
				return nil
			})
			if err := s.PutTopic(Topic{Name: "new", QueueCount: 1}); !errors.Is(err, syscall.EROFS) {
				t.Fatalf("put topic on a read-only meta dir: %v", err)
			}
			if _, ok := s.Topic("new"); ok {
				t.Fatal("a topic that was not persisted is visible")
			}
			if err := s.PutTopic(Topic{Name: "kept", QueueCount: 9}); err == nil {
				t.Fatal("replacing a topic on a read-only meta dir succeeded")
			}
			if tp, _ := s.Topic("kept"); tp.QueueCount != 1 {
				t.Fatalf("a replacement that was not persisted is visible: %+v", tp)
			}
			if err := s.PutGroup(Group{Name: "H"}); err == nil {
				t.Fatal("put group on a read-only meta dir succeeded")
			}
			if _, ok := s.Group("H"); ok {
				t.Fatal("a group that was not persisted is visible")
			}
			if err := s.DeleteTopic("kept"); err == nil {
				t.Fatal("delete topic on a read-only meta dir succeeded")
			}
			if _, ok := s.Topic("kept"); !ok {
				t.Fatal("a deletion that was not persisted hid the topic")
			}
			if err := s.DeleteGroup("G"); err == nil {
				t.Fatal("delete group on a read-only meta dir succeeded")
			}
			if _, ok := s.Group("G"); !ok {
				t.Fatal("a deletion that was not persisted hid the group")
			}
			if got := len(s.Topics()); got != 1 {
				t.Fatalf("%d topics listed, want 1", got)
			}
			// What a restart sees agrees with what was answered.
			r := open(t, mem.CrashClone(nil), Options{})
			if _, ok := r.Topic("new"); ok {
				t.Fatal("refused topic present after restart")
			}
			if tp, ok := r.Topic("kept"); !ok || tp.QueueCount != 1 {
				t.Fatalf("kept topic after restart: %+v %v", tp, ok)
			}
			// Once writes work again, the next change persists the table
			// as memory has it.
			efs.SetInject(nil)
			if err := s.PutTopic(Topic{Name: "later", QueueCount: 1}); err != nil {
				t.Fatal(err)
			}
			r = open(t, mem.CrashClone(nil), Options{})
			if ts := r.Topics(); len(ts) != 2 || ts[0].Name != "kept" || ts[1].Name != "later" {
				t.Fatalf("topics after restart: %+v", ts)
			}
		})
	}
}

// TestCorruptSnapshotMessage: the error about a corrupt snapshot names
// the previous snapshot only when one is on disk.
func TestCorruptSnapshotMessage(t *testing.T) {
	corrupt := func(fs vfs.FS) {
		f, _ := fs.OpenRW("/m/topics.snap")
		f.WriteAt([]byte{'X'}, 20)
		f.Close()
	}
	fs := vfs.NewMem()
	s := open(t, fs, Options{})
	s.PutTopic(Topic{Name: "A", QueueCount: 1}) // the first snapshot: none before it
	corrupt(fs)
	_, err := Open(fs, "/m", Options{})
	if !errors.Is(err, serr.ErrCorrupt) || strings.Contains(err.Error(), ".prev") || !strings.Contains(err.Error(), "no previous snapshot") {
		t.Fatalf("corrupt first snapshot: %v", err)
	}
	fs = vfs.NewMem()
	s = open(t, fs, Options{})
	s.PutTopic(Topic{Name: "A", QueueCount: 1})
	s.PutTopic(Topic{Name: "B", QueueCount: 1})
	corrupt(fs)
	_, err = Open(fs, "/m", Options{})
	if !errors.Is(err, serr.ErrCorrupt) || !strings.Contains(err.Error(), "/m/topics.snap.prev") {
		t.Fatalf("corrupt snapshot with a previous one: %v", err)
	}
	if _, _, serr := fs.Stat("/m/topics.snap.prev"); serr != nil {
		t.Fatalf("the file the message names: %v", serr)
	}
}
