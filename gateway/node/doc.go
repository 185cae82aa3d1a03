// Package node is mqgate's composition root (etcd's embed): Open builds
// telemetry → storage → broker → listeners in dependency order under one
// lifecycle.Owner, and Shutdown stops them in reverse against one deadline,
// returning a report. `mqgate serve` and the end-to-end tests both use it.
//
// node may import every gateway, broker and storage package; nothing may
// import node except cmd/mqgate and tests.
package node
