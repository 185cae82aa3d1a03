package remoting

import (
	"bufio"
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mqgate/mqgate/gateway/admission"
	"github.com/mqgate/mqgate/gateway/remoting/codec"
)

// conn is one client connection: its reader goroutine (serve) owns the
// read side; writes are whole frames under wmu.
type conn struct {
	s      *Server
	nc     net.Conn
	remote netip.AddrPort
	local  netip.AddrPort
	ctx    context.Context
	cancel context.CancelFunc
	sem    chan struct{}
	busy   atomic.Int64
	// budget bounds the bytes of this connection's frames being read or
	// served (frames.go).
	budget *admission.Budget
	// authed is set once a request on the connection was authenticated
	// (auth on): its frames then reserve in the server's main budget.
	authed atomic.Bool

	wmu    sync.Mutex
	wbuf   []byte
	closed atomic.Bool
	once   sync.Once

	// via is the address a relay's greeting named (via.go): routes and
	// cluster info answered here name it. Set before any request runs.
	via string
	// relayedFor is the client's address a relay's greeting named (zero
	// without one): born hosts and listings name it (clientAddr); logs
	// name remote, the socket's peer, and this beside it (logArgs). Set
	// before any request runs.
	relayedFor netip.AddrPort

	// calls waits for the answers to the server's own requests on this
	// connection (Server.call), by opaque.
	cmu   sync.Mutex
	calls map[int32]chan *codec.Command

	// pulled holds the (group, topic) pairs pulled on this connection, up
	// to maxPulled: a send-back may name a message of any of them
	// (sendback.go). pmu guards it and is a leaf.
	pmu    sync.Mutex
	pulled map[groupTopic]struct{}
}

// groupTopic is a consumer group and a topic it consumes.
type groupTopic struct{ group, topic string }

// maxPulled bounds conn.pulled: a client pulls a few topics as a few
// groups; past the bound, pulls are not recorded and send-backs rely on
// heartbeats and committed offsets.
const maxPulled = 1024

// notePull records that group pulled topic on c.
func (c *conn) notePull(group, topic string) {
	c.pmu.Lock()
	defer c.pmu.Unlock()
	k := groupTopic{group, topic}
	if _, ok := c.pulled[k]; ok || len(c.pulled) >= maxPulled {
		return
	}
	if c.pulled == nil {
		c.pulled = make(map[groupTopic]struct{})
	}
	c.pulled[k] = struct{}{}
}

// hasPulled reports whether group pulled topic on c.
func (c *conn) hasPulled(group, topic string) bool {
	c.pmu.Lock()
	defer c.pmu.Unlock()
	_, ok := c.pulled[groupTopic{group, topic}]
	return ok
}

func addrPortOf(a net.Addr) netip.AddrPort {
	if ta, ok := a.(*net.TCPAddr); ok {
		ap := ta.AddrPort()
		return netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())
	}
	ap, _ := netip.ParseAddrPort(a.String())
	return ap
}

func (s *Server) newConn(nc net.Conn) *conn {
	c := &conn{s: s, nc: nc, remote: addrPortOf(nc.RemoteAddr()), local: addrPortOf(nc.LocalAddr()),
		sem: make(chan struct{}, s.cfg.MaxInFlight), budget: admission.NewBudget(s.cfg.MaxConnBytesInFlight)}
	c.ctx, c.cancel = context.WithCancel(s.group.Context())
	return c
}

func (c *conn) String() string { return c.remote.String() }

// clientAddr is the address of the client on c where the protocol reports
// one (born hosts, connection listings): the one a relay's greeting named,
// or the socket's peer.
func (c *conn) clientAddr() string {
	if c.relayedFor.IsValid() {
		return c.relayedFor.String()
	}
	return c.remote.String()
}

// peer names c's client in refusals: the socket's peer, and the client a
// relay's greeting named after it.
func (c *conn) peer() string {
	if c.relayedFor.IsValid() {
		return c.remote.String() + " (relayed for " + c.relayedFor.String() + ")"
	}
	return c.remote.String()
}

// logArgs prefixes args with c's client for a log line: "remote", the
// socket's peer, and "relayed_for", the client a relay's greeting named,
// if any. The greeting is a claim anyone may make (via.go), so it never
// stands alone.
func (c *conn) logArgs(args ...any) []any {
	out := make([]any, 0, 4+len(args))
	out = append(out, "remote", c.remote.String())
	if c.relayedFor.IsValid() {
		out = append(out, "relayed_for", c.relayedFor.String())
	}
	return append(out, args...)
}

