package node

import (
	"context"
	"crypto/subtle"
	"errors"
	"net/http"
	"strings"
	"time"
)

// The metrics listener (--metrics-addr) serves /metrics alone: the series
// name every topic and consumer group, so they are kept off the API
// listeners, bound to loopback by default, and behind a bearer token when
// --metrics-token is set.

func (n *Node) startMetrics(ctx context.Context) error {
	lis := n.lis["metrics-addr"]
	n.addrs.Metrics = lis.Addr().String()
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", requireToken(n.cfg.MetricsToken, n.tel.MetricsHandler()))
	n.metrics = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	return n.group.Go("metrics-serve", func(context.Context) {
		if err := n.metrics.Serve(lis); err != nil && !errors.Is(err, http.ErrServerClosed) {
			n.log.Error("metrics listener failed", "err", err)
		}
	})
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
