// Package errcodes owns THE table from broker error kinds (mqerr.Kind) to
// the wire codes of mqgate's gRPC-based edges: the RocketMQ v2 code
// (apache.rocketmq.v2.Code) and the gRPC status code. gateway/v2service
// (apache.rocketmq.v2.MessagingService) and gateway/restmessaging
// (mqgate.rest.v1.MessagingService) both map through it, so an error kind
// has one v2 code whichever API reports it; gateway/admin takes its gRPC
// codes from it too. CodeOfGRPC gives an error that carries only a gRPC
// code the v2 code of the kind the gRPC code stands for (gateway/httpserver uses
// it for grpc-gateway's and the admin API's errors).
//
// It imports only broker/mqerr, the generated v2 protos and grpc/codes; it
// must not import a listener package (grpcserver, v2service, httpserver, restmessaging, remoting,
// admin) or anything below broker/mqerr.
package errcodes