// close closes the socket, cancels the connection's requests and drops
// the clients registered through it.
func (c *conn) close() {
	c.once.Do(func() {
		c.closed.Store(true)
		c.cancel()
		c.nc.Close()
		c.s.untrack(c)
		c.s.reg.connClosed(c)
		c.s.locks.connClosed(c)
	})
}

// abort closes the socket only; the reader then fails and runs close.
// (Writers must not run close themselves: it notifies other connections,
// and two writers doing so could wait on each other's write locks.)
func (c *conn) abort() {
	c.closed.Store(true)
	c.nc.Close()
}

func (c *conn) serve(context.Context) {
	defer c.close()
	br := bufio.NewReaderSize(c.nc, 32<<10)
	log := c.s.log
	// A new connection's greeting and first frame must begin within
	// FirstFrameTimeout; later frames within IdleTimeout of the last.
	idle := min(c.s.cfg.FirstFrameTimeout, c.s.cfg.IdleTimeout)
	if err := c.nc.SetReadDeadline(time.Now().Add(idle)); err != nil {
		return
	}
	via, client, err := readVia(br)
	if err != nil {
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			c.s.badFrame(slog.LevelInfo, "remoting: a new connection sent nothing in time; closing it", c, err)
			return
		}
		c.s.badFrame(slog.LevelWarn, "remoting: malformed relay greeting; closing the connection", c, err)
		return
	}
	c.via, c.relayedFor = via, client
	for first := true; ; first = false {
		if !first {
			if err := c.nc.SetReadDeadline(time.Now().Add(c.s.cfg.IdleTimeout)); err != nil {
				return
			}
		}
		// The frame's bytes are reserved as they arrive (frames.go).
		var frame []byte
		var hold frameHold
		n, err := codec.ReadLength(br, c.s.cfg.MaxFrame)
		if err == nil {
			frame, hold, err = c.readFrame(br, n)
		}
		if err != nil {
			var ne net.Error
			switch {
			case errors.Is(err, codec.ErrMalformed):
				c.s.badFrame(slog.LevelWarn, "remoting: malformed frame; closing the connection", c, err)
				c.refuse(0, err)
			case errors.Is(err, errFrameTimeout):
				c.s.badFrame(slog.LevelWarn, "remoting: a frame's body did not arrive in time; closing the connection", c, err)
			case errors.As(err, &ne) && ne.Timeout() && !c.closed.Load():
				c.s.badFrame(slog.LevelInfo, "remoting: idle connection closed", c, err)
			case errors.Is(err, io.EOF), c.closed.Load():
			default:
				log.Debug("remoting: connection read failed", c.logArgs("err", err)...)
			}
			return
		}
		cmd, err := codec.Decode(frame)
		if err != nil {
			hold.release()
			c.s.badFrame(slog.LevelWarn, "remoting: undecodable frame; closing the connection", c, err)
			c.refuse(guessOpaque(frame), err)
			return
		}
		if cmd.IsResponse() {
			// Answers to the server's requests: a call may wait for it
			// (clients answer oneway requests too; nothing waits for those).
			hold.release()
			c.answered(cmd)
			continue
		}
		if c.s.draining.Load() {
			hold.release()
			c.reply(cmd, &codec.Command{Code: codeServiceNotAvailable, Remark: "mqgate is shutting down; retry on another broker"})
			continue
		}
		select {
		case c.sem <- struct{}{}:
		case <-c.ctx.Done():
			hold.release()
			return
		}
		c.busy.Add(1)
		err = c.s.group.Go("remoting-request", func(context.Context) {
			defer func() {
				c.busy.Add(-1)
				hold.release()
				<-c.sem
			}()
			c.dispatch(cmd)
		})
		if err != nil {
			c.busy.Add(-1)
			hold.release()
			<-c.sem
			c.reply(cmd, &codec.Command{Code: codeServiceNotAvailable, Remark: "mqgate is shutting down; retry on another broker"})
		}
	}
}

// guessOpaque finds the opaque of a frame whose header failed to decode,
// when its fixed binary part is intact (JSON headers: 0).
func guessOpaque(frame []byte) int32 {
	if len(frame) >= 4+13 && frame[0] == codec.RocketMQ {
		return int32(uint32(frame[9])<<24 | uint32(frame[10])<<16 | uint32(frame[11])<<8 | uint32(frame[12]))
	}
	return 0
}

