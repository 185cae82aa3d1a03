package e2eutil

import (
	"bytes"
	"context"
	"errors"
	"io"
	"runtime"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
)

// endedStream is a ReceiveMessage stream that has already ended.
type endedStream struct{ grpc.ClientStream }

func (endedStream) RecvMsg(any) error { return io.EOF }

func openEnded(t *testing.T, method string) grpc.ClientStream {
	t.Helper()
	s, err := receiveEndGuard(context.Background(), &grpc.StreamDesc{ServerStreams: true}, nil, method,
		func(context.Context, *grpc.StreamDesc, *grpc.ClientConn, string, ...grpc.CallOption) (grpc.ClientStream, error) {
			return endedStream{}, nil
		})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// stackOf is goroutine id's part of a dump of all goroutines.
func stackOf(id int64) string {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	for _, block := range bytes.Split(buf, []byte("\n\n")) {
		if bytes.HasPrefix(block, []byte("goroutine "+strconv.FormatInt(id, 10)+" [")) {
			return string(block)
		}
	}
	return ""
}

// The end of a receive stream reaches the reader only once the goroutine
// that opened the stream waits in its select: the client's "done"
// hand-off then cannot lose to its cancel.
func TestReceiveEndWaitsForTheOpenersSelect(t *testing.T) {
	var inSelect, sawSelect atomic.Bool
	gate := make(chan struct{})
	reader := make(chan int64, 1)
	returned := make(chan struct{})
	go func() { // the opener, as in the client's receiveMessage
		s := openEnded(t, receiveMethod)
		done := make(chan bool, 1)
		ctx, cancel := context.WithCancel(context.Background())
		go func() {
			reader <- goroutineID()
			if err := s.RecvMsg(nil); !errors.Is(err, io.EOF) {
				t.Errorf("RecvMsg: %v, want EOF", err)
			}
			sawSelect.Store(inSelect.Load())
			close(returned)
			done <- true
			cancel()
		}()
		<-gate // not a select: the end must be held back here
		inSelect.Store(true)
		select {
		case <-done:
		case <-ctx.Done():
		}
	}()
	id := <-reader
	// Open the gate once the reader is seen held in the guard, or once it
	// returned (which fails the test below).
	for {
		select {
		case <-returned:
		default:
			if !bytes.Contains([]byte(stackOf(id)), []byte("awaitParkedInSelect")) {
				runtime.Gosched()
				continue
			}
		}
		break
	}
	close(gate)
	<-returned
	if !sawSelect.Load() {
		t.Fatal("the stream's end reached the reader before the opener was in its select")
	}
}

// Once the opener is gone there is nobody to wait for: the end passes.
func TestReceiveEndPassesWhenTheOpenerIsGone(t *testing.T) {
	streams := make(chan grpc.ClientStream)
	go func() { streams <- openEnded(t, receiveMethod) }()
	s := <-streams
	start := time.Now()
	if err := s.RecvMsg(nil); !errors.Is(err, io.EOF) {
		t.Fatalf("RecvMsg: %v, want EOF", err)
	}
	if waited := time.Since(start); waited >= guardWait {
		t.Fatalf("waited %v for an opener that had exited", waited)
	}
}

// Other streams are not wrapped.
func TestOnlyReceiveStreamsAreGuarded(t *testing.T) {
	if _, ok := openEnded(t, "/apache.rocketmq.v2.MessagingService/Telemetry").(*guardedStream); ok {
		t.Fatal("a Telemetry stream was guarded")
	}
	if _, ok := openEnded(t, receiveMethod).(*guardedStream); !ok {
		t.Fatal("a ReceiveMessage stream was not guarded")
	}
}

func TestGoroutineState(t *testing.T) {
	block := make(chan struct{})
	ids := make(chan int64)
	go func() {
		ids <- goroutineID()
		select {
		case <-block:
		case <-t.Context().Done():
		}
	}()
	id := <-ids
	buf := make([]byte, 16) // grows
	for {
		state, ok, b := goroutineState(buf, id)
		buf = b
		if !ok {
			t.Fatalf("goroutine %d not found", id)
		}
		if state == "select" {
			break
		}
		runtime.Gosched()
	}
	close(block)
	if _, ok, _ := goroutineState(buf, 1<<40); ok {
		t.Fatal("found a goroutine that does not exist")
	}
}
