// Package faultproxy is a TCP proxy for tests that cut a network link on
// demand: a Proxy listens on one address and forwards every connection to
// a target, byte for byte, until Block cuts the link.
//
//	p, err := faultproxy.New(listenAddr, targetAddr)
//	defer p.Close()
//	p.Block()   // the link is down
//	p.Unblock() // and up again
//
// Block closes every connection the proxy forwards (both ends, at once;
// bytes in flight are lost). While blocked, new connections are accepted
// and held unread: the dialler sees its connection established and then
// silence, as behind a link that drops every packet, so its own timeouts
// decide when it gives up. Unblock forwards the held connections to the
// target (what their clients wrote meanwhile is delivered then, as TCP
// retransmission would once a partition heals) and every new one again.
// A held connection whose client gave up reaches the target closed.
//
// A proxy is one direction of a link only in the sense of who dials: the
// bytes flow both ways over each forwarded connection. To partition a
// process that both dials and is dialled, give each direction its own
// proxy.
//
// Files: faultproxy.go holds the Proxy.
//
// The methods may be called from any goroutine. faultproxy imports only
// the standard library: it knows nothing of what it forwards.
package faultproxy
