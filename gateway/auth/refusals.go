package auth

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"
)

// Refusal is one call refused by a listener.
type Refusal struct {
	Listener string // "grpc" (REST included: it reaches gRPC in process) or "remoting"
	Peer     string // the caller's address
	Call     string // the method or request code
	// Authorization is true when the caller was authenticated but may not
	// do what it asked; false when it could not be authenticated.
	Authorization bool
	Err           error
}

// refusals counts refused calls and rate-limits their log lines: a
// misconfigured client or a scan must not flood the log.
type refusals struct {
	counts [2][2]atomic.Uint64 // [listener grpc=0 remoting=1][authorization]

	mu         sync.Mutex
	window     time.Time // the second being counted
	logged     int       // lines logged in window
	suppressed int       // lines not logged since the last summary
}

// maxRefusalLogsPerSecond bounds the refusal lines logged each second.
const maxRefusalLogsPerSecond = 20

// Refused records r: counted for the metrics (RefusalCounts), logged at
// info (at most maxRefusalLogsPerSecond lines a second; the rest are
// summarised). A nil Authenticator does nothing.
func (a *Authenticator) Refused(ctx context.Context, log *slog.Logger, r Refusal) {
	if a == nil {
		return
	}
	li := 0
	if r.Listener == "remoting" {
		li = 1
	}
	az := 0
	if r.Authorization {
		az = 1
	}
	a.refused.counts[li][az].Add(1)
	if log == nil || !log.Enabled(ctx, slog.LevelInfo) {
		return
	}
	now := a.now()
	rf := &a.refused
	rf.mu.Lock()
	var dropped int
	if now.Sub(rf.window) >= time.Second {
		dropped, rf.suppressed = rf.suppressed, 0
		rf.window, rf.logged = now, 0
	}
	ok := rf.logged < maxRefusalLogsPerSecond
	if ok {
		rf.logged++
	} else {
		rf.suppressed++
	}
	rf.mu.Unlock()
	if dropped > 0 {
		log.InfoContext(ctx, "auth: refusals not logged (more than the log budget)", "count", dropped, "budget_per_second", maxRefusalLogsPerSecond)
	}
	if !ok {
		return
	}
	reason := "authentication"
	if r.Authorization {
		reason = "authorization"
	}
	log.InfoContext(ctx, "auth: call refused", "listener", r.Listener, "peer", r.Peer, "call", r.Call, "reason", reason, "err", r.Err.Error())
}

// RefusalCount is the number of calls refused on one listener for one reason.
type RefusalCount struct {
	Listener, Reason string
	Count            uint64
}

// RefusalCounts returns the refusals so far, for every listener and
// reason (zeros included, so the series exist from the start).
func (a *Authenticator) RefusalCounts() []RefusalCount {
	var out []RefusalCount
	for li, l := range []string{"grpc", "remoting"} {
		for az, r := range []string{"authentication", "authorization"} {
			out = append(out, RefusalCount{Listener: l, Reason: r, Count: a.refused.counts[li][az].Load()})
		}
	}
	return out
}
