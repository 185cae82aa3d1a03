// Package grpcserver is mqgate's gRPC edge: server options (TLS and
// plaintext on one port, keepalive, message sizes), the interceptor chain,
// health and reflection, and the apache.rocketmq.v2 MessagingService whose
// handlers convert between v2 messages and broker calls.
//
// The v2 and domain types meet only in this package's convert files, and
// every error leaving a handler is mapped in status.go. It must not import
// storage/ or another listener package (rest, remoting).
package grpcserver