// refuse answers a malformed frame with an error response (best effort:
// a client that cannot parse it times out) before the connection closes.
func (c *conn) refuse(opaque int32, err error) {
	_ = c.write(&codec.Command{Code: codeInvalidParameter, Language: "JAVA", Version: Version, Opaque: opaque,
		Flag: codec.FlagResponse, Remark: "malformed frame, closing the connection: " + err.Error()})
}

func (c *conn) dispatch(req *codec.Command) {
	defer func() {
		if r := recover(); r != nil {
			c.s.log.Error("remoting: handler panicked", "code", req.Code, "panic", r, "stack", string(debug.Stack()))
			c.reply(req, &codec.Command{Code: codeSystemError, Remark: "internal error (logged by the server)"})
		}
	}()
	// The request's context: the server's lifetime, not the connection's
	// (see requestContext), and the authenticated user.
	ctx := c.s.group.Context()
	if c.s.cfg.Auth != nil {
		var refused *codec.Command
		if ctx, refused = c.s.authenticate(ctx, c, req); refused != nil {
			c.reply(req, refused)
			return
		}
		c.authed.Store(true)
	}
	h := c.s.handlers[req.Code]
	if h == nil {
		c.reply(req, &codec.Command{Code: codeRequestCodeNotSupported, Remark: " request type " + itoa(int64(req.Code)) + " not supported"})
		return
	}
	if c.s.cfg.Auth != nil {
		if refused := c.s.authorize(ctx, c, req); refused != nil {
			c.reply(req, refused)
			return
		}
	}
	resp := h(ctx, c, req)
	if resp != nil {
		c.reply(req, resp)
	}
}

// reply sends resp as the answer to req, unless req is oneway.
func (c *conn) reply(req, resp *codec.Command) {
	if req.IsOneway() {
		return
	}
	resp.Opaque = req.Opaque
	resp.Flag |= codec.FlagResponse
	resp.Language = "JAVA"
	resp.Version = Version
	if err := c.write(resp); err != nil && !c.closed.Load() {
		c.s.log.Debug("remoting: writing a response failed", c.logArgs("code", req.Code, "err", err)...)
	}
}

var errConnClosed = errors.New("remoting: connection closed")

var errFrameTimeout = errors.New("remoting: the frame's body did not arrive within the frame timeout")

// badFrame logs a connection closed for bad input: one line per
// badFrameLogEvery for the whole listener, with the number held back.
func (s *Server) badFrame(level slog.Level, msg string, c *conn, err error) {
	if ok, suppressed := s.badFrames.Allow(); ok {
		s.log.Log(c.ctx, level, msg, c.logArgs("err", err, "suppressed_since_last", suppressed)...)
	}
}

// write sends one whole frame; a failed write closes the connection.
func (c *conn) write(cmd *codec.Command) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if c.closed.Load() {
		return errConnClosed
	}
	hdr, err := codec.AppendFrameHeader(c.wbuf[:0], cmd, codec.JSON)
	if err != nil {
		return err
	}
	if cap(hdr) <= 64<<10 {
		c.wbuf = hdr[:0]
	}
	if err := c.nc.SetWriteDeadline(time.Now().Add(c.s.cfg.WriteTimeout)); err != nil {
		c.abort()
		return err
	}
	bufs := net.Buffers{hdr}
	if len(cmd.Body) > 0 {
		bufs = append(bufs, cmd.Body)
	}
	if _, err := bufs.WriteTo(c.nc); err != nil {
		c.abort()
		return err
	}
	return nil
}

// expect registers a wait for the answer to the request with opaque;
// forget drops it.
func (c *conn) expect(opaque int32) (<-chan *codec.Command, func()) {
	ch := make(chan *codec.Command, 1)
	c.cmu.Lock()
	if c.calls == nil {
		c.calls = make(map[int32]chan *codec.Command)
	}
	c.calls[opaque] = ch
	c.cmu.Unlock()
	return ch, func() {
		c.cmu.Lock()
		delete(c.calls, opaque)
		c.cmu.Unlock()
	}
}

// answered hands a response to the call waiting for it, if any.
func (c *conn) answered(resp *codec.Command) {
	c.cmu.Lock()
	ch := c.calls[resp.Opaque]
	delete(c.calls, resp.Opaque)
	c.cmu.Unlock()
	if ch != nil {
		ch <- resp
	}
}
