package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"runtime/debug"
	"runtime/pprof"
	"runtime/trace"
	"syscall"
	"time"

	"github.com/mqgate/mqgate/gateway/node"
	"github.com/mqgate/mqgate/internal/buildinfo"
	"github.com/mqgate/mqgate/internal/memlimit"
	"github.com/mqgate/mqgate/internal/telemetry"
)

// serve runs the gateway until SIGINT/SIGTERM. The first signal fixes ONE
// absolute deadline (now + shutdown-timeout) for the whole shutdown; later
// signals are logged and change nothing. Exit status is 0 only when every
// component stopped cleanly.
func serve(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	var warnings []string
	cfg, _, printOnly, err := loadConfig(args, os.Environ(), func(w string) { warnings = append(warnings, w) })
	if errors.Is(err, flag.ErrHelp) {
		printServeHelp(stdout)
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
	// Diagnostic hooks for performance work: profile, or trace, the whole
	// run (an execution trace for `go tool trace`: where latency goes).
	if path := os.Getenv("MQGATE_TEST_CPUPROFILE"); path != "" {
		if f, err := os.Create(path); err == nil && pprof.StartCPUProfile(f) == nil {
			defer func() { pprof.StopCPUProfile(); f.Close() }()
		}
	}
	if path := os.Getenv("MQGATE_TEST_TRACE"); path != "" {
		if f, err := os.Create(path); err == nil && trace.Start(f) == nil {
			defer func() { trace.Stop(); f.Close() }()
		}
	}
	build := buildinfo.Read(version)
	log.Info("mqgate starting", "version", build.Version, "revision", build.Revision, "dirty", build.Dirty, "go", build.GoVersion)
	if soft, from := memlimit.Default(os.Getenv, os.DirFS("/")); soft > 0 {
		debug.SetMemoryLimit(soft)
		log.Info("Go's soft memory limit set (GOMEMLIMIT sets another)", "limit_bytes", soft, "from", from)
	}
	for _, w := range warnings {
		log.Warn(w)
	}

	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	defer signal.Stop(sigs)
	// SIGHUP is caught from the start (a hangup must not kill a starting
	// server) and acted on once the node is up.
	hups := make(chan os.Signal, 1)
	signal.Notify(hups, syscall.SIGHUP)
	defer signal.Stop(hups)

	startCtx, cancelStart := context.WithCancel(ctx)
	defer cancelStart()
	type opened struct {
		n   *node.Node
		err error
	}
	openc := make(chan opened, 1)
	go func() {
		n, err := node.Open(startCtx, cfg, node.Options{Logger: log, Build: build, HangOnStop: os.Getenv("MQGATE_TEST_HANG_STOP")})
		openc <- opened{n, err}
	}()
	var (
		n   *node.Node
		sig os.Signal
	)
	select {
	case o := <-openc:
		if o.err != nil {
			log.Error("mqgate failed to start", "err", o.err)
			return 1
		}
		n = o.n
		for {
			stopReload := reloadOnHangup(log, n, hups)
			select {
			case sig = <-sigs:
			case <-n.Restart():
			case <-n.Removed():
				stopReload()
				log.Warn("this member was removed from its cluster: stopping")
				return shutdown(log, n, removedSignal{}, time.Now().Add(cfg.ShutdownTimeout), sigs)
			}
			stopReload()
			if sig != nil {
				break
			}
			// The node asked to be opened again (a cluster member installing
			// a copy of another member's store).
			log.Info("restarting the node")
			if code := shutdown(log, n, restartSignal{}, time.Now().Add(cfg.ShutdownTimeout), nil); code != 0 {
				return code
			}
			if n, err = node.Open(ctx, cfg, node.Options{Logger: log, Build: build, HangOnStop: os.Getenv("MQGATE_TEST_HANG_STOP")}); err != nil {
				log.Error("mqgate failed to start again", "err", err)
				return 1
			}
		}
	case sig = <-sigs:
		// A signal while starting: the deadline is fixed now, start is
		// cancelled, and whatever did start is shut down like any node.
		deadline := time.Now().Add(cfg.ShutdownTimeout)
		log.Info("signal during start: aborting the start", "signal", sig.String(), "deadline", deadline)
		cancelStart()
		o := <-openc
		if o.err != nil {
			log.Error("mqgate did not finish starting", "err", o.err)
			return 1
		}
		n = o.n
		return shutdown(log, n, sig, deadline, sigs)
	}
	return shutdown(log, n, sig, time.Now().Add(cfg.ShutdownTimeout), sigs)
}

// shutdown stops n against one absolute deadline, logs the report and
// returns the exit status: 0 only when every component stopped cleanly.
func shutdown(log *slog.Logger, n *node.Node, sig os.Signal, deadline time.Time, sigs <-chan os.Signal) int {
	log.Info("shutting down", "signal", sig.String(), "deadline", deadline)
	sctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	if sigs != nil {
		go func() {
			for s := range sigs {
				log.Warn("already shutting down; the deadline stays", "signal", s.String(), "deadline", deadline)
			}
		}()
	}
	rep := n.Shutdown(sctx)
	if rep.Healthy() {
		log.Info("shutdown report", "report", rep)
		return 0
	}
	log.Error("shutdown report", "report", rep)
	return 1
}

// reloadOnHangup re-reads the users file on each SIGHUP from hups
// (credential rotation without a restart) until the returned stop is
// called.
func reloadOnHangup(log *slog.Logger, n *node.Node, hups <-chan os.Signal) (stop func()) {
	done := make(chan struct{})
	go func() {
		for {
			select {
			case <-done:
				return
			case <-hups:
				if users, err := n.ReloadAuth(); err != nil {
					log.Error("SIGHUP: users file not reloaded", "err", err)
				} else {
					log.Info("SIGHUP: users file reloaded", "users", users)
				}
			}
		}
	}()
	return func() { close(done) }
}

// removedSignal names the shutdown of a member removed from its cluster.
type removedSignal struct{}

func (removedSignal) String() string { return "removed from the cluster" }
func (removedSignal) Signal()        {}

// restartSignal names a shutdown the node asked for to be opened again.
type restartSignal struct{}

func (restartSignal) String() string { return "restart" }
func (restartSignal) Signal()        {}
