// Package remoting is mqgate's classic RocketMQ remoting listener: one TCP
// port that answers as NameServer (routes that advertise this listener's
// own address, cluster info, topic lists) and as Broker (send, pull with
// long polling, heartbeats and consumer lists, offsets, send-back, end
// transaction and transaction checks, request/reply, topic and group
// administration and admin views (stats.go), query and view, the POP
// codes) over the same broker and
// store as the gRPC listener. What it serves to which clients:
// docs/compatibility.md.
//
// Connections: one reader goroutine per connection decodes frames and
// starts one goroutine per request (lifecycle group), bounded by a
// per-connection in-flight limit and byte budgets (frames.go: bytes are
// reserved as they arrive, per connection and server-wide, unauthenticated
// connections in a pool of their own shared by client address, with a lane
// of its own for small frames, a frame must arrive within FrameTimeout),
// so a parked pull never blocks a send on the same connection and stalled
// or unsigned frames cannot starve signed clients. Frames are written
// whole under the connection's write lock. A malformed frame gets one
// error response and closes that connection only; a new connection that
// sends nothing for FirstFrameTimeout, or one idle for IdleTimeout, is
// closed. Connections closed for bad
// input are logged at most once per 10 s, with the count held back.
//
// Errors: every broker error maps to a remoting response code in ONE
// table (responsecode.go).
//
// Auth (Config.Auth set, auth.go): every request, NameServer and Broker
// codes alike, must carry the classic ACL fields AccessKey and Signature,
// verified over the extension fields exactly as decoded and the body
// (auth.Authenticator.Remoting); the user goes into the request's context
// (the ctx every handler gets). A served code is then checked against ONE
// table, accessRules, from request code to what the request touches
// (publish, consume a topic, a consumer group, a route, or admin); a code
// missing from it is admin-only. Requests that name a message only by its
// commit-log offset (CONSUMER_SEND_MSG_BACK, VIEW_MESSAGE_BY_ID,
// END_TRANSACTION) are checked against the topic of the message stored
// there, never a name the request carries. A refusal is answered as upstream's
// auth pipeline answers it: NO_PERMISSION (16) with the reason as remark,
// nothing executed, and no answer to a oneway request. Responses from
// clients (to CHECK_TRANSACTION_STATE and the like) are not requests and
// are not checked.
//
// Requests to clients are oneway, except PUSH_REPLY_MESSAGE_TO_CLIENT and
// the relayed GET_CONSUMER_RUNNING_INFO and CONSUME_MESSAGE_DIRECTLY, whose
// answers Server.call waits for (conn.calls, by opaque; the reader
// hands responses over).
//
// Clients: classic clients are tracked in this package's registry
// (clients.go), not in gateway/session (the gRPC clients' registry): a
// classic client is a member of producer and consumer groups, learnt from
// HEART_BEAT with its subscriptions and tied to its connection, and the
// registry answers group questions (consumer lists for client-side
// rebalancing, NOTIFY_CONSUMER_IDS_CHANGED, pull subscriptions, the
// connection a check-back or reply goes to); gateway/session holds one
// record per v2 client with its Settings and Telemetry stream. The two
// meet only in the broker's transaction check-back, which asks both.
//
// Locking: registry.mu guards the client registry, locks.mu the orderly
// locks, conn.wmu one connection's writes, conn.cmu its waiting calls,
// conn.pmu what it pulled. They never nest; server
// requests to clients (NOTIFY_CONSUMER_IDS_CHANGED, CHECK_TRANSACTION_STATE,
// RESET_CONSUMER_CLIENT_OFFSET) are written after registry.mu is released.
//
// Server is a broker.ResetListener: after an offset reset (admin API, REST,
// CLI, or its own INVOKE_BROKER_TO_RESET_OFFSET) it sends RESET_CONSUMER_CLIENT_OFFSET to the group's connected
// consumers of the topic, on its goroutine group (reset.go).
//
// # Compatibility traps: where each is covered
//
//	 1 concurrent requests per connection    TestParkedPullDoesNotBlockSendOnTheSameConnection
//	 2 int16 code/version, string ext values TestResponseShapeAndOneway, codec TestJSONHeaderIsWhatGoClientsDecode
//	 3 opaque, response bit, oneway           TestResponseShapeAndOneway
//	 4 both header types in, JSON out         TestResponseShapeAndOneway, TestPopFamily (codes > int16)
//	 5 unknown codes answered                 TestResponseShapeAndOneway, e2e TestMalformedFrames…
//	 6 route JSON shape                       TestRouteAdvertisesThisListener
//	 7 reachable IPv4 advertised address      TestRouteAdvertisesThisListener; without --advertise-addr the
//	                                          route names the connection's local address, the one the client
//	                                          dialed, which is never 0.0.0.0 or [::]
//	 8 %RETRY% routes on demand               TestRetryRouteOnDemandAndUnknownTopics
//	 9 TBW102                                 TestAutoCreateTopicRoute
//	10 consumers need existing topics         e2e tests create topics first (admin CreateTopic)
//	11 long polling                           TestLongPollIsHeldAndCapped
//	12 pull answer fields                     TestPullStatusTable
//	13 PULL_OFFSET_MOVED only per the table   TestPullStatusTable
//	14 new group starts at 0                  TestOffsets
//	15 exact client ids, dropped on close     TestConsumerListFollowsConnections, TestClientsExpireWithoutHeartbeats
//	16 groups and retry topics auto-created   TestConsumerListFollowsConnections, TestRetryRouteOnDemandAndUnknownTopics
//	17 send-back must succeed                 TestSendBackRetriesThenDeadLetters, e2e TestClassicRetryThenDLQ,
//	                                          TestClassicRetryUnderAuth; refused only for a message of a topic
//	                                          the group does not consume (TestSendBackOnlyForTopicsTheGroupConsumes)
//	18 retry delay levels start at 3          TestSendBackRetriesThenDeadLetters
//	19 orderly locks; STOREHOST dialable      TestOrderlyLocks, TestSendAnswerAndRecordLayout
//	20 Go and Java heartbeat forms            TestConsumerListFollowsConnections
//	21 record layout                          wire TestRecordLayoutOffsets, TestSendAnswerAndRecordLayout
//	22 SYSFLAG bit 0 matches the body         TestCompressedBodies
//	23 property strings < 32 KiB              TestShardingKeyAndPropertyLimits (wireProperties caps outgoing)
//	24 minted ids for Go batches              TestBatchSendMintsIDs
//	25 send answer fields                     TestSendAnswerAndRecordLayout
//	26 SHARDING_KEY is a plain property       TestShardingKeyAndPropertyLimits
//	27 CreateTopic refusals logged            TestTopicAdmin
//	28 cluster info, PUT_KV_CONFIG            TestRouteAdvertisesThisListener, TestTopicListAndKVConfig
//	29 topic attributes                       TestTopicAdmin, FuzzTopicAttributes
//	30 VIP channel (port − 2)                 not served: mqgate listens on one port; Java clients ≤ 4.4.0
//	                                          must set vipChannelEnabled=false (4.5.1+ default to it)
//	31 no IS_SUPPORT_HEART_BEAT_V2            TestConsumerListFollowsConnections
//	32 checks only to the half's group        TestTransactionsEndAndCheckBack
//	33 POP answers always carry their fields  TestPopFamily
//
// Files: server.go (Server: the listener and its connections), conn.go (one
// connection: reader, frame writes, its pulls), router.go (request codes to
// handlers), namesrv.go (the NameServer side: routes and cluster info),
// via.go (the greeting through which a relaying follower names the client's
// address), convert.go (classic wire messages to stored records and back),
// pull.go (pulls and offset commits), pop.go (the POP family), admin.go
// (topic and group administration), runtime.go (broker runtime info and its
// rates), clients.go (the registry of classic producers and consumers).
//
// remoting must not import gen/, another listener (gateway/grpcserver,
// gateway/httpserver, gateway/admin) or storage (storage/message excepted): it
// reaches the store through broker.Classic.
package remoting
