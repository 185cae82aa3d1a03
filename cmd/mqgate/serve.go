package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/pprof"
	"syscall"
	"time"

	"github.com/mqgate/mqgate/gateway/node"
	"github.com/mqgate/mqgate/internal/telemetry"
)

// serve runs the gateway until SIGINT/SIGTERM. The first signal fixes ONE
// absolute deadline (now + shutdown-timeout) for the whole shutdown; later
// signals are logged and change nothing. Exit status is 0 only when every
// component stopped cleanly.
func serve(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	var warnings []string
	cfg, fs, printOnly, err := loadConfig(args, os.Environ(), func(w string) { warnings = append(warnings, w) })
	if errors.Is(err, flag.ErrHelp) {
		fmt.Fprint(stdout, "Usage: mqgate serve [flags]\n\nEach flag can also be set with its MQGATE_* environment variable or as a key in the --config YAML file;\nprecedence is flag > environment > file > default.\n\n")
		fs.SetOutput(stdout)
		fs.PrintDefaults()
		return 0
	}
	if err != nil {
		fmt.Fprintf(stderr, "mqgate serve: %v\n", err)
		return 2
	}
	if printOnly {
		fmt.Fprint(stdout, renderConfig(cfg))
		return 0
	}
	log := telemetry.NewLogger(stderr, cfg.LogLevel, cfg.LogFormat)
	// Diagnostic hook for performance work: profile the whole run.
	if path := os.Getenv("MQGATE_TEST_CPUPROFILE"); path != "" {
		if f, err := os.Create(path); err == nil && pprof.StartCPUProfile(f) == nil {
			defer func() { pprof.StopCPUProfile(); f.Close() }()
		}
	}
	for _, w := range warnings {
		log.Warn(w)
	}

	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	defer signal.Stop(sigs)

	startCtx, cancelStart := context.WithCancel(ctx)
	defer cancelStart()
	type opened struct {
		n   *node.Node
		err error
	}
	openc := make(chan opened, 1)
	go func() {
		n, err := node.Open(startCtx, cfg, node.Options{Logger: log, Version: version, HangOnStop: os.Getenv("MQGATE_TEST_HANG_STOP")})
		openc <- opened{n, err}
	}()
	var n *node.Node
	select {
	case o := <-openc:
		if o.err != nil {
			log.Error("mqgate failed to start", "err", o.err)
			return 1
		}
		n = o.n
	case sig := <-sigs:
		log.Info("signal during start: aborting", "signal", sig.String())
		cancelStart()
		if o := <-openc; o.err == nil {
			sctx, cancel := context.WithTimeout(context.Background(), cfg.ShutdownTimeout)
			defer cancel()
			o.n.Shutdown(sctx)
		}
		return 1
	}

	sig := <-sigs
	deadline := time.Now().Add(cfg.ShutdownTimeout)
	log.Info("shutting down", "signal", sig.String(), "deadline", deadline)
	sctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	go func() {
		for s := range sigs {
			log.Warn("already shutting down; the deadline stays", "signal", s.String(), "deadline", deadline)
		}
	}()
	rep := n.Shutdown(sctx)
	if rep.Healthy() {
		log.Info("shutdown report", "report", rep)
		return 0
	}
	log.Error("shutdown report", "report", rep)
	return 1
}
