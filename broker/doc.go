// Package broker is mqgate's embedded broker: topics and groups, sending,
// POP receive/ack/change-invisibility with redelivery, retry and dead
// letters, long polling, FIFO, delay, transactions and offsets (each in
// its own package). It speaks Go types only (broker/model); every error it
// returns carries an mqerr.Kind.
//
// Filters: tag sets (model.ParseTagFilter) and SQL92 expressions over
// message properties (SQLFilter, filter.go, compiled by broker/sqlfilter)
// select what a receive or pull delivers; a group skips the rest.
//
// Lite topics (broker/lite, lite.go): a LITE topic carries any number of
// lite topics, each a message property of records in the parent queue it
// hashes to; lite consumers subscribe to lite topics and receive them in
// order per lite topic. Receive, Ack, ChangeInvisible and Release route
// a LITE topic's deliveries there.
//
// Operators' views and actions: inspect.go (describe, lookup), reset.go
// (offset resets) and deadletter.go (a group's dead letters and their
// redrive to the topics they came from).
//
// Spans (produce.Send → store.Append, pop.Receive, pop.Ack) and metrics
// are observe.go's; they use the OpenTelemetry API only, never its SDK.
//
// Data groups: in a cluster of several (gateway/node), each group's
// broker holds the queues broker/placement gives its group
// (Config.Placement): its sends, due delayed messages, committed
// transactions and dead letters go there, and the transaction ids and
// recall handles it mints name its group. Topics and groups live in the
// catalog (Config.Catalog, group 0's replica) instead of its own store.
// groups.go reads the queue a receipt handle names and the group a token
// names, for the listeners to route by.
//
// Files: broker.go (Config, the Broker facade: Open wires the services onto
// the store, and the v2 and REST paths of send, receive, ack and
// change-invisibility), classic.go (Classic, the classic remoting protocol's
// view: pulls, offsets, send-back, transaction ends, POP codes and the views
// mqadmin asks for), replicated.go (the Replicator interface of a clustered
// broker and what it changes: every write goes through the replica group,
// those of an activation's services for the leader term they were built in;
// reads stay local; the Catalog of a data group), groups.go (what names a
// request's data group), api.go and checkback.go (request types and the
// check-back fan-out over listeners).
//
// broker must not import gen/, grpc, protobuf or any gateway package; it
// reaches storage through the narrow capabilities storage exposes.
package broker
