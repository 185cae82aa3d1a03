// Package httpserver is mqgate's HTTP listener (the http.Server and its
// mux): the REST/JSON API under /v1/,
// transcoded by grpc-gateway onto the node's gRPC services in process
// (Options.API: grpcserver's in-process connection, so every call passes
// the gRPC server's auth tap, stats handler and interceptor chain),
// the OpenAPI document at /openapi.json, the probes /healthz (alive) and
// /readyz (ready to serve), the web console at /console/ when the node
// gives one (Options.Console; the console itself is gateway/console), and
// the MCP endpoint at /mcp with --mcp (Options.MCP; gateway/mcpserver).
// /metrics is not here: the node serves it on its own listener
// (gateway/node/metrics.go), which mounts the same probes (health.go,
// MountHealth) for the member itself.
//
// Files: http.go (the server, routes, lifecycle), gateway.go (the
// grpc-gateway mux: protojson options, header matcher, ?body=text, body
// limit, request id, traceparent for the gRPC leg), telemetry.go (the
// HTTP metrics, otelhttp's instruments and attributes, and the HTTP span
// when spans are recorded), sendjson.go (a send's request and response decoded and
// encoded by hand as protojson would, protojson taking every body that is
// not plain), limits.go (what is checked before a body is read: auth,
// size, the in-flight body budget, the body deadline; canonical paths;
// the throttled server error log), errors.go (THE place REST errors get their HTTP status and
// body: a mqgate.rest.v1.Status), openapi.go and openapi.json
// (GENERATED: a copy of gen/openapi/mqgate.swagger.json that `make
// generate` writes, because go:embed cannot reach gen/; never edit it).
//
// It talks to the broker only through gRPC, so it must not import broker/,
// storage/, another listener package (grpcserver, v2service, remoting,
// admin) or gateway/restmessaging (the service it calls); it imports the generated
// clients and gateway handlers in gen/, and gateway/errcodes for the v2
// code of errors that carry only a gRPC code.
package httpserver
