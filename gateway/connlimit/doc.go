// Package connlimit bounds the connections mqgate's listeners hold, so
// that no client, or flood of clients, can take the file descriptors the
// store needs or every connection a listener may have:
//
//   - a Pool of connection slots shared by every listener of the process:
//     the descriptor limit (RLIMIT_NOFILE) less what was open when the
//     node started serving and a reserve kept for the store (its segment,
//     queue, index and snapshot files) and everything else the process
//     opens (limits.go: FDLimit, OpenFDs, Defaults);
//   - per listener, a cap on its connections and a share of that cap per
//     client address (an IPv4 address, an IPv6 /64), so that one address
//     cannot take the whole cap from the others;
//   - per listener, optionally, a deadline for a connection's first bytes
//     (the peer listener, whose server is not configured here);
//   - a clear refusal for a connection over a limit: the listener's
//     Refuse function (an HTTP 503, an HTTP/2 GOAWAY naming the limit),
//     written by a bounded number of goroutines, or a plain close.
//
// A Listener wraps a net.Listener: Accept returns only connections within
// the limits, and a connection gives its slot back when it is closed.
// Protocol deadlines (a TLS handshake, the HTTP/2 preface, the first
// remoting frame, idle connections) are the servers' own.
//
// Files: limits.go (the limits and their defaults from the descriptor
// limit), listener.go (Pool, the process-wide slots, and Listener, which
// wraps a listener with its cap and per-address share), refuse.go (the
// refusal each protocol is written before a connection over a limit is
// closed).
//
// connlimit must not import gen/, broker/, storage/ or any listener
// package: gateway/node wraps every listener with it.
package connlimit
