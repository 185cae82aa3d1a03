package mcpserver

import (
	"encoding/json"
	"log/slog"
	"net/http"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mqgate/mqgate/gateway/auth"
)

// Path is where the HTTP listener serves the MCP endpoint.
const Path = "/mcp"

// Handler serves the tools over MCP's streamable HTTP transport,
// stateless (every request stands alone, no session outlives it) with
// JSON answers. With a (auth on) each request must carry a valid
// X-Mq-Date-Time and Authorization signature, checked before its body is
// read (401 otherwise) and passed on to the admin API, which checks what
// each tool touches with that user's permissions. Requests from other
// sites' pages are refused (cross-origin protection), and so are requests
// to loopback that name another host (DNS rebinding).
func Handler(o Options, a *auth.Authenticator) http.Handler {
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	s := NewServer(o)
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s },
		&mcp.StreamableHTTPOptions{Stateless: true, JSONResponse: true, Logger: o.Logger})
	protected := http.NewCrossOriginProtection().Handler(h)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if a != nil {
			if _, err := a.V2(r.Header.Get("Authorization"), r.Header.Get("X-Mq-Date-Time")); err != nil {
				a.Refused(r.Context(), o.Logger, auth.Refusal{Listener: "grpc", Peer: r.RemoteAddr + " (MCP)", Call: r.Method + " " + r.URL.Path, Err: err})
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusUnauthorized)
				_ = json.NewEncoder(w).Encode(struct {
					Error string `json:"error"`
				}{"MCP over HTTP needs a request signed as the REST API's are (X-Mq-Date-Time and Authorization): " + err.Error()})
				return
			}
		}
		protected.ServeHTTP(w, r)
	})
}
