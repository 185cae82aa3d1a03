package storage

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/mqgate/mqgate/storage/message"
)

// A record larger than the dispatcher's chunk (1 MiB) — a message near
// the 4 MiB body limit — must be dispatched like any other, not reported
// as corrupt.
func TestDispatchRecordLargerThanChunk(t *testing.T) {
	forEachMode(t, func(t *testing.T, mode Options) {
		testDispatchRecordLargerThanChunk(t, Options{FS: mode.FS, SegmentSize: 64 << 20, FlushMode: mode.FlushMode, StagingDir: mode.StagingDir})
	})
}

func testDispatchRecordLargerThanChunk(t *testing.T, o Options) {
	st, err := Open("/data", o)
	if err != nil {
		t.Fatal(err)
	}
	body := bytes.Repeat([]byte{'x'}, 4<<20)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res, err := st.Append(ctx, &message.Message{Topic: "big", QueueID: 0, BornTime: 1, BornHost: "h:1", Body: body},
		&message.Message{Topic: "big", QueueID: 0, BornTime: 2, BornHost: "h:1", Body: []byte("small")})
	if err != nil {
		t.Fatal(err)
	}
	if err := st.WaitDispatched(ctx, res.End); err != nil {
		t.Fatalf("dispatching a %d-byte body: %v", len(body), err)
	}
	if err := st.Close(ctx); err != nil {
		t.Fatalf("close: %v", err)
	}
}
