package storage

import (
	"errors"
	"strings"
	"testing"

	"github.com/mqgate/mqgate/storage/message"
	"github.com/mqgate/mqgate/storage/vfs"
)

func TestFormatWrittenOnCreate(t *testing.T) {
	fs := vfs.NewMem()
	mustClose(t, mustOpen(t, "/d", testOpts(fs)))
	b, err := vfs.ReadFile(fs, "/d/FORMAT")
	if err != nil {
		t.Fatal(err)
	}
	if string(b) != "mqgate-data-format 1\n" {
		t.Fatalf("FORMAT holds %q", b)
	}
	if v, present, err := readFormat(fs, "/d"); err != nil || !present || v != FormatVersion {
		t.Fatalf("read back %d %v %v", v, present, err)
	}
}

// TestFormatNewerRefused: a directory written by a newer mqgate (a higher
// format version) is refused with a clear error, and left as it is.
func TestFormatNewerRefused(t *testing.T) {
	fs := vfs.NewMem()
	s := mustOpen(t, "/d", testOpts(fs))
	appendOne(t, s, msg("T", 0, 1))
	mustClose(t, s)
	if err := vfs.WriteFileAtomic(fs, "/d/FORMAT", []byte("mqgate-data-format 7\n")); err != nil {
		t.Fatal(err)
	}
	before := logFiles(t, fs, "/d")
	_, err := Open("/d", testOpts(fs))
	if !errors.Is(err, ErrFormat) {
		t.Fatalf("open: %v", err)
	}
	if want := "data directory /d has format version 7; this mqgate supports up to 1"; !strings.Contains(err.Error(), want) {
		t.Fatalf("error %q does not say %q", err, want)
	}
	if _, err := Verify("/d", testOpts(fs)); !errors.Is(err, ErrFormat) {
		t.Fatalf("verify: %v", err)
	}
	if b, _ := vfs.ReadFile(fs, "/d/FORMAT"); string(b) != "mqgate-data-format 7\n" {
		t.Fatalf("FORMAT rewritten: %q", b)
	}
	after := logFiles(t, fs, "/d")
	for n, b := range before {
		if string(after[n]) != string(b) {
			t.Fatalf("segment %s changed", n)
		}
	}
	// The lock was let go: the directory can be opened once its version
	// is one this build reads.
	vfs.WriteFileAtomic(fs, "/d/FORMAT", []byte("mqgate-data-format 1\n"))
	mustClose(t, mustOpen(t, "/d", testOpts(fs)))
}

func TestFormatGarbledRefused(t *testing.T) {
	fs := vfs.NewMem()
	mustClose(t, mustOpen(t, "/d", testOpts(fs)))
	vfs.WriteFileAtomic(fs, "/d/FORMAT", []byte("nonsense"))
	if _, err := Open("/d", testOpts(fs)); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "/d/FORMAT") {
		t.Fatalf("open: %v", err)
	}
	r, err := Verify("/d", testOpts(fs))
	if err != nil || !r.Damaged() || r.Problems[0].Part != "format" {
		t.Fatalf("verify: %+v %v", r, err)
	}
}

// TestFormatUpgradeFromUnversioned: a data directory of the layout
// before the FORMAT file (version 1 without the file) opens, keeps every
// message and metadata, and gets its version recorded.
func TestFormatUpgradeFromUnversioned(t *testing.T) {
	fs := vfs.NewMem()
	s := mustOpen(t, "/d", testOpts(fs))
	var ents []AppendEntry
	var msgs []*message.Message
	for i := 0; i < 120; i++ {
		m := msg("T", int32(i%3), i)
		ents = append(ents, appendOne(t, s, m))
		msgs = append(msgs, m)
	}
	mustClose(t, s)
	if err := fs.Remove("/d/FORMAT"); err != nil {
		t.Fatal(err)
	}
	s = mustOpen(t, "/d", testOpts(fs))
	if !s.Recovery().Clean {
		t.Fatalf("recovery %+v: the upgrade took the recovery path", s.Recovery())
	}
	for i, e := range ents {
		m, err := s.ReadMessage(e.PhysOffset, e.Size)
		if err != nil || !sameMessage(m, msgs[i]) {
			t.Fatalf("record %d: %v", i, err)
		}
	}
	for q := int32(0); q < 3; q++ {
		if got := readAllQueue(t, s, "T", q); len(got) != 40 {
			t.Fatalf("queue %d holds %d", q, len(got))
		}
	}
	verifyConsistent(t, s)
	mustClose(t, s)
	if v, present, err := readFormat(fs, "/d"); err != nil || !present || v != 1 {
		t.Fatalf("FORMAT after upgrade: %d %v %v", v, present, err)
	}
}
