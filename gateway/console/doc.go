// Package console is mqgate's web console: pages served at /console/ on
// the HTTP listener (assets/, embedded; plain HTML, CSS and JavaScript
// that load nothing from elsewhere). The pages show the node's traffic,
// topics (with per-topic rates, queue offsets and each group's lag per
// queue, and a LITE topic's lite topics with each group's backlog),
// consumer groups and their dead letters, a queue's messages by
// offset or store time, message lookup and test sends, the connected
// clients and the cluster's members and raft groups, with a leadership
// transfer.
//
// Everything the pages show or change goes through the REST API (/v1/...
// on the same listener): the same admin and messaging endpoints the CLI
// and the MCP server use, with the same checks. This package serves the
// files only. With auth on, the page asks for an access key and secret
// key, keeps them in the tab's memory, signs each call as the REST API
// expects (X-Mq-Date-Time and the MQv2-HMAC-SHA1 Authorization, computed
// in the page), and shows what the REST API answers that user: admin
// actions are hidden from users who are not admins, and the REST API
// refuses them anyway. The files themselves hold no data and need no
// credentials.
//
// console must not import gen/, grpc, protobuf, the broker or a listener
// package.
package console
