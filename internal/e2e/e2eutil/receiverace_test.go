package e2eutil

import (
	"context"
	"errors"
	"io"
	"testing"
	"time"

	"google.golang.org/grpc"
)

// scriptedStream is a ReceiveMessage stream whose RecvMsg returns the
// next of its errors (nil: a message).
type scriptedStream struct {
	grpc.ClientStream
	errs []error
}

func (s *scriptedStream) RecvMsg(any) error {
	err := s.errs[0]
	s.errs = s.errs[1:]
	return err
}

func open(t *testing.T, method string, s grpc.ClientStream) grpc.ClientStream {
	t.Helper()
	g, err := receiveEndGuard(context.Background(), &grpc.StreamDesc{ServerStreams: true}, nil, method,
		func(context.Context, *grpc.StreamDesc, *grpc.ClientConn, string, ...grpc.CallOption) (grpc.ClientStream, error) {
			return s, nil
		})
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// watchHolds records the holds instead of sleeping them.
func watchHolds(t *testing.T) *[]time.Duration {
	var holds []time.Duration
	holdFor = func(d time.Duration) { holds = append(holds, d) }
	t.Cleanup(func() { holdFor = time.Sleep })
	return &holds
}

// A stream that ends at once is held until receiveEndHold after the
// reader's first ask; its messages are not held.
func TestReceiveEndHeldBack(t *testing.T) {
	holds := watchHolds(t)
	g := open(t, receiveMethod, &scriptedStream{errs: []error{nil, nil, io.EOF}})
	start := time.Now()
	for range 2 {
		if err := g.RecvMsg(nil); err != nil {
			t.Fatal(err)
		}
	}
	if len(*holds) != 0 {
		t.Fatalf("messages held: %v", *holds)
	}
	if err := g.RecvMsg(nil); !errors.Is(err, io.EOF) {
		t.Fatalf("RecvMsg: %v, want EOF", err)
	}
	if len(*holds) != 1 || (*holds)[0] <= 0 || (*holds)[0] > receiveEndHold || time.Since(start)+(*holds)[0] < receiveEndHold {
		t.Fatalf("holds %v for an end at once, want one that reaches %v after the first ask", *holds, receiveEndHold)
	}
}

// The end of a stream older than the hold (a long poll) is not held;
// other streams are not wrapped.
func TestReceiveEndNotHeldAfterALongPoll(t *testing.T) {
	holds := watchHolds(t)
	g := open(t, receiveMethod, &scriptedStream{errs: []error{nil, io.EOF}})
	if err := g.RecvMsg(nil); err != nil {
		t.Fatal(err)
	}
	g.(*guardedStream).firstAsk = time.Now().Add(-time.Second) // the poll began a second ago
	if err := g.RecvMsg(nil); !errors.Is(err, io.EOF) {
		t.Fatalf("RecvMsg: %v, want EOF", err)
	}
	if len(*holds) != 0 {
		t.Fatalf("the end of a long poll held: %v", *holds)
	}
	if _, ok := open(t, "/apache.rocketmq.v2.MessagingService/Telemetry", &scriptedStream{}).(*guardedStream); ok {
		t.Fatal("a Telemetry stream was guarded")
	}
}
