// Command mqgate runs the gateway (`mqgate serve`; with no command it
// prints the usage and exits 2) and talks to a running one (`mqgate
// topic`, `mqgate group`, ...). The message
// commands (send, receive, ack) use mqgate's own sdk/; the inspection
// commands (topic/group describe, message show) the admin API. `mqgate
// verify` and `mqgate repair` work on a stopped gateway's store, through
// gateway/node. `mqgate cluster` asks a member of a replicated broker
// set over its peer port, through gateway/peer's client calls
// (DialStatus, DialTransfer). The load generator behind `mqgate bench` lives in
// cmd/mqgate/internal/bench; package main only dispatches to it.
//
// Files: main.go (the command table and global usage), serve.go (serve and
// its shutdown), config.go (the one table of server settings: flags,
// environment, YAML, --print-config), adminclient.go (what every client
// subcommand shares: flags, dialing, signing, exit statuses), topic.go,
// group.go and message.go (the admin commands), msgclient.go, send.go and
// receive.go (the message commands over the SDK, and ack), cluster.go
// (mqgate cluster), verify.go (verify and repair of a stopped store),
// mcp.go (mqgate mcp), servehelp.go (serve -h by section), completion.go
// (the shell completion scripts, built from the commands' own help).
//
// cmd/mqgate may import gateway/node, gateway/peer, gen/, sdk/ and internal/; it must not import
// broker/ or storage/ directly: the server is composed by gateway/node.
package main
