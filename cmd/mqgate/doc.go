// Command mqgate runs the gateway (`mqgate serve`, the default) and talks
// to a running one (`mqgate topic`, `mqgate group`, ...).
//
// cmd/mqgate may import gateway/node, gen/ and internal/; it must not import
// broker/ or storage/ directly: the server is composed by gateway/node.
package main
