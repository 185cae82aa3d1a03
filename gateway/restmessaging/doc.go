// Package restmessaging implements mqgate.rest.v1.MessagingService, a gRPC
// service registered on gateway/grpcserver's server: the HTTP-friendly
// messaging API (send, POP receive as a long poll answering an array, ack,
// change invisibility, route) that gateway/httpserver transcodes to
// REST/JSON. It is an edge like gateway/admin: it converts between
// mqgate.rest.v1 messages and broker calls (convert.go is where the two
// meet) and maps every error in one place (status.go), through
// gateway/errcodes's Kind → code table.
//
// Errors are gRPC status errors carrying a mqgate.rest.v1.Status detail with
// the RocketMQ v2 code; per-entry outcomes (send results, ack results) carry
// the same Status. Receipt handles are the broker's, so they work across
// this API and apache.rocketmq.v2.MessagingService.
//
// Files: messaging.go holds the message calls (send, receive, ack, change
// invisibility); groups.go routes them over a cluster's data groups
// (Config.Groups: a group's broker on this member, or the member leading
// the group, forwarded through gateway/forwarding).
//
// restmessaging may import broker/ (the facade, model, mqerr),
// gateway/errcodes, gateway/forwarding, internal/ and gen/mqgate/rest/v1.
// It must not import storage/ or a listener package
// (gateway/grpcserver, gateway/v2service, gateway/httpserver,
// gateway/remoting, gateway/admin): imports_test.go enforces it.
package restmessaging
