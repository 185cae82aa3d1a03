package v2service

// Every RPC of apache.rocketmq.v2.MessagingService is served; an RPC
// added to the proto is a compile error until it is answered (the
// service embeds the Unsafe interface). One that is not served answers
// NOT_IMPLEMENTED (50100) as its status payload with gRPC OK — never a
// fake success (statusNotYet).
