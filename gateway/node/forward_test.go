package node

import (
	"context"
	"crypto/tls"
	"net"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/mqgate/mqgate/gateway/grpcserver"
	"github.com/mqgate/mqgate/gateway/peer"
)

// TestForwarderChecksTheAnnouncedCertificate: a forwarded request goes
// only to a listener presenting the certificate its member announced; a
// listener with another certificate at the address (a process that took
// the port, or a man in the middle) gets nothing, and the connection is
// made again when the announced certificate changes.
func TestForwarderChecksTheAnnouncedCertificate(t *testing.T) {
	cert, err := grpcserver.LoadOrCreateCertificate(t.TempDir(), "", "")
	if err != nil {
		t.Fatal(err)
	}
	other, err := grpcserver.LoadOrCreateCertificate(t.TempDir(), "", "")
	if err != nil {
		t.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer(grpc.Creds(credentials.NewTLS(&tls.Config{Certificates: []tls.Certificate{cert}})))
	healthpb.RegisterHealthServer(srv, health.NewServer())
	go func() { _ = srv.Serve(lis) }()
	defer srv.Stop()

	f := &forwarder{}
	defer f.close()
	check := func(pin string) error {
		c, err := f.conn(lis.Addr().String(), pin)
		if err != nil {
			return err
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_, err = healthpb.NewHealthClient(c).Check(ctx, &healthpb.HealthCheckRequest{})
		return err
	}
	if err := check(peer.CertFingerprint(other.Certificate[0])); err == nil || !strings.Contains(err.Error(), "does not present the certificate") {
		t.Fatalf("forwarding to a listener with another certificate than announced: %v", err)
	}
	if err := check(peer.CertFingerprint(cert.Certificate[0])); err != nil {
		t.Fatalf("forwarding to the announced certificate: %v", err)
	}
	if err := check(""); err != nil {
		t.Fatalf("forwarding to a member that announces no certificate: %v", err)
	}
}
