// Package console is mqgate's web console: a page served at /console on
// the HTTP listener that shows topics and consumer groups with their
// backlog, in-flight and dead-letter counts, a LITE topic's lite topics
// with each group's backlog, plots send and receive rates
// and the total backlog over time, looks messages up by id or key,
// browses and redrives dead letters, and creates and deletes topics and
// groups.
//
// The page (assets/, embedded) is plain HTML, CSS and JavaScript and loads
// nothing from elsewhere. It calls the REST API through /console/v1/...,
// which this package hands to the listener's /v1/ handler unchanged but
// for the credentials (below), so every call passes the same gRPC
// interceptors, checks and error mapping as a direct REST call. What the
// REST API lacks has its own JSON endpoints under /console/api/: the
// broker's message totals (the rates) and a group's dead letters and
// their redrive.
//
// With auth on, every console route needs HTTP Basic credentials (a
// users-file access key and secret key) of an admin user: 401 without or
// with wrong ones, 403 for a non-admin. Calls to /console/v1/ carry them
// on as the v2 signature the REST API checks.
//
// console imports the broker facade and gateway/auth; it must not import
// gen/, grpc, protobuf or a listener package (it reaches the REST API
// only through the http.Handler the listener gives it).
package console
