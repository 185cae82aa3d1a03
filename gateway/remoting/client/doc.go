// Package client is a minimal classic remoting client for mqgate's tests
// and benchmarks: one connection, requests matched to responses by
// opaque, server requests handed to registered handlers. It is not a
// RocketMQ client (no routes, rebalancing or retries).
//
// SetCredentials signs requests with the classic ACL fields (AccessKey,
// Signature), as rocketmq-client-go v2 does, for a server with auth on.
//
// Each connection has one reader goroutine, which ends when the connection
// closes.
//
// Files: client.go holds Conn: dialing, requests, server-initiated requests.
//
// client imports the remoting codec and the standard library only.
package client
