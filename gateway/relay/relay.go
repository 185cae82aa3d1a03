package relay

import (
	"cmp"
	"errors"
	"io"
	"log/slog"
	"net"
	"sync"
	"time"
)

// Route is where connections go: Local, or piped to Addr, or (zero)
// nowhere yet.
type Route struct {
	Local bool
	Addr  string
	// Greet: the listener at Addr reads Options.Greeting ahead of a
	// piped connection's bytes. Only then is it sent: to a listener that
	// does not expect it, it is the start of the client's stream.
	Greet bool
}

func (r Route) known() bool { return r.Local || r.Addr != "" }

// Options configure a Relay.
type Options struct {
	// Name labels log lines (the listener's flag name).
	Name string
	// LeaderWait bounds how long a connection waits for a route (default
	// 5 s).
	LeaderWait time.Duration
	// DialTimeout bounds dialing the leader (default 3 s).
	DialTimeout time.Duration
	// Greeting, if set, gives the bytes written to the leader's listener
	// before any of client connection c's, on each connection piped
	// under a Route with Greet set (remoting.Greeting: which address the
	// client dialled).
	Greeting func(c net.Conn) []byte
	Logger   *slog.Logger
}

// Relay routes the connections of one listener. See doc.go.
type Relay struct {
	opts  Options
	lis   net.Listener
	local *localListener

	mu      sync.Mutex
	route   Route
	changed chan struct{} // closed and replaced at every SetRoute
	conns   map[net.Conn]struct{}
	closed  bool

	wg sync.WaitGroup
}

// New takes over lis. Serve the local server on Local(), then Run.
func New(lis net.Listener, o Options) *Relay {
	o.LeaderWait = cmp.Or(o.LeaderWait, 5*time.Second)
	o.DialTimeout = cmp.Or(o.DialTimeout, 3*time.Second)
	o.Logger = cmp.Or(o.Logger, slog.Default())
	r := &Relay{opts: o, lis: lis, changed: make(chan struct{}), conns: map[net.Conn]struct{}{}}
	r.local = &localListener{addr: lis.Addr(), conns: make(chan net.Conn), done: make(chan struct{})}
	return r
}

// Local is the listener the local server serves: it yields the
// connections routed here.
func (r *Relay) Local() net.Listener { return r.local }

// Addr is the bound address.
func (r *Relay) Addr() net.Addr { return r.lis.Addr() }

// SetRoute changes where connections go and closes every connection
// accepted under another route.
func (r *Relay) SetRoute(rt Route) {
	r.mu.Lock()
	if rt == r.route {
		r.mu.Unlock()
		return
	}
	r.route = rt
	close(r.changed)
	r.changed = make(chan struct{})
	old := r.conns
	r.conns = map[net.Conn]struct{}{}
	r.mu.Unlock()
	for c := range old {
		_ = c.Close()
	}
	if len(old) > 0 {
		r.opts.Logger.Info("relay: route changed, connections closed", "listener", r.opts.Name, "closed", len(old), "local", rt.Local, "leader_addr", rt.Addr)
	}
}

// Run accepts until the listener is closed (by Close).
func (r *Relay) Run() {
	for {
		c, err := r.lis.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				time.Sleep(10 * time.Millisecond)
				continue
			}
			r.opts.Logger.Error("relay: accept failed", "listener", r.opts.Name, "err", err)
			return
		}
		r.wg.Add(1)
		go func() {
			defer r.wg.Done()
			r.handle(c)
		}()
	}
}

// Close stops accepting, closes the local listener and every connection
// this relay routed, and waits for its goroutines.
func (r *Relay) Close() error {
	err := r.lis.Close()
	r.mu.Lock()
	r.closed = true
	conns := r.conns
	r.conns = map[net.Conn]struct{}{}
	close(r.changed)
	r.changed = make(chan struct{})
	r.mu.Unlock()
	for c := range conns {
		_ = c.Close()
	}
	r.local.close()
	r.wg.Wait()
	if errors.Is(err, net.ErrClosed) {
		return nil
	}
	return err
}

// current waits up to LeaderWait for a known route.
func (r *Relay) current() (Route, bool) {
	deadline := time.NewTimer(r.opts.LeaderWait)
	defer deadline.Stop()
	for {
		r.mu.Lock()
		rt, ch, closed := r.route, r.changed, r.closed
		r.mu.Unlock()
		if closed {
			return Route{}, false
		}
		if rt.known() {
			return rt, true
		}
		select {
		case <-ch:
		case <-deadline.C:
			return Route{}, false
		}
	}
}

