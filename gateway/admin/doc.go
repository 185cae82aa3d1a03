// Package admin serves mqgate.admin.v1.AdminService: topic and consumer
// group management over the broker's metadata methods (admin.go),
// ResetOffset, which moves a consumer group's position in a topic
// (reset.go), dead letters (deadletter.go), the read-only inspection RPCs
// DescribeTopic, DescribeGroup and LookupMessage over the broker's
// inspect facade (inspect.go), ListLiteTopics, a LITE topic's lite topics
// with each group's backlog (lite.go), and the operators' views
// (views.go): BrowseMessages (a queue by offset or store time), GetStats
// (counters per topic and subscription), ListClients (from
// Options.Clients, which the node joins from the gRPC session registry
// and the remoting listener), GetClusterStatus and TransferLeadership
// (Options.Cluster, the node's raft member; a single node without it) and
// WhoAmI. Over a cluster's data groups, lookups and browsing are routed
// to the groups' leaders (Options.Groups, groups.go, forwarding through
// gateway/forwarding). The `mqgate topic|group|message` commands, the web console and
// the MCP server use them. Unlike the RocketMQ v2 services, errors are plain
// gRPC status codes (InvalidArgument, NotFound, AlreadyExists, …), taken
// from gateway/errcodes's Kind → code table, whose messages name the
// resource.
//
// Who may call what (access.go): the gRPC listener lets only admins call
// the admin API but the views OpenToUsers names, which any signed-in user
// may call; those check what they touch with the caller's permissions and
// answer with what the caller may see only.
//
// admin must not import another listener package (grpcserver, v2service, httpserver,
// remoting), gateway/peer, storage/ or the apache.rocketmq.v2 protos (it
// uses only errcodes's gRPC codes); the cluster and the clients reach it
// as its own types.
package admin
