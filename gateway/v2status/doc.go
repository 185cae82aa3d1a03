// Package v2status owns THE table from broker error kinds (mqerr.Kind) to
// the wire codes of mqgate's gRPC-based edges: the RocketMQ v2 code
// (apache.rocketmq.v2.Code) and the gRPC status code. gateway/grpcserver
// (apache.rocketmq.v2.MessagingService) and gateway/restapi
// (mqgate.rest.v1.MessagingService) both map through it, so an error kind
// has one v2 code whichever API reports it.
//
// It imports only broker/mqerr, the generated v2 protos and grpc/codes; it
// must not import a listener package (grpcserver, rest, restapi, remoting,
// admin) or anything below broker/mqerr.
package v2status
