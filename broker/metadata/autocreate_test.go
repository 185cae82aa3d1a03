package metadata

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"sync"
	"testing"

	"github.com/mqgate/mqgate/storage/metastore"
	"github.com/mqgate/mqgate/storage/vfs"
)

// With auto-create, each topic and group it creates is logged once, at
// warn level, however many callers ask for it at once; names created
// explicitly, dead-letter and retry topics are not.
func TestAutoCreateWarnsOncePerName(t *testing.T) {
	ctx := context.Background()
	st, err := metastore.Open(vfs.NewMem(), "/meta", metastore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var logs bytes.Buffer
	s := New(Config{AutoCreate: true, Logger: slog.New(slog.NewJSONHandler(lockedWriter{&mu, &logs}, nil))}, st, nil)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			if _, err := s.Topic(ctx, "nosuch"); err != nil {
				t.Error(err)
			}
			if _, err := s.Group(ctx, "typo-group"); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if _, err := s.Topic(ctx, "nosuch"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.EnsureDLQ(ctx, "typo-group"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.EnsureRetry(ctx, "typo-group"); err != nil {
		t.Fatal(err)
	}
	var warned []string
	for _, line := range bytes.Split(bytes.TrimSpace(logs.Bytes()), []byte("\n")) {
		var m map[string]any
		if err := json.Unmarshal(line, &m); err != nil {
			t.Fatalf("%v: %s", err, line)
		}
		if m["level"] != "WARN" {
			t.Errorf("logged at %v: %s", m["level"], line)
		}
		if v, ok := m["topic"].(string); ok {
			warned = append(warned, "topic "+v)
		}
		if v, ok := m["group"].(string); ok {
			warned = append(warned, "group "+v)
		}
	}
	if len(warned) != 2 || !contains(warned, "topic nosuch") || !contains(warned, "group typo-group") {
		t.Fatalf("warned of %q, want topic nosuch and group typo-group once each", warned)
	}
}

func contains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

type lockedWriter struct {
	mu *sync.Mutex
	w  *bytes.Buffer
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
