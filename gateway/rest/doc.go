// Package rest is mqgate's HTTP listener: the REST/JSON API transcoded by
// grpc-gateway onto an in-process connection to the gRPC server, and the
// operational endpoints /healthz (alive), /readyz (ready to serve) and
// /metrics (Prometheus text).
//
// It talks to the broker only through gRPC, so it must not import broker/,
// storage/ or another listener package.
package rest
