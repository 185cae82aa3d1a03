package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mqgate/mqgate/storage"
	"github.com/mqgate/mqgate/storage/message"
)

// damagedDataDir writes n messages into DIR/store, closes it, removes the
// checkpoint and flips one byte inside message bad, and returns DIR, the
// entries and the store options.
func damagedDataDir(t *testing.T, n, bad int) (string, []storage.AppendEntry, storage.Options) {
	t.Helper()
	dir := t.TempDir()
	o := storage.Options{SegmentSize: 64 << 10, MaxBodySize: 16 << 10, MaxRecordSize: 32 << 10, StagingDir: "off"}
	s, err := storage.Open(filepath.Join(dir, "store"), o)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	var ents []storage.AppendEntry
	for i := 0; i < n; i++ {
		m := &message.Message{Topic: "T", QueueID: int32(i % 2), Body: bytes.Repeat([]byte{byte('a' + i%26)}, 500)}
		m.Set(message.PropUniqKey, fmt.Sprintf("id-%d", i))
		res, err := s.Append(ctx, m)
		if err != nil {
			t.Fatal(err)
		}
		ents = append(ents, res.Entries[0])
	}
	if err := s.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(dir, "store", "checkpoint")); err != nil {
		t.Fatal(err)
	}
	// The segment holding the damaged record.
	segs, _ := filepath.Glob(filepath.Join(dir, "store", "commitlog", "*.log"))
	pos := ents[bad].PhysOffset + int64(ents[bad].Size) - 100
	var seg string
	var base int64
	for _, p := range segs {
		var b int64
		fmt.Sscanf(filepath.Base(p), "%020d.log", &b)
		if b <= pos {
			seg, base = p, b
		}
	}
	f, err := os.OpenFile(seg, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	var c [1]byte
	f.ReadAt(c[:], pos-base)
	c[0] ^= 0xff
	f.WriteAt(c[:], pos-base)
	f.Close()
	return dir, ents, o
}

func runCmd(args ...string) (int, string, string) {
	var out, errb bytes.Buffer
	code := run(context.Background(), args, &out, &errb)
	return code, out.String(), errb.String()
}

func TestVerifyRepairCommands(t *testing.T) {
	const n, bad = 400, 250
	dir, ents, o := damagedDataDir(t, n, bad)
	store := filepath.Join(dir, "store")

	// The store refuses to open and says what to run.
	if _, err := storage.Open(store, o); err == nil || !strings.Contains(err.Error(), "mqgate verify --data-dir "+store) {
		t.Fatalf("open: %v", err)
	}

	code, out, errOut := runCmd("verify", "--data-dir", dir)
	if code != exitFail {
		t.Fatalf("verify exit %d: %s %s", code, out, errOut)
	}
	want := []string{
		fmt.Sprintf("DAMAGE commitlog: %s", filepath.Join(store, "commitlog")),
		fmt.Sprintf("at log position %d", ents[bad].PhysOffset),
		fmt.Sprintf("repair: cut the log at position %d", ents[bad].PhysOffset),
		fmt.Sprintf("holding %d valid records", n-bad-1),
		"result: DAMAGED",
	}
	for _, w := range want {
		if !strings.Contains(out, w) {
			t.Fatalf("verify output lacks %q:\n%s", w, out)
		}
	}
	// The store directory itself is accepted too.
	report := func(s string) string { return s[:strings.Index(s, "result:")] }
	if code, out2, _ := runCmd("verify", "--data-dir", store); code != exitFail || report(out2) != report(out) {
		t.Fatalf("verify of the store dir: %d\n%s", code, out2)
	}

	// Without --yes, repair prints the plan and changes nothing.
	before := dirSnapshot(t, store)
	code, out, _ = runCmd("repair", "--data-dir", dir)
	if code != exitFail || !strings.Contains(out, "nothing changed") || !strings.Contains(out, "--yes") {
		t.Fatalf("repair without --yes: %d\n%s", code, out)
	}
	if after := dirSnapshot(t, store); after != before {
		t.Fatal("repair without --yes changed the store")
	}

	code, out, errOut = runCmd("repair", "--data-dir", dir, "--yes")
	if code != exitOK || !strings.Contains(out, fmt.Sprintf("done: cut the log at position %d", ents[bad].PhysOffset)) ||
		!strings.Contains(out, "repair-saved") {
		t.Fatalf("repair --yes: %d\n%s\n%s", code, out, errOut)
	}
	if code, out, _ := runCmd("verify", "--data-dir", dir); code != exitOK || !strings.Contains(out, "result: no damage") {
		t.Fatalf("verify after repair: %d\n%s", code, out)
	}
	s, err := storage.Open(store, o)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(context.Background())
	for i := 0; i < bad; i++ {
		m, err := s.ReadMessage(ents[i].PhysOffset, ents[i].Size)
		if err != nil || m.UniqKey() != fmt.Sprintf("id-%d", i) {
			t.Fatalf("message %d after repair: %v", i, err)
		}
	}
	_, hi0 := s.QueueRange("T", 0)
	_, hi1 := s.QueueRange("T", 1)
	if hi0+hi1 != bad {
		t.Fatalf("queues hold %d messages, want %d", hi0+hi1, bad)
	}
}

func TestVerifyUsage(t *testing.T) {
	if code, out, _ := runCmd("verify", "-h"); code != exitOK || !strings.Contains(out, "Usage: mqgate verify") {
		t.Fatalf("verify -h: %d %q", code, out)
	}
	if code, _, errOut := runCmd("repair", "extra"); code != exitUsage || !strings.Contains(errOut, `unexpected argument "extra"`) {
		t.Fatalf("repair extra: %d %q", code, errOut)
	}
	if code, _, errOut := runCmd("verify", "--data-dir", t.TempDir()); code != exitFail || !strings.Contains(errOut, "no mqgate store") {
		t.Fatalf("verify of an empty dir: %d %q", code, errOut)
	}
}

// dirSnapshot is every file's path, size and contents under dir.
func dirSnapshot(t *testing.T, dir string) string {
	t.Helper()
	var b strings.Builder
	err := filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err != nil || fi.IsDir() || filepath.Base(p) == "LOCK" {
			return err
		}
		data, err := os.ReadFile(p)
		fmt.Fprintf(&b, "%s %d %x\n", p, fi.Size(), data)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// TestVerifyNewerFormat: a store written by a newer mqgate is refused by
// verify and repair with the version message, and left alone.
func TestVerifyNewerFormat(t *testing.T) {
	dir, _, _ := damagedDataDir(t, 10, 5)
	store := filepath.Join(dir, "store")
	if err := os.WriteFile(filepath.Join(store, "FORMAT"), []byte("mqgate-data-format 9\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	before := dirSnapshot(t, store)
	want := fmt.Sprintf("data directory %s has format version 9; this mqgate supports up to 1", store)
	for _, args := range [][]string{{"verify", "--data-dir", dir}, {"repair", "--data-dir", dir, "--yes"}} {
		if code, _, errOut := runCmd(args...); code != exitFail || !strings.Contains(errOut, want) {
			t.Fatalf("%v: %d %q", args, code, errOut)
		}
	}
	if dirSnapshot(t, store) != before {
		t.Fatal("the store changed")
	}
}
