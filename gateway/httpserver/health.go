package httpserver

import (
	"fmt"
	"net/http"
)

// MountHealth mounts the probes on mux: GET /healthz answers 200 "ok"
// while the process serves HTTP at all; GET /readyz asks ready on each
// request and answers 200 "ready" (followed by ": " and what ready names,
// such as a cluster member's role, and by "; " and notice's condition a
// ready node still has, such as a full disk) or 503 "not ready: <why>".
// The HTTP listener and the node's metrics listener both mount them, each
// with its own notion of ready. ready and notice may be nil.
func MountHealth(mux *http.ServeMux, ready func() (string, error), notice func() string) {
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		what, err := "", error(nil)
		if ready != nil {
			what, err = ready()
		}
		if err != nil {
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprintf(w, "not ready: %v\n", err)
			return
		}
		line := "ready"
		if what != "" {
			line += ": " + what
		}
		if notice != nil {
			if note := notice(); note != "" {
				line += "; " + note
			}
		}
		fmt.Fprintln(w, line)
	})
}
