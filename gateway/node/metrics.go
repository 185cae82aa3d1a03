package node

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/mqgate/mqgate/gateway/httpserver"
)

// The metrics listener (--metrics-addr) serves /metrics: the series name
// every topic and consumer group, so they are kept off the API listeners,
// bound to loopback by default, and behind a bearer token when
// --metrics-token is set. It also serves this member's own /healthz and
// /readyz, without the token (probes): in cluster mode the HTTP listener
// of a member that does not lead passes every connection to the leader,
// its /healthz and /readyz included, so a probe there says nothing about
// the member itself.

func (n *Node) startMetrics(ctx context.Context) error {
	lis := n.lis["metrics-addr"]
	n.addrs.Metrics = lis.Addr().String()
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", requireToken(n.cfg.MetricsToken, n.tel.MetricsHandler()))
	httpserver.MountHealth(mux, n.memberReady, n.readyNotice)
	n.metrics = &http.Server{Handler: mux, ReadHeaderTimeout: n.cfg.HandshakeTimeout, IdleTimeout: 2 * time.Minute}
	return n.group.Go("metrics-serve", func(context.Context) {
		if err := n.metrics.Serve(lis); err != nil && !errors.Is(err, http.ErrServerClosed) {
			n.log.Error("metrics listener failed", "err", err)
		}
	})
}

// memberReady is this member's own readiness: Ready, and in cluster mode
// a running raft member that knows a leader (a member that does not lead
// serves clients by passing them to the leader). It names the member's
// role: "single node", "leader" or "follower of member N".
func (n *Node) memberReady() (string, error) {
	if err := n.Ready(); err != nil {
		return "", err
	}
	if n.raft == nil {
		return "single node", nil
	}
	if n.multiGroup() {
		return n.groupsReady()
	}
	select {
	case <-n.raft.Done():
		return "", fmt.Errorf("the raft member stopped: %v", n.raft.Err())
	default:
	}
	if err := n.raft.Stalled(); err != nil {
		return "", fmt.Errorf("the raft member waits for room on the data disk: %v", err)
	}
	switch lead := n.raft.Leader(); {
	case n.raft.IsLeader():
		return "leader", nil
	case lead == 0:
		return "", errors.New("no leader known (an election is under way, or a majority of the members is unreachable)")
	default:
		return fmt.Sprintf("follower of member %d", lead), nil
	}
}

func (n *Node) stopMetrics(ctx context.Context) error {
	if n.metrics == nil {
		return nil
	}
	if err := n.metrics.Shutdown(ctx); err != nil {
		return errors.Join(err, n.metrics.Close())
	}
	return nil
}

// requireToken answers 401 unless the request carries
// "Authorization: Bearer <token>"; an empty token lets every request in.
func requireToken(token string, h http.Handler) http.Handler {
	if token == "" {
		return h
	}
	want := []byte(token)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if !ok || subtle.ConstantTimeCompare([]byte(got), want) != 1 {
			w.Header().Set("WWW-Authenticate", `Bearer realm="mqgate metrics"`)
			http.Error(w, "metrics need Authorization: Bearer <--metrics-token>", http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
	})
}
