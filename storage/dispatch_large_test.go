package storage

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/mqgate/mqgate/storage/message"
	"github.com/mqgate/mqgate/storage/vfs"
)

// A record larger than the dispatcher's chunk (1 MiB) — a message near
// the 4 MiB body limit — must be dispatched like any other, not reported
// as corrupt.
func TestDispatchRecordLargerThanChunk(t *testing.T) {
	st, err := Open("/data", Options{FS: vfs.NewMem(), SegmentSize: 64 << 20})
	if err != nil {
		t.Fatal(err)
	}
	body := bytes.Repeat([]byte{'x'}, 4<<20)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := st.Append(ctx, &message.Message{Topic: "big", QueueID: 0, BornTime: 1, BornHost: "h:1", Body: body},
		&message.Message{Topic: "big", QueueID: 0, BornTime: 2, BornHost: "h:1", Body: []byte("small")}); err != nil {
		t.Fatal(err)
	}
	_, written := st.LogRange()
	if err := st.WaitDispatched(ctx, written); err != nil {
		t.Fatalf("dispatching a %d-byte body: %v", len(body), err)
	}
	if err := st.Close(ctx); err != nil {
		t.Fatalf("close: %v", err)
	}
}
