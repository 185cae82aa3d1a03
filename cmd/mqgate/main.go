package main

import (
	"context"
	"fmt"
	"io"
	"os"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

func main() {
	os.Exit(run(context.Background(), os.Args[1:], os.Stdout, os.Stderr))
}

const usage = `mqgate — a RocketMQ 5 compatible messaging gateway

Usage:
  mqgate [serve] [flags]      run the gateway (the default command)
  mqgate topic ...            create, list, describe or delete topics on a running gateway
  mqgate group ...            create, list, describe or delete consumer groups on a running gateway
  mqgate version              print the version
  mqgate help                 this text

Run 'mqgate serve -h' for the server settings.
`

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	cmd := "serve"
	if len(args) > 0 && len(args[0]) > 0 && args[0][0] != '-' {
		cmd, args = args[0], args[1:]
	}
	switch cmd {
	case "serve":
		return serve(ctx, args, stdout, stderr)
	case "topic":
		return topicCmd(ctx, args, stdout, stderr)
	case "group":
		return groupCmd(ctx, args, stdout, stderr)
	case "version":
		fmt.Fprintln(stdout, "mqgate", version)
		return 0
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return 0
	default:
		fmt.Fprintf(stderr, "mqgate: unknown command %q\n\n%s", cmd, usage)
		return 2
	}
}
