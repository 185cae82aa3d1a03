// Package node is mqgate's composition root (etcd's embed): Open builds
// telemetry → storage → broker → listeners in dependency order under one
// lifecycle.Owner, and Shutdown stops them in reverse against one deadline,
// returning a report. `mqgate serve` and the end-to-end tests both use it.
//
// Files: node.go (Options, Node, Open and Shutdown, the order of
// components), config.go (Config, Defaults and validation), cluster.go
// (cluster mode: the replica, the raft member, relays, leadership handoff
// and restart after a store copy), groups.go (cluster mode with several
// data groups: a replica, raft group and broker per group, each group
// followed as cluster.go follows one, the catalog in group 0, leadership
// balance), replicas.go (replica sets: the members each data group is on,
// decided and recorded when the cluster is created, or learned from the
// running members by a member joining, the groups a member is removed
// from while it runs, and the leaders and voters of the groups this
// member does not host, learned from those hosting them),
// groupsview.go (the v2 listener's view of the groups: which
// member serves each, forwarding connections), groupsadmin.go (the admin
// and REST APIs' brokers with several groups), metrics.go (the metrics listener:
// /metrics, and this member's own /healthz and /readyz through
// httpserver.MountHealth), health.go (the gRPC health service following the
// store), observe.go (store, admission and auth metrics read at collection),
// storecheck.go (verify and repair of a stopped store for cmd/mqgate),
// conns.go (the connection limits every listener is wrapped in), views.go
// (the admin API's views of the node: its clients and its cluster).
//
// node may import every gateway, broker and storage package; nothing may
// import node except cmd/mqgate and tests.
package node