// track records c under route rt; false (and c closed) when the route
// changed meanwhile.
func (r *Relay) track(c net.Conn, rt Route) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed || r.route != rt {
		_ = c.Close()
		return false
	}
	r.conns[c] = struct{}{}
	return true
}

func (r *Relay) untrack(c net.Conn) {
	r.mu.Lock()
	delete(r.conns, c)
	r.mu.Unlock()
}

func (r *Relay) handle(c net.Conn) {
	deadline := time.Now().Add(r.opts.LeaderWait)
	for {
		rt, ok := r.current()
		if !ok {
			r.opts.Logger.Warn("relay: no leader known in time, connection closed", "listener", r.opts.Name, "remote", c.RemoteAddr().String(), "waited", r.opts.LeaderWait)
			_ = c.Close()
			return
		}
		if rt.Local {
			r.serveLocal(c, rt)
			return
		}
		d := net.Dialer{Timeout: r.opts.DialTimeout}
		up, err := d.Dial("tcp", rt.Addr)
		if err == nil {
			r.pipeTo(c, up, rt)
			return
		}
		// The leader may just have died: hold the connection until the
		// route changes (an election) or the wait runs out.
		if !r.awaitChange(rt, deadline) {
			r.opts.Logger.Warn("relay: cannot reach the leader, connection closed", "listener", r.opts.Name, "leader_addr", rt.Addr, "err", err)
			_ = c.Close()
			return
		}
	}
}

// awaitChange waits until the route is no longer rt; false at deadline
// or when the relay closes.
func (r *Relay) awaitChange(rt Route, deadline time.Time) bool {
	t := time.NewTimer(time.Until(deadline))
	defer t.Stop()
	for {
		r.mu.Lock()
		cur, ch, closed := r.route, r.changed, r.closed
		r.mu.Unlock()
		if closed {
			return false
		}
		if cur != rt {
			return true
		}
		select {
		case <-ch:
		case <-t.C:
			return false
		}
	}
}

func (r *Relay) serveLocal(c net.Conn, rt Route) {
	if !r.track(c, rt) {
		return
	}
	tc := &trackedConn{Conn: c, r: r}
	select {
	case r.local.conns <- tc:
	case <-r.local.done:
		_ = tc.Close()
	}
}

func (r *Relay) pipeTo(c, up net.Conn, rt Route) {
	if rt.Greet && r.opts.Greeting != nil {
		if b := r.opts.Greeting(c); len(b) > 0 {
			_ = up.SetWriteDeadline(time.Now().Add(r.opts.DialTimeout))
			_, err := up.Write(b)
			_ = up.SetWriteDeadline(time.Time{})
			if err != nil {
				r.opts.Logger.Warn("relay: greeting the leader failed, connection closed", "listener", r.opts.Name, "leader_addr", rt.Addr, "err", err)
				_ = up.Close()
				_ = c.Close()
				return
			}
		}
	}
	if !r.track(c, rt) {
		_ = up.Close()
		return
	}
	if !r.track(up, rt) {
		_ = c.Close()
		r.untrack(c)
		return
	}
	pipe(c, up)
	r.untrack(c)
	r.untrack(up)
}

// pipe copies both ways until either side ends, then closes both.
func pipe(a, b net.Conn) {
	done := make(chan struct{}, 2)
	cp := func(dst, src net.Conn) {
		_, _ = io.Copy(dst, src)
		done <- struct{}{}
	}
	go cp(a, b)
	go cp(b, a)
	<-done
	_ = a.Close()
	_ = b.Close()
	<-done
}

// trackedConn is a locally served connection: closing it forgets it.
type trackedConn struct {
	net.Conn
	r    *Relay
	once sync.Once
}

func (c *trackedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() { c.r.untrack(c.Conn) })
	return err
}

// localListener hands routed connections to the local server.
type localListener struct {
	addr  net.Addr
	conns chan net.Conn
	done  chan struct{}
	once  sync.Once
}

func (l *localListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *localListener) Close() error { l.close(); return nil }

func (l *localListener) close() { l.once.Do(func() { close(l.done) }) }

func (l *localListener) Addr() net.Addr { return l.addr }
