package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/mqgate/mqgate/cmd/mqgate/internal/bench"
	"github.com/mqgate/mqgate/gateway/grpcserver"
	"github.com/mqgate/mqgate/internal/buildinfo"
)

// version, when set at link time with -ldflags "-X main.version=...",
// overrides the version the Go toolchain stamped into the binary (see
// internal/buildinfo).
var version = "dev"

// Every gRPC server and client in this binary, and the proto codec, take
// buffers from mqgate's pool (grpcserver.BufferPool).
func init() { grpcserver.SetDefaultBufferPool() }

func main() {
	os.Exit(run(context.Background(), os.Args[1:], os.Stdout, os.Stderr))
}

const usage = `mqgate — a RocketMQ 5 compatible messaging gateway

Usage:
  mqgate serve [flags]        run the gateway (mqgate serve -h lists its settings)
  mqgate topic ...            create, list, describe or delete topics on a running gateway
  mqgate group ...            create, list, describe, delete consumer groups or reset their offsets
  mqgate bench ...            load generator: produce, consume or e2e, with a gRPC echo baseline
  mqgate send ...             send a message (or one per line of standard input)
  mqgate receive ...          receive messages of a consumer group, printed as JSON lines
  mqgate ack ...              acknowledge received messages by receipt handle
  mqgate message show ...     find stored messages by message id or key
  mqgate verify ...           check a stopped gateway's store for damage (changes nothing)
  mqgate repair ...           repair a stopped gateway's store (prints the plan; --yes does it)
  mqgate cluster ...          a replicated broker set: status, transfer-leader, add-node,
                              remove-node, init-certs
  mqgate mcp ...              diagnostics tools for assistants (Model Context Protocol, stdio)
  mqgate version              print the version, VCS revision and Go version (also --version)
  mqgate completion SHELL     shell completion script: bash, zsh or fish
  mqgate help [COMMAND]       this text, or a command's own (the same as COMMAND -h)

Run 'mqgate serve -h' for the server settings.
`

// nopWriteCloser leaves closing standard output to the process.
type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	cmd, args := args[0], args[1:]
	switch cmd {
	case "serve":
		return serve(ctx, args, stdout, stderr)
	case "topic":
		return topicCmd(ctx, args, stdout, stderr)
	case "group":
		return groupCmd(ctx, args, stdout, stderr)
	case "bench":
		return bench.Cmd(ctx, args, stdout, stderr)
	case "send":
		return sendCmd(ctx, args, os.Stdin, stdout, stderr)
	case "receive":
		return receiveCmd(ctx, args, stdout, stderr)
	case "ack":
		return ackCmd(ctx, args, stdout, stderr)
	case "message":
		return messageCmd(ctx, args, stdout, stderr)
	case "verify":
		return verifyCmd(ctx, args, stdout, stderr)
	case "repair":
		return repairCmd(ctx, args, stdout, stderr)
	case "cluster":
		return clusterCmd(ctx, args, stdout, stderr)
	case "mcp":
		return mcpCmd(ctx, args, os.Stdin, nopWriteCloser{stdout}, stderr)
	case "version", "--version":
		fmt.Fprintln(stdout, "mqgate", buildinfo.Read(version))
		return 0
	case "completion":
		return completionCmd(args, stdout, stderr)
	case "help", "-h", "--help":
		if cmd == "help" && len(args) > 0 && args[0] != "help" {
			if !isCommand(args[0]) {
				fmt.Fprintf(stderr, "mqgate help: unknown command %q\n\n%s", args[0], usage)
				return 2
			}
			return run(ctx, []string{args[0], "-h"}, stdout, stderr)
		}
		fmt.Fprint(stdout, usage)
		return 0
	default:
		if strings.HasPrefix(cmd, "-") {
			fmt.Fprintf(stderr, "mqgate: %s is not a command; server settings go after it: mqgate serve %s\n\n%s", cmd, cmd, usage)
			return 2
		}
		fmt.Fprintf(stderr, "mqgate: unknown command %q\n\n%s", cmd, usage)
		return 2
	}
}

// commands are the commands the global usage lists, in its order.
func commands() []string {
	var out []string
	for _, l := range strings.Split(usage, "\n") {
		if rest, ok := strings.CutPrefix(l, "  mqgate "); ok {
			out = append(out, strings.Fields(rest)[0])
		}
	}
	return out
}

func isCommand(name string) bool {
	for _, c := range commands() {
		if c == name {
			return true
		}
	}
	return false
}
