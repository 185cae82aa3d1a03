package node

import (
	"context"
	"fmt"
	"time"

	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/mqgate/mqgate/storage"
)

// healthInterval is how often watchHealth looks at the store.
const healthInterval = time.Second

// messagingHealth is the gRPC health name the readiness probes ask for.
// Only it follows the store: the server's own name ("", the liveness
// probes') stays SERVING while the store cannot write, since a restart
// makes no room on a full disk.
const messagingHealth = "apache.rocketmq.v2.MessagingService"

// watchHealth keeps the gRPC health of the messaging service in step with
// Ready while the node runs: NOT_SERVING while the store cannot write,
// SERVING again once it can (/readyz asks Ready itself on each request).
// It also looks at the free space each time, so that crossing the disk
// reserve is logged (by the store) and seen in the metrics even on a node
// nobody sends to, such as a cluster member that does not lead.
func (n *Node) watchHealth(ctx context.Context) {
	t := time.NewTicker(healthInterval)
	defer t.Stop()
	serving, low := true, false
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if sp := n.store.Space(); sp.Low() != low {
			low = sp.Low()
			if low && n.raft != nil && !n.raft.IsLeader() {
				n.log.Warn("this member's disk is below its reserve; the leader does not see it and goes on accepting messages: "+
					"give members disks alike, and free space here before it fills (then this member stops applying entries until there is room)",
					"free", sp.Free, "reserve", sp.Reserve)
			}
		}
		n.healthMu.Lock()
		if n.stopping.Load() {
			n.healthMu.Unlock()
			return
		}
		err := n.Ready()
		if ok := err == nil; ok != serving {
			serving = ok
			st := healthpb.HealthCheckResponse_SERVING
			if !ok {
				st = healthpb.HealthCheckResponse_NOT_SERVING
				n.log.Warn("not ready: the store cannot write", "err", err)
			} else {
				n.log.Info("ready again: the store can write")
			}
			n.grpc.Health.SetServingStatus(messagingHealth, st)
		}
		n.healthMu.Unlock()
	}
}

// readyNotice is what a ready node's /readyz adds: that new messages are
// refused, while the data disk has less free space than its reserve.
func (n *Node) readyNotice() string {
	sp := n.store.Space()
	if !sp.Low() {
		return ""
	}
	free, reserve := storage.FormatBytes(sp.Free), storage.FormatBytes(sp.Reserve)
	if n.raft != nil && !n.raft.IsLeader() {
		return fmt.Sprintf("this member's disk is below its reserve: %s free on the data disk, reserve %s (--disk-reserve); "+
			"the leader accepts messages by its own disk: free space here before it fills", free, reserve)
	}
	return fmt.Sprintf("the disk is full: %s free on the data disk, below its reserve of %s (--disk-reserve): "+
		"new messages are refused, consumers still receive and acknowledge", free, reserve)
}
