package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mqgate/mqgate/gateway/mcpserver"
	"github.com/mqgate/mqgate/internal/buildinfo"
)

const mcpUsage = `Usage: mqgate mcp [--server HOST:PORT] [--tls] [--timeout D]

Serves mqgate's read-only diagnostics tools to an assistant over the Model
Context Protocol on standard input and output (its stdio transport): the
assistant starts this command and asks it about topics, consumer groups,
messages, routes, stuck consumers and the cluster. Each tool reads the
admin API of the mqgate at --server; nothing changes anything. Logs go to
standard error.

With --auth-file on the server, give the credentials in the environment
(MQGATE_ACCESS_KEY, MQGATE_SECRET_KEY): the tools see what that user may.

Flags:
  --server HOST:PORT   the running mqgate's gRPC port (default 127.0.0.1:8081)
  --tls                connect with TLS (the certificate is not verified)
  --timeout D          bound on each admin call (default 10s)
`

// mcpCmd serves the MCP tools over stdin and stdout until the client
// closes its side or a signal arrives.
func mcpCmd(ctx context.Context, args []string, stdin io.ReadCloser, stdout io.WriteCloser, stderr io.Writer) int {
	fs := newFlagSet("mcp")
	var c clientFlags
	c.register(fs)
	pos, err := parseInterleaved(fs, args)
	if err == nil && len(pos) > 0 {
		err = usageErr("mcp takes no arguments, got %q", pos)
	}
	if err != nil {
		return usageExit("mcp", mcpUsage, err, stdout, stderr)
	}
	a, err := dialAdmin(c)
	if err != nil {
		fmt.Fprintf(stderr, "mqgate mcp: %v\n", err)
		return exitUsage
	}
	defer a.Close()
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	srv := mcpserver.NewServer(mcpserver.Options{Conn: a.conn, Version: buildinfo.Read(version).Version, Logger: log, CallTimeout: c.timeout})
	if err := srv.Run(ctx, &mcp.IOTransport{Reader: stdin, Writer: stdout}); err != nil && !errors.Is(err, context.Canceled) && !errors.Is(err, io.EOF) {
		fmt.Fprintf(stderr, "mqgate mcp: %v\n", err)
		return exitFail
	}
	return exitOK
}
