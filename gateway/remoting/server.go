package remoting

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mqgate/mqgate/broker"
	"github.com/mqgate/mqgate/gateway/admission"
	"github.com/mqgate/mqgate/gateway/remoting/codec"
	"github.com/mqgate/mqgate/gateway/remoting/wire"
	"github.com/mqgate/mqgate/internal/lifecycle"
)

// badFrameLogEvery is how often a connection closed for bad input
// (malformed frames, bodies that never arrive, idle connections) may be
// logged; the rest are counted into the next line.
const badFrameLogEvery = 10 * time.Second

// Server is the classic remoting listener.
type Server struct {
	cfg Config
	log *slog.Logger
	cl  *broker.Classic
	b   *broker.Broker

	group  *lifecycle.Group
	lis    net.Listener
	port   int
	budget *admission.Budget
	// unauth is the budget of connections not yet authenticated (auth
	// on), shared by client address; unauthSmall is their lane for small
	// frames (frames.go).
	unauth      *admission.Shares[netip.Prefix]
	unauthSmall *admission.Budget
	badFrames   *admission.LogLimiter
	// fixedStore is the store host of message ids when AdvertiseHost is
	// an IP (or resolves to one); otherwise each connection's local
	// address is used.
	fixedStore netip.AddrPort

	reg   *registry
	rt    runtime
	locks *lockTable
	kv    kvConfig
	ids   *wire.UniqIDs
	pops  *popHandles

	opaque   atomic.Int32
	draining atomic.Bool
	stopped  chan struct{}

	connsMu sync.Mutex
	conns   map[*conn]struct{}

	handlers map[int32]handler
}

// New returns a listener serving cl. Start binds it.
func New(cfg Config, cl *broker.Classic) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	s := &Server{cfg: cfg, log: cfg.Logger, cl: cl, b: cl.Broker(), budget: admission.NewBudget(cfg.MaxBytesInFlight),
		unauth:      admission.NewShares[netip.Prefix](cfg.UnauthBytesInFlight, max(int64(cfg.MaxFrame), cfg.UnauthBytesInFlight/2)),
		unauthSmall: admission.NewBudget(cfg.UnauthSmallBytes), badFrames: admission.NewLogLimiter(badFrameLogEvery),
		locks: newLockTable(), conns: make(map[*conn]struct{}), stopped: make(chan struct{}), pops: newPopHandles()}
	s.reg = newRegistry(s)
	s.kv.m = make(map[string]string)
	s.handlers = s.routes()
	return s, nil
}

// Start binds addr and starts accepting connections.
func (s *Server) Start(ctx context.Context, addr string) error {
	var lc net.ListenConfig
	lis, err := lc.Listen(ctx, "tcp", addr)
	if err != nil {
		return fmt.Errorf("remoting-addr %s: %w", addr, err)
	}
	return s.Serve(ctx, lis)
}

// Serve starts accepting connections on lis, which the server owns from
// then on (Stop closes it).
func (s *Server) Serve(ctx context.Context, lis net.Listener) error {
	s.lis = lis
	if ta, ok := lis.Addr().(*net.TCPAddr); ok {
		s.port = ta.Port
	}
	s.fixedStore = s.resolveAdvertised(ctx)
	ip := s.fixedStore.Addr()
	if !ip.IsValid() {
		ip = netip.IPv4Unspecified()
	}
	s.ids = wire.NewUniqIDs(ip, s.cfg.Pid, s.cfg.Clock.Now)
	s.group = lifecycle.NewGroup(ctx)
	if err := s.group.Go("remoting-accept", s.accept); err != nil {
		lis.Close()
		return err
	}
	if err := s.group.Go("remoting-client-expiry", s.expiryLoop); err != nil {
		lis.Close()
		return err
	}
	if err := s.group.Go("remoting-runtime-stats", s.runtimeLoop); err != nil {
		lis.Close()
		return err
	}
	return nil
}

// resolveAdvertised turns AdvertiseHost into the IPv4 address message ids
// carry (upstream's offset ids and the Go client want IPv4).
func (s *Server) resolveAdvertised(ctx context.Context) netip.AddrPort {
	h := s.cfg.AdvertiseHost
	if h == "" {
		return netip.AddrPort{}
	}
	if a, err := netip.ParseAddr(h); err == nil {
		return netip.AddrPortFrom(a.Unmap(), uint16(s.port))
	}
	rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	ips, err := net.DefaultResolver.LookupNetIP(rctx, "ip4", h)
	if err != nil || len(ips) == 0 {
		s.log.Warn("remoting: advertise host does not resolve to IPv4; message ids carry the dialed address", "host", h, "err", err)
		return netip.AddrPort{}
	}
	return netip.AddrPortFrom(ips[0].Unmap(), uint16(s.port))
}

// Addr is the bound address.
func (s *Server) Addr() string {
	if s.lis == nil {
		return ""
	}
	return s.lis.Addr().String()
}

// Name is the lifecycle component name.
func (s *Server) Name() string { return "remoting" }

