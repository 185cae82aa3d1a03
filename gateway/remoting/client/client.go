package client

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"

	"github.com/mqgate/mqgate/gateway/auth"
	"github.com/mqgate/mqgate/gateway/remoting/codec"
)

// Conn is one connection.
type Conn struct {
	nc        net.Conn
	serialize byte
	opaque    atomic.Int32

	wmu sync.Mutex

	// accessKey and secretKey sign requests (SetCredentials).
	accessKey, secretKey atomic.Pointer[string]

	mu       sync.Mutex
	pending  map[int32]chan *codec.Command
	handlers map[int32]func(*codec.Command)
	err      error
	done     chan struct{}
}

// Dial connects to addr. serialize is codec.JSON or codec.RocketMQ.
func Dial(ctx context.Context, addr string, serialize byte) (*Conn, error) {
	var d net.Dialer
	nc, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	c := &Conn{nc: nc, serialize: serialize, pending: make(map[int32]chan *codec.Command),
		handlers: make(map[int32]func(*codec.Command)), done: make(chan struct{})}
	go c.read()
	return c, nil
}

// Handle registers fn for server requests with code.
func (c *Conn) Handle(code int32, fn func(*codec.Command)) {
	c.mu.Lock()
	c.handlers[code] = fn
	c.mu.Unlock()
}

// Done is closed when the connection is gone; Err says why.
func (c *Conn) Done() <-chan struct{} { return c.done }

// Err is the reason the connection ended.
func (c *Conn) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

func (c *Conn) read() {
	br := bufio.NewReaderSize(c.nc, 64<<10)
	var err error
	for {
		var frame []byte
		if frame, err = codec.ReadFrame(br, 1<<30); err != nil {
			break
		}
		var cmd *codec.Command
		if cmd, err = codec.Decode(frame); err != nil {
			break
		}
		c.mu.Lock()
		if cmd.IsResponse() {
			ch := c.pending[cmd.Opaque]
			delete(c.pending, cmd.Opaque)
			c.mu.Unlock()
			if ch != nil {
				ch <- cmd
			}
			continue
		}
		h := c.handlers[cmd.Code]
		c.mu.Unlock()
		if h != nil {
			h(cmd)
		}
	}
	c.mu.Lock()
	c.err = err
	for _, ch := range c.pending {
		close(ch)
	}
	c.pending = nil
	c.mu.Unlock()
	close(c.done)
}

// ErrClosed is returned by calls on a connection that ended.
var ErrClosed = errors.New("client: connection closed")

// SetCredentials makes Invoke and Oneway sign each request with the
// classic ACL fields, as rocketmq-client-go v2's ACL interceptor does:
// AccessKey, and Signature = base64(HMAC-SHA1(secretKey, the values of
// every other extension field in key order, then the body)). An empty
// accessKey stops signing.
func (c *Conn) SetCredentials(accessKey, secretKey string) {
	c.accessKey.Store(&accessKey)
	c.secretKey.Store(&secretKey)
}

// sign replaces req.Ext with a signed copy (the caller's map is kept).
func (c *Conn) sign(req *codec.Command) {
	ak, sk := c.accessKey.Load(), c.secretKey.Load()
	if ak == nil || *ak == "" {
		return
	}
	ext := make(map[string]string, len(req.Ext)+2)
	for k, v := range req.Ext {
		ext[k] = v
	}
	delete(ext, auth.RemotingSignature)
	ext[auth.RemotingAccessKey] = *ak
	ext[auth.RemotingSignature] = auth.RemotingSign(ext, req.Body, *sk)
	req.Ext = ext
}

// Invoke sends req (its opaque is assigned) and waits for the response.
func (c *Conn) Invoke(ctx context.Context, req *codec.Command) (*codec.Command, error) {
	c.sign(req)
	req.Opaque = c.opaque.Add(1)
	req.Flag &^= codec.FlagOneway | codec.FlagResponse
	ch := make(chan *codec.Command, 1)
	c.mu.Lock()
	if c.pending == nil {
		c.mu.Unlock()
		return nil, ErrClosed
	}
	c.pending[req.Opaque] = ch
	c.mu.Unlock()
	if err := c.Write(req); err != nil {
		c.forget(req.Opaque)
		return nil, err
	}
	select {
	case resp, ok := <-ch:
		if !ok {
			return nil, fmt.Errorf("%w: %v", ErrClosed, c.Err())
		}
		return resp, nil
	case <-ctx.Done():
		c.forget(req.Opaque)
		return nil, ctx.Err()
	}
}

func (c *Conn) forget(opaque int32) {
	c.mu.Lock()
	if c.pending != nil {
		delete(c.pending, opaque)
	}
	c.mu.Unlock()
}

// Oneway sends req with the oneway flag.
func (c *Conn) Oneway(req *codec.Command) error {
	c.sign(req)
	req.Opaque = c.opaque.Add(1)
	req.Flag |= codec.FlagOneway
	return c.Write(req)
}

// Write sends a command as is.
func (c *Conn) Write(cmd *codec.Command) error {
	if cmd.Language == "" {
		cmd.Language = "GO"
	}
	if cmd.Version == 0 {
		cmd.Version = 317
	}
	b, err := codec.AppendFrame(nil, cmd, c.serialize)
	if err != nil {
		return err
	}
	return c.WriteRaw(b)
}

// WriteRaw writes bytes as they are (malformed-frame tests).
func (c *Conn) WriteRaw(b []byte) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	_, err := c.nc.Write(b)
	return err
}

// Close closes the connection.
func (c *Conn) Close() error { return c.nc.Close() }
