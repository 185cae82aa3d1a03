package node

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"sync/atomic"

	"github.com/mqgate/mqgate/gateway/admission"
	"github.com/mqgate/mqgate/gateway/grpcserver"
	"github.com/mqgate/mqgate/gateway/rest"
	"github.com/mqgate/mqgate/internal/lifecycle"
	"github.com/mqgate/mqgate/internal/telemetry"
)

// Options are the non-configuration inputs of Open.
type Options struct {
	Logger  *slog.Logger
	Version string
	// HangOnStop names a component whose Stop blocks until the deadline.
	// It exists only so tests can prove a hung component cannot hold the
	// process past the shutdown deadline (set through MQGATE_TEST_HANG_STOP).
	HangOnStop string
}

// Addrs are the bound listener addresses (useful with port 0).
type Addrs struct {
	GRPC, HTTP, Remoting string
}

// Node is a running mqgate.
type Node struct {
	cfg   Config
	log   *slog.Logger
	owner *lifecycle.Owner
	gate  *admission.Gate
	tel   *telemetry.Telemetry

	group *lifecycle.Group

	grpc *grpcserver.Server
	http *rest.Server

	addrs    Addrs
	ready    atomic.Bool
	stopping atomic.Bool
}

// Open starts a node. On error everything already started is stopped.
func Open(ctx context.Context, cfg Config, o Options) (*Node, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	log := o.Logger
	if log == nil {
		log = slog.Default()
	}
	n := &Node{cfg: cfg, log: log, owner: lifecycle.NewOwner(log), gate: admission.NewGate()}
	if err := os.MkdirAll(cfg.DataDir, 0o755); err != nil {
		return nil, fmt.Errorf("data dir: %w", err)
	}

	// Registered first so it stops last: every serve loop and background
	// goroutine of the node runs in this group, and its shutdown names any
	// that outlived their component.
	n.group = lifecycle.NewGroup(ctx)
	n.add(o, lifecycle.Func{ComponentName: "goroutines", StopFn: n.group.Shutdown})
	n.add(o, lifecycle.Func{ComponentName: "telemetry",
		StartFn: func(ctx context.Context) error {
			t, err := telemetry.Setup(ctx, telemetry.Options{ServiceVersion: o.Version})
			n.tel = t
			return err
		},
		StopFn: func(ctx context.Context) error { return n.tel.Shutdown(ctx) },
	})
	n.add(o, lifecycle.Func{ComponentName: "grpc", StartFn: n.startGRPC,
		StopFn: func(ctx context.Context) error { return n.grpc.Stop(ctx) }})
	n.add(o, lifecycle.Func{ComponentName: "http", StartFn: n.startHTTP,
		StopFn: func(ctx context.Context) error { return n.http.Stop(ctx) }})

	if err := n.owner.Start(ctx); err != nil {
		return nil, err
	}
	n.ready.Store(true)
	n.grpc.SetServing(true)
	log.Info("mqgate ready", "grpc", n.addrs.GRPC, "http", n.addrs.HTTP, "remoting", n.addrs.Remoting,
		"data_dir", cfg.DataDir, "flush", cfg.Flush, "auto_create", cfg.AutoCreate)
	return n, nil
}

// add registers c, wrapping it with the test-only hang when asked.
func (n *Node) add(o Options, c lifecycle.Func) {
	if o.HangOnStop != "" && o.HangOnStop == c.ComponentName {
		inner := c.StopFn
		c.StopFn = func(ctx context.Context) error {
			n.log.Warn("test hook: component hangs in Stop until the deadline", "component", c.ComponentName)
			<-ctx.Done()
			<-make(chan struct{}) // and beyond: only the owner's deadline ends this
			return inner(ctx)
		}
	}
	n.owner.Add(c)
}

func (n *Node) startGRPC(ctx context.Context) error {
	cert, err := grpcserver.LoadOrCreateCertificate(n.cfg.DataDir, n.cfg.TLSCert, n.cfg.TLSKey)
	if err != nil {
		return err
	}
	n.grpc = grpcserver.New(grpcserver.Options{
		TLS:                   &tls.Config{Certificates: []tls.Certificate{cert}},
		MaxConnectionAge:      n.cfg.GRPCMaxConnectionAge,
		MaxConnectionAgeGrace: n.cfg.GRPCMaxConnectionAgeGrace,
		MaxConnectionIdle:     n.cfg.GRPCMaxConnectionIdle,
		Logger:                n.log,
		MeterProvider:         n.tel.Meters,
		TracerProvider:        n.tel.Tracers,
		Gate:                  n.gate,
	})
	lis, err := listen(ctx, "grpc-addr", n.cfg.GRPCAddr)
	if err != nil {
		return err
	}
	n.addrs.GRPC = lis.Addr().String()
	return n.group.Go("grpc-serve", func(context.Context) {
		if err := n.grpc.Serve(lis); err != nil {
			n.log.Error("gRPC listener failed", "err", err)
		}
	})
}

func (n *Node) startHTTP(ctx context.Context) error {
	n.http = rest.New(rest.Options{Ready: n.Ready, Metrics: n.tel.MetricsHandler(), Logger: n.log})
	lis, err := listen(ctx, "http-addr", n.cfg.HTTPAddr)
	if err != nil {
		return err
	}
	n.addrs.HTTP = lis.Addr().String()
	return n.group.Go("http-serve", func(context.Context) {
		if err := n.http.Serve(lis); err != nil {
			n.log.Error("HTTP listener failed", "err", err)
		}
	})
}

func listen(ctx context.Context, name, addr string) (net.Listener, error) {
	var lc net.ListenConfig
	lis, err := lc.Listen(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", name, addr, err)
	}
	return lis, nil
}

// Addrs returns the bound listener addresses.
func (n *Node) Addrs() Addrs { return n.addrs }

// Ready is nil when the store is open and every listener is up and the node
// is not draining.
func (n *Node) Ready() error {
	switch {
	case n.stopping.Load():
		return errors.New("draining for shutdown")
	case !n.ready.Load():
		return errors.New("starting")
	}
	return nil
}

// Shutdown drains and stops every component against ctx's deadline (fix it
// once, at the first signal) and returns the report.
func (n *Node) Shutdown(ctx context.Context) lifecycle.Report {
	n.stopping.Store(true)
	n.gate.StartDrain()
	if n.grpc != nil {
		n.grpc.SetServing(false)
	}
	return n.owner.Shutdown(ctx)
}
