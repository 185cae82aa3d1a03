package e2eutil

import (
	"context"
	"errors"
	"io"
	"time"

	rmq "github.com/apache/rocketmq-clients/golang/v5"
	"google.golang.org/grpc"
)

// The official Go client (v5.1.3) reads a ReceiveMessage stream in a
// goroutine that, at the stream's end, first signals "done" and then
// cancels the call's context, while the goroutine that opened the stream
// waits on both in one select. If that goroutine has not reached its
// select yet when the stream ends, the select finds both ready, picks one
// at random, and half the time reports "[error] CODE=DEADLINE_EXCEEDED"
// for a receive that succeeded: the messages it carried stay invisible
// and come back later as a second attempt. Once the opener is parked in
// the select, the "done" hand-off reaches it before the cancel can.
//
// The reading goroutine is started by the opener right before that
// select, so when the reader first asks for a message the opener is a
// few instructions from parking. receiveEndGuard holds the end of each
// ReceiveMessage stream back until receiveEndHold has passed since that
// first ask: only an opener kept off its core for longer, within those
// few instructions, can still lose the toss. (Watching the opener's state
// instead takes a dump of every goroutine with the world stopped, many
// milliseconds per receive in a test process.) The server sees nothing
// of this.
const receiveMethod = "/apache.rocketmq.v2.MessagingService/ReceiveMessage"

// receiveEndHold: how long after the reader's first ask the end of a
// receive stream may reach it. Long polls end later than this anyway.
const receiveEndHold = 2 * time.Millisecond

// holdFor sleeps; the tests watch it.
var holdFor = time.Sleep

// guardReceives makes every RPC client the official Go client creates
// from now on use receiveEndGuard.
func guardReceives() {
	newRPC := rmq.NewRpcClient
	rmq.NewRpcClient = func(target string, opts ...rmq.RpcClientOption) (rmq.RpcClient, error) {
		opts = append(opts, rmq.WithRpcClientConnOption(rmq.WithDialOptions(grpc.WithChainStreamInterceptor(receiveEndGuard))))
		return newRPC(target, opts...)
	}
}

func receiveEndGuard(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	s, err := streamer(ctx, desc, cc, method, opts...)
	if err != nil || method != receiveMethod {
		return s, err
	}
	return &guardedStream{ClientStream: s}, nil
}

// guardedStream is read by the client's one reading goroutine.
type guardedStream struct {
	grpc.ClientStream
	firstAsk time.Time
}

func (g *guardedStream) RecvMsg(m any) error {
	if g.firstAsk.IsZero() {
		g.firstAsk = time.Now()
	}
	err := g.ClientStream.RecvMsg(m)
	if errors.Is(err, io.EOF) {
		if wait := time.Until(g.firstAsk.Add(receiveEndHold)); wait > 0 {
			holdFor(wait)
		}
	}
	return err
}
