package storage

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"strings"
	"testing"

	"github.com/mqgate/mqgate/storage/message"
	"github.com/mqgate/mqgate/storage/vfs"
)

// A brand-new store says so (Fresh), and is not reported as one whose
// last run did not shut down cleanly; a reopened one is not fresh, clean
// after a clean close and not after a crash.
func TestRecoveryTellsANewStoreFromAnUncleanOne(t *testing.T) {
	fs := vfs.NewMem()
	var logs bytes.Buffer
	o := testOpts(fs)
	o.Logger = slog.New(slog.NewJSONHandler(&logs, nil))
	open := func() *Store {
		t.Helper()
		s, err := Open("/data", o)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	s := open()
	if r := s.Recovery(); !r.Fresh {
		t.Fatalf("a new store: %+v, want Fresh", r)
	}
	if !strings.Contains(logs.String(), "storage: created a new store") || strings.Contains(logs.String(), `"clean":false`) {
		t.Fatalf("a new store's log: %s", logs.String())
	}
	if _, err := s.Append(context.Background(), &message.Message{Topic: "t", Body: []byte("b")}); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	s = open()
	if r := s.Recovery(); r.Fresh || !r.Clean {
		t.Fatalf("reopened after a clean close: %+v, want clean, not fresh", r)
	}
	s.crash()
	o.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	s = open()
	defer s.Close(context.Background())
	if r := s.Recovery(); r.Fresh || r.Clean {
		t.Fatalf("reopened after a crash: %+v, want neither clean nor fresh", r)
	}
}
