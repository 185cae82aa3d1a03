package node

import (
	"context"
	"time"

	healthpb "google.golang.org/grpc/health/grpc_health_v1"
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
func (n *Node) watchHealth(ctx context.Context) {
	t := time.NewTicker(healthInterval)
	defer t.Stop()
	serving := true
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
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
