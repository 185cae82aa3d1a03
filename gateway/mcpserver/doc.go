// Package mcpserver is mqgate's Model Context Protocol server: read-only
// diagnostics for assistants, as MCP tools over the admin API, built with
// the official Go SDK (github.com/modelcontextprotocol/go-sdk).
//
// The tools list and describe topics and consumer groups (backlog, in
// flight, dead letters, rates), give a topic's route, find messages by id
// or key, explain why a group is stuck (its oldest unacknowledged
// message and its deliveries, dead letters, connected consumers) and
// report the cluster. None changes anything: every call is a read of the
// admin API (mqgate.admin.v1.AdminService) or the messaging API's route
// (mqgate.rest.v1.MessagingService.GetRoute), made on the connection the
// server is given, so the gRPC listener's checks apply to each.
//
// Two transports serve the same tools (NewServer):
//
//   - stdio, for desktop assistants: `mqgate mcp --server ADDR` dials the
//     gRPC port, signing its calls with the credentials it was given;
//   - streamable HTTP on the HTTP listener at /mcp, behind `mqgate serve
//     --mcp` (Handler): the calls go to the gRPC server in process, and
//     with auth on each HTTP request must be signed as a REST request is
//     (X-Mq-Date-Time and Authorization); the signature is checked before
//     the request is read and passed on to the admin API, which checks
//     what each tool touches.
//
// Files: server.go (the MCP server and its tools over the admin API),
// diagnose.go (why a group is stuck: its oldest unacknowledged message per
// topic), http.go (the /mcp handler on the HTTP listener and its auth).
//
// mcpserver must not import the broker, storage or a listener package; it
// reaches mqgate only through the gRPC connection.
package mcpserver
