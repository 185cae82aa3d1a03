package faultproxy

import (
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"
)

// dialTimeout bounds the dial of the target for one connection.
const dialTimeout = 5 * time.Second

// Proxy forwards the connections accepted on its address to a target,
// and cuts them while blocked.
type Proxy struct {
	lis    net.Listener
	target string

	mu      sync.Mutex
	blocked bool
	closed  bool
	epoch   uint64                // counts Block calls: a link dialled in an earlier epoch is cut
	live    map[net.Conn]struct{} // forwarded connections, both ends
	held    []net.Conn            // accepted while blocked, not read yet
	wg      sync.WaitGroup
}

// New listens on addr and forwards each connection to target.
func New(addr, target string) (*Proxy, error) {
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("faultproxy: listen: %w", err)
	}
	p := &Proxy{lis: lis, target: target, live: map[net.Conn]struct{}{}}
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

// Addr is the address the proxy listens on.
func (p *Proxy) Addr() string { return p.lis.Addr().String() }

// Target is the address the proxy forwards to.
func (p *Proxy) Target() string { return p.target }

// Blocked reports whether the link is cut.
func (p *Proxy) Blocked() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.blocked
}

// Block cuts the link: it closes every forwarded connection (a write
// under way may still complete; nothing more does), and holds the
// connections accepted from now on until Unblock.
func (p *Proxy) Block() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.blocked = true
	p.epoch++
	for c := range p.live {
		_ = c.Close()
		delete(p.live, c)
	}
}

// Unblock restores the link: the held connections are forwarded, and so
// is every new one.
func (p *Proxy) Unblock() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.blocked || p.closed {
		return
	}
	p.blocked = false
	for _, c := range p.held {
		p.startForward(c)
	}
	p.held = nil
}

// Close stops listening and closes every connection, held or forwarded,
// and waits until the proxy's goroutines have ended.
func (p *Proxy) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	p.epoch++
	err := p.lis.Close()
	for c := range p.live {
		_ = c.Close()
	}
	for _, c := range p.held {
		_ = c.Close()
	}
	p.live, p.held = map[net.Conn]struct{}{}, nil
	p.mu.Unlock()
	p.wg.Wait()
	return err
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.lis.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			return
		}
		p.mu.Lock()
		switch {
		case p.closed:
			_ = c.Close()
		case p.blocked:
			p.held = append(p.held, c)
		default:
			p.startForward(c)
		}
		p.mu.Unlock()
	}
}

// startForward forwards c in its own goroutine. Called with mu held.
func (p *Proxy) startForward(c net.Conn) {
	p.live[c] = struct{}{}
	epoch := p.epoch
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		p.forward(c, epoch)
	}()
}

// forward dials the target for c and copies both ways until either side
// ends or the link is cut.
func (p *Proxy) forward(c net.Conn, epoch uint64) {
	t, err := net.DialTimeout("tcp", p.target, dialTimeout)
	p.mu.Lock()
	if err != nil || p.epoch != epoch {
		// The target is down, or the link was cut (or the proxy closed)
		// while dialling: c was closed then.
		delete(p.live, c)
		p.mu.Unlock()
		_ = c.Close()
		if t != nil {
			_ = t.Close()
		}
		return
	}
	p.live[t] = struct{}{}
	p.mu.Unlock()

	done := make(chan struct{}, 2)
	pipe := func(dst, src net.Conn) {
		_, _ = io.Copy(dst, src)
		done <- struct{}{}
	}
	go pipe(t, c)
	go pipe(c, t)
	<-done
	// One direction ended: end the connection as a whole.
	p.mu.Lock()
	delete(p.live, c)
	delete(p.live, t)
	p.mu.Unlock()
	_ = c.Close()
	_ = t.Close()
	<-done
}
