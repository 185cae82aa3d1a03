package e2eutil

import (
	"bytes"
	"context"
	"errors"
	"io"
	"runtime"
	"strconv"
	"time"

	rmq "github.com/apache/rocketmq-clients/golang/v5"
	"google.golang.org/grpc"
)

// The official Go client (v5.1.3) reads a ReceiveMessage stream in a
// goroutine that, at the stream's end, first signals "done" and then
// cancels the call's context, while the goroutine that opened the stream
// waits on both in one select. If that goroutine has not reached its
// select yet when the stream ends (a fast answer on a busy machine), the
// select finds both ready, picks one at random, and half the time reports
// "[error] CODE=DEADLINE_EXCEEDED" for a receive that succeeded: the
// messages it carried stay invisible and come back later as a second
// attempt. Once the opener is parked in the select, the "done" hand-off
// reaches it before the cancel can, so the outcome is the real one.
//
// receiveEndGuard holds back the end of each ReceiveMessage stream until
// the goroutine that opened it is parked in a select. It changes nothing
// the server sees; it only removes the client's coin toss from the tests.
const receiveMethod = "/apache.rocketmq.v2.MessagingService/ReceiveMessage"

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
	return &guardedStream{ClientStream: s, opener: goroutineID()}, nil
}

type guardedStream struct {
	grpc.ClientStream
	opener int64
}

// guardWait bounds the wait for the opener: past it the end is passed on
// as it is (the opener may have gone, its own deadline having passed).
const guardWait = 5 * time.Second

func (g *guardedStream) RecvMsg(m any) error {
	err := g.ClientStream.RecvMsg(m)
	if errors.Is(err, io.EOF) && g.opener > 0 {
		awaitParkedInSelect(g.opener, guardWait)
	}
	return err
}

// awaitParkedInSelect polls the goroutine dump until goroutine id is
// blocked in a select, has exited, or limit passed. There is nothing to
// wait on instead: a goroutine's scheduling state has no event.
func awaitParkedInSelect(id int64, limit time.Duration) {
	deadline := time.Now().Add(limit)
	buf := make([]byte, 1<<20)
	for {
		var state string
		var ok bool
		state, ok, buf = goroutineState(buf, id)
		if !ok || state == "select" || time.Now().After(deadline) {
			return
		}
		time.Sleep(50 * time.Microsecond)
	}
}

// goroutineState is the scheduling state ("running", "select", "chan
// receive", ...) of goroutine id in a dump of all goroutines; ok is false
// when no such goroutine exists. It returns buf, grown if the dump needed
// more room, for the next call.
func goroutineState(buf []byte, id int64) (state string, ok bool, _ []byte) {
	n := runtime.Stack(buf, true)
	for n == len(buf) {
		buf = make([]byte, 2*len(buf))
		n = runtime.Stack(buf, true)
	}
	// Only a goroutine's header line has "goroutine N [" (a creator's
	// line reads "in goroutine N" with no bracket).
	dump := buf[:n]
	head := []byte("goroutine " + strconv.FormatInt(id, 10) + " [")
	i := bytes.Index(dump, head)
	if i < 0 {
		return "", false, buf
	}
	rest := dump[i+len(head):]
	end := bytes.IndexAny(rest, ",]")
	if end < 0 {
		return "", false, buf
	}
	return string(rest[:end]), true, buf
}

// goroutineID is the calling goroutine's id, read from its own stack
// header ("goroutine 18 [running]:"); 0 if that cannot be read.
func goroutineID() int64 {
	var b [64]byte
	n := runtime.Stack(b[:], false)
	f := bytes.Fields(b[:n])
	if len(f) < 2 {
		return 0
	}
	id, err := strconv.ParseInt(string(f[1]), 10, 64)
	if err != nil {
		return 0
	}
	return id
}
