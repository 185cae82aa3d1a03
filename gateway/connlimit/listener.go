package connlimit

import (
	"cmp"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mqgate/mqgate/gateway/admission"
)

// refusalLogEvery is how often a listener logs a refused connection; the
// others are counted into the next line.
const refusalLogEvery = 10 * time.Second

// maxRefusing bounds the refusals being written at once, process-wide;
// past it the oldest is cut short (its connection closed), so that the
// newest connections, which a client is waiting on, are answered.
const maxRefusing = 32

// refusalTime bounds how long a refusal may hold its connection.
const refusalTime = 2 * time.Second

// Pool is the connection slots every listener of a process takes from:
// at most Max connections are open at once, whatever each listener's own
// cap, so that connections never take the descriptors kept for the store.
type Pool struct {
	max  atomic.Int64
	open atomic.Int64

	rmu      sync.Mutex
	refusing []net.Conn // being refused, oldest first
}

// NewPool returns a pool of max slots (max ≤ 0: unbounded).
func NewPool(max int) *Pool {
	p := &Pool{}
	p.SetMax(max)
	return p
}

// startRefusal notes c as being refused, cutting the oldest refusal short
// when maxRefusing are under way.
func (p *Pool) startRefusal(c net.Conn) {
	p.rmu.Lock()
	var oldest net.Conn
	if len(p.refusing) >= maxRefusing {
		oldest = p.refusing[0]
		p.refusing = p.refusing[1:]
	}
	p.refusing = append(p.refusing, c)
	p.rmu.Unlock()
	if oldest != nil {
		_ = oldest.Close()
	}
}

// endRefusal forgets c.
func (p *Pool) endRefusal(c net.Conn) {
	p.rmu.Lock()
	if i := slices.Index(p.refusing, c); i >= 0 {
		p.refusing = slices.Delete(p.refusing, i, i+1)
	}
	p.rmu.Unlock()
}

// SetMax changes the number of slots; connections already open stay.
func (p *Pool) SetMax(n int) {
	if n <= 0 {
		n = math.MaxInt64
	}
	p.max.Store(int64(n))
}

// Max is the number of slots.
func (p *Pool) Max() int64 { return p.max.Load() }

// Open is the number of connections holding a slot.
func (p *Pool) Open() int64 { return p.open.Load() }

func (p *Pool) take() bool {
	for {
		o := p.open.Load()
		if o >= p.max.Load() {
			return false
		}
		if p.open.CompareAndSwap(o, o+1) {
			return true
		}
	}
}

func (p *Pool) give() { p.open.Add(-1) }

// Options configure one listener's limits.
type Options struct {
	// Name labels log lines and refusals ("grpc", "http", ...).
	Name string
	// Max caps the listener's connections (0: only the pool's).
	Max int
	// AddressShare caps the connections of one client address (an IPv4
	// address, an IPv6 /64); 0: Max.
	AddressShare int
	// Exempt, when set, names addresses whose connections count against
	// Max but not against a share (the cluster members', whose relays
	// pass the connections of many clients).
	Exempt func(netip.Addr) bool
	// FirstBytes and FirstBytesTimeout, when both set, close a connection
	// that has not sent FirstBytes bytes within FirstBytesTimeout of its
	// accept (for a server whose own handshake deadline is not set here).
	FirstBytes        int
	FirstBytesTimeout time.Duration
	// Refuse, when set, tells a connection over a limit why it is
	// refused (HTTPRefusal, HTTP2Refusal); it must return within
	// refusalTime (the connection's deadline is set to it), or when the
	// connection is closed under it (at most maxRefusing refusals run at
	// once: a new one cuts the oldest short). The connection is closed
	// after it. Without it, it is closed at once.
	Refuse func(c net.Conn, why string)
	Logger *slog.Logger
}

// Refusal reasons, as Listener.Refused counts them.
const (
	ReasonCap     = "listener_cap"
	ReasonAddress = "address_share"
	ReasonFDs     = "descriptors"
)

// Listener is a net.Listener whose Accept returns only connections within
// its limits and the pool's; those over a limit are refused (Refuse) and
// never returned.
type Listener struct {
	net.Listener
	pool   *Pool
	o      Options
	shares *admission.Shares[string]
	logs   *admission.LogLimiter

	refusedCap, refusedAddress, refusedFDs atomic.Int64

	mu       sync.Mutex
	closed   bool
	refusals map[net.Conn]struct{}
	wg       sync.WaitGroup
}

// Wrap puts lis under p and o's limits.
func (p *Pool) Wrap(lis net.Listener, o Options) *Listener {
	o.Logger = cmp.Or(o.Logger, slog.Default())
	capacity := int64(o.Max)
	if capacity <= 0 {
		capacity = math.MaxInt64
	}
	share := int64(o.AddressShare)
	if share <= 0 || share > capacity {
		share = capacity
	}
	return &Listener{Listener: lis, pool: p, o: o, shares: admission.NewShares[string](capacity, share),
		logs: admission.NewLogLimiter(refusalLogEvery), refusals: map[net.Conn]struct{}{}}
}

// Name is the listener's name.
func (l *Listener) Name() string { return l.o.Name }

// Max is the listener's cap (0: none of its own).
func (l *Listener) Max() int { return l.o.Max }

// AddressShare is what one address may hold.
func (l *Listener) AddressShare() int64 { return l.shares.Share() }

// Open is the number of connections the listener holds.
func (l *Listener) Open() int64 { return l.shares.InUse() }

// Refused counts the connections refused for reason (ReasonCap,
// ReasonAddress, ReasonFDs).
func (l *Listener) Refused(reason string) int64 {
	switch reason {
	case ReasonCap:
		return l.refusedCap.Load()
	case ReasonAddress:
		return l.refusedAddress.Load()
	case ReasonFDs:
		return l.refusedFDs.Load()
	}
	return 0
}

