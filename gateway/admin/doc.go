// Package admin serves mqgate.admin.v1.AdminService: topic and consumer
// group management over the broker's metadata methods (admin.go),
// ResetOffset, which moves a consumer group's position in a topic
// (reset.go), and the read-only inspection RPCs DescribeTopic,
// DescribeGroup and LookupMessage over the broker's inspect facade
// (inspect.go), and ListLiteTopics, a LITE topic's lite topics with each
// group's backlog (lite.go), used by the `mqgate topic`, `mqgate group` and `mqgate
// message` commands. Unlike the RocketMQ v2 services, errors are plain
// gRPC status codes (InvalidArgument, NotFound, AlreadyExists, …), taken
// from gateway/v2status's Kind → code table, whose messages name the
// resource.
//
// admin must not import another listener package (grpcserver, v2service, httpserver,
// remoting), storage/ or the apache.rocketmq.v2 protos (it uses only
// v2status's gRPC codes).
package admin