func (s *Server) accept(ctx context.Context) {
	var delay time.Duration
	for {
		nc, err := s.lis.Accept()
		if err != nil {
			if s.draining.Load() || errors.Is(err, net.ErrClosed) {
				return
			}
			// Temporary failure (e.g. out of file descriptors): back off.
			delay = min(max(2*delay, 5*time.Millisecond), time.Second)
			s.log.Warn("remoting: accept failed; retrying", "err", err, "backoff", delay)
			t := time.NewTimer(delay) // OS back-off, not protocol time
			select {
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
				return
			}
			continue
		}
		delay = 0
		c := s.newConn(nc)
		if !s.track(c) {
			nc.Close()
			return
		}
		if err := s.group.Go("remoting-conn", c.serve); err != nil {
			s.untrack(c)
			nc.Close()
			return
		}
	}
}

func (s *Server) track(c *conn) bool {
	s.connsMu.Lock()
	defer s.connsMu.Unlock()
	if s.draining.Load() {
		return false
	}
	s.conns[c] = struct{}{}
	return true
}

func (s *Server) untrack(c *conn) {
	s.connsMu.Lock()
	delete(s.conns, c)
	s.connsMu.Unlock()
}

// Conns is the number of open connections.
func (s *Server) Conns() int {
	s.connsMu.Lock()
	defer s.connsMu.Unlock()
	return len(s.conns)
}

// Stop stops accepting, answers new requests SERVICE_NOT_AVAILABLE, lets
// requests in flight finish (parked pulls end when the broker drains),
// then closes every connection; all by ctx's deadline.
func (s *Server) Stop(ctx context.Context) error {
	if s.lis == nil {
		return nil
	}
	s.connsMu.Lock()
	first := !s.draining.Swap(true)
	s.connsMu.Unlock()
	if first {
		close(s.stopped)
		s.lis.Close()
	}
	// Wait for requests in flight, then close the connections.
	for !s.idle() {
		t := time.NewTimer(10 * time.Millisecond) // a poll, not protocol time
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			s.closeAll()
			return errors.Join(ctx.Err(), s.group.Shutdown(ctx))
		}
	}
	s.closeAll()
	return s.group.Shutdown(ctx)
}

func (s *Server) idle() bool {
	s.connsMu.Lock()
	defer s.connsMu.Unlock()
	for c := range s.conns {
		if c.busy.Load() > 0 {
			return false
		}
	}
	return true
}

func (s *Server) closeAll() {
	s.connsMu.Lock()
	cs := make([]*conn, 0, len(s.conns))
	for c := range s.conns {
		cs = append(cs, c)
	}
	s.connsMu.Unlock()
	for _, c := range cs {
		c.close()
	}
}

// expiryLoop drops clients not heard from within ClientExpiry (Go
// clients never unregister; closed connections are dropped at once).
func (s *Server) expiryLoop(ctx context.Context) {
	every := max(s.cfg.ClientExpiry/4, time.Second)
	for {
		t := s.cfg.Clock.NewTimer(every)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C():
		}
		s.reg.expire(s.cfg.Clock.Now().Add(-s.cfg.ClientExpiry))
		s.locks.expire(s.cfg.Clock.Now())
		s.pops.expire(s.cfg.Clock.Now())
	}
}

// advertised is the broker address a route names for a client on c: the
// member's a relay's greeting named (via.go), or this listener's.
func (s *Server) advertised(c *conn) string {
	if c.via != "" {
		return c.via
	}
	if s.cfg.AdvertiseHost != "" {
		return net.JoinHostPort(s.cfg.AdvertiseHost, strconv.Itoa(s.port))
	}
	return c.local.String()
}

// storeHost is the STOREHOST of records sent to c.
func (s *Server) storeHost(c *conn) netip.AddrPort {
	if s.fixedStore.IsValid() {
		return s.fixedStore
	}
	return netip.AddrPortFrom(c.local.Addr().Unmap(), uint16(s.port))
}

// callTimeout bounds the wait for a client's answer to a server request,
// as upstream's brokers bound it (their callers gave up long before).
const callTimeout = 10 * time.Second

// call sends a server-initiated request to c and waits for its answer,
// until ctx ends, callTimeout passes or the connection closes.
func (s *Server) call(ctx context.Context, c *conn, code int32, ext map[string]string, body []byte) (*codec.Command, error) {
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	opaque := s.opaque.Add(1)
	ch, forget := c.expect(opaque)
	defer forget()
	if err := c.write(serverRequest(code, opaque, 0, ext, body)); err != nil {
		return nil, err
	}
	select {
	case resp := <-ch:
		return resp, nil
	case <-c.ctx.Done():
		return nil, errConnClosed
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// request sends a server-initiated oneway request to c.
func (s *Server) request(c *conn, code int32, ext map[string]string, body []byte) error {
	return c.write(serverRequest(code, s.opaque.Add(1), codec.FlagOneway, ext, body))
}

// serverRequest is a request the server sends a client.
func serverRequest(code, opaque, flag int32, ext map[string]string, body []byte) *codec.Command {
	return &codec.Command{Code: code, Language: "JAVA", Version: Version, Opaque: opaque, Flag: flag, Ext: ext, Body: body}
}