// Accept waits for the next connection within the limits.
func (l *Listener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if lc := l.admit(c); lc != nil {
			return lc, nil
		}
	}
}

// Close closes the listener and the connections it is refusing, and
// waits for their refusals to end.
func (l *Listener) Close() error {
	err := l.Listener.Close()
	l.mu.Lock()
	l.closed = true
	for c := range l.refusals {
		_ = c.Close()
	}
	l.mu.Unlock()
	l.wg.Wait()
	return err
}

// addressKey is the share c's remote address counts in: the address (an
// IPv6 address's /64), or the address and port when it is exempt, so that
// it holds one connection of a key of its own.
func (l *Listener) addressKey(c net.Conn) string {
	ip := remoteIP(c.RemoteAddr())
	if !ip.IsValid() {
		return c.RemoteAddr().String()
	}
	if l.o.Exempt != nil && l.o.Exempt(ip) {
		return "exempt " + c.RemoteAddr().String()
	}
	if ip.Is6() {
		p, _ := ip.Prefix(64)
		return p.String()
	}
	return ip.String()
}

func remoteIP(a net.Addr) netip.Addr {
	if ta, ok := a.(*net.TCPAddr); ok {
		return ta.AddrPort().Addr().Unmap()
	}
	if a == nil {
		return netip.Addr{}
	}
	ap, err := netip.ParseAddrPort(a.String())
	if err != nil {
		return netip.Addr{}
	}
	return ap.Addr().Unmap()
}

// admit returns c wrapped when it is within the limits, or refuses it and
// returns nil.
func (l *Listener) admit(c net.Conn) net.Conn {
	key := l.addressKey(c)
	if !l.shares.TryAcquire(key, 1) {
		if sh := l.shares.Share(); sh < l.shares.Max() && l.shares.Held(key) >= sh {
			l.refuse(c, ReasonAddress, fmt.Sprintf("mqgate: too many connections from your address: the %s listener allows %d per address; close idle ones or retry later", l.o.Name, l.shares.Share()))
		} else {
			l.refuse(c, ReasonCap, fmt.Sprintf("mqgate: the %s listener holds its limit of %d connections; retry later", l.o.Name, l.shares.Max()))
		}
		return nil
	}
	if !l.pool.take() {
		l.shares.Release(key, 1)
		l.refuse(c, ReasonFDs, fmt.Sprintf("mqgate: the server holds its limit of %d connections (the rest of its descriptors are kept for its store); retry later", l.pool.Max()))
		return nil
	}
	lc := &conn{Conn: c, l: l, key: key}
	if l.o.FirstBytes > 0 && l.o.FirstBytesTimeout > 0 {
		hc := &handshakeConn{conn: lc, need: int64(l.o.FirstBytes)}
		hc.timer = time.AfterFunc(l.o.FirstBytesTimeout, hc.expire)
		return hc
	}
	return lc
}

// refuse counts and logs a refusal and has it written.
func (l *Listener) refuse(c net.Conn, reason, why string) {
	var n *atomic.Int64
	switch reason {
	case ReasonCap:
		n = &l.refusedCap
	case ReasonAddress:
		n = &l.refusedAddress
	default:
		n = &l.refusedFDs
	}
	n.Add(1)
	if ok, suppressed := l.logs.Allow(); ok {
		l.o.Logger.Warn("connection refused: over a connection limit", "listener", l.o.Name, "remote", c.RemoteAddr().String(),
			"reason", reason, "why", why, "suppressed_since_last", suppressed)
	}
	if l.o.Refuse == nil {
		_ = c.Close()
		return
	}
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		_ = c.Close()
		return
	}
	l.refusals[c] = struct{}{}
	l.wg.Add(1)
	l.mu.Unlock()
	l.pool.startRefusal(c)
	go func() {
		defer func() {
			_ = c.Close()
			l.pool.endRefusal(c)
			l.mu.Lock()
			delete(l.refusals, c)
			l.mu.Unlock()
			l.wg.Done()
		}()
		_ = c.SetDeadline(time.Now().Add(refusalTime))
		l.o.Refuse(c, why)
	}()
}

// conn gives its slots back once, when closed.
type conn struct {
	net.Conn
	l    *Listener
	key  string
	once sync.Once
}

func (c *conn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() {
		c.l.pool.give()
		c.l.shares.Release(c.key, 1)
	})
	return err
}

// CloseWrite half-closes the connection when the underlying one can (an
// HTTP server closing gracefully).
func (c *conn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return errors.ErrUnsupported
}

// handshakeConn closes itself unless its first bytes arrive in time.
type handshakeConn struct {
	*conn
	need  int64
	got   atomic.Int64
	timer *time.Timer
}

func (c *handshakeConn) Read(b []byte) (int, error) {
	n, err := c.conn.Read(b)
	if n > 0 && c.got.Load() < c.need && c.got.Add(int64(n)) >= c.need {
		c.timer.Stop()
	}
	return n, err
}

func (c *handshakeConn) expire() {
	if c.got.Load() >= c.need {
		return
	}
	l := c.conn.l
	if ok, suppressed := l.logs.Allow(); ok {
		l.o.Logger.Warn("connection closed: its first bytes did not arrive in time", "listener", l.o.Name,
			"remote", c.RemoteAddr().String(), "timeout", l.o.FirstBytesTimeout.String(), "suppressed_since_last", suppressed)
	}
	_ = c.conn.Close()
}

func (c *handshakeConn) Close() error {
	c.timer.Stop()
	return c.conn.Close()
}
