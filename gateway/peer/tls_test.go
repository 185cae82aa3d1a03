package peer

import (
	"context"
	"crypto/x509"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/mqgate/mqgate/internal/testutil"
)

func loadTLS(t testing.TB, f testutil.CertFiles) *TLS {
	t.Helper()
	tl, err := LoadTLS(TLSFiles{Cert: f.Cert, Key: f.Key, CA: f.CA}, quiet)
	if err != nil {
		t.Fatal(err)
	}
	return tl
}

// tlsGroup's members each have a certificate of ca; member id gets
// other(id) instead when other is set and returns one.
func tlsGroup(t *testing.T, ca *testutil.CA, token string, other func(id uint64) (*TLS, bool)) *testCluster {
	t.Helper()
	return newTestClusterWith(t, 3, testCluster{persist: 8, timeout: 3 * time.Second, token: token, tls: func(id uint64) *TLS {
		if other != nil {
			if tl, ok := other(id); ok {
				return tl
			}
		}
		return loadTLS(t, ca.Issue(t, "member"))
	}})
}

// With mutual TLS (and a peer token), the members elect a leader and
// replicate; the dial functions work with a certificate of the CA, a
// client-only one included, and fail in plaintext, with a certificate
// of another CA, or without the token.
func TestTLSGroupReplicates(t *testing.T) {
	ca := testutil.NewCA(t, "peer CA")
	c := tlsGroup(t, ca, "s3cret", nil)
	l := c.leader()
	appendN(t, l, 0, 30)
	c.converged(l.rep.Applied())
	f := c.follower(l)

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	client := WithToken(WithTLS(ctx, loadTLS(t, ca.Issue(t, "operator", x509.ExtKeyUsageClientAuth))), "s3cret")
	st, err := DialStatus(client, c.addrs[f.id], c.id)
	if err != nil || st.Leader != l.id || st.Applied < l.rep.Applied() {
		t.Fatalf("status over TLS: %+v, %v", st, err)
	}
	if err := DialTransfer(client, c.addrs[f.id], c.id, f.id); err != nil {
		t.Fatalf("transfer over TLS: %v", err)
	}
	if c.leader() != f {
		t.Fatalf("leader %d after the transfer to %d", c.leader().id, f.id)
	}
	appendN(t, f, 30, 40)
	if _, err := f.node.MemberInfo(ctx, l.id); err != nil {
		t.Fatalf("member info over TLS: %v", err)
	}

	refused := []struct {
		name string
		ctx  context.Context
		code codes.Code
	}{
		{"plaintext", WithToken(ctx, "s3cret"), codes.Unavailable},
		{"another CA", WithToken(WithTLS(ctx, loadTLS(t, testutil.NewCA(t, "other CA").Issue(t, "member"))), "s3cret"), codes.Unavailable},
		{"no token", WithTLS(ctx, loadTLS(t, ca.Issue(t, "member"))), codes.Unauthenticated},
	}
	for _, r := range refused {
		cctx, cancel := context.WithTimeout(r.ctx, 5*time.Second)
		_, err := DialStatus(cctx, c.addrs[l.id], c.id)
		cancel()
		if status.Code(err) != r.code {
			t.Errorf("status %s: %v, want %v", r.name, err, r.code)
		}
	}
	// A caller whose own certificate the members accept refuses a
	// member whose certificate is not of its CA.
	other := testutil.NewCA(t, "other CA")
	strict := loadTLS(t, ca.Issue(t, "operator"))
	strict.roots = x509.NewCertPool()
	strict.roots.AddCert(other.Cert)
	strict.checked = time.Now().Add(time.Hour) // no reload from the files
	cctx, cancel := context.WithTimeout(WithToken(WithTLS(ctx, strict), "s3cret"), 5*time.Second)
	defer cancel()
	if _, err := DialStatus(cctx, c.addrs[l.id], c.id); status.Code(err) != codes.Unavailable || !strings.Contains(err.Error(), "peer CA") {
		t.Errorf("status of a member whose certificate is of another CA: %v", err)
	}
}

// A member whose certificate is of another CA, or that runs without TLS,
// is refused by the others: the two members of the CA elect a leader and
// replicate without it, and it neither learns the leader nor applies.
func TestTLSMemberRefused(t *testing.T) {
	for _, tc := range []struct {
		name string
		tls  func(t *testing.T, ca *testutil.CA) *TLS
		// logged: member 1 logs that it refused the certificate.
		logged bool
	}{
		// Its CA bundle holds the group's CA and its own: it accepts the
		// others, they refuse it.
		{"certificate of another CA", func(t *testing.T, ca *testutil.CA) *TLS {
			other := testutil.NewCA(t, "other CA")
			f := other.Issue(t, "member")
			f.CA = filepath.Join(t.TempDir(), "both.pem")
			writeConcat(t, f.CA, ca.File, other.File)
			return loadTLS(t, f)
		}, true},
		{"plaintext", func(*testing.T, *testutil.CA) *TLS { return nil }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ca := testutil.NewCA(t, "peer CA")
			var log testutil.SyncBuffer
			c := tlsGroup(t, ca, "", func(id uint64) (*TLS, bool) {
				switch id {
				case 1:
					f := ca.Issue(t, "member")
					tl, err := LoadTLS(TLSFiles{Cert: f.Cert, Key: f.Key, CA: f.CA}, slog.New(slog.NewTextHandler(&log, nil)))
					if err != nil {
						t.Fatal(err)
					}
					return tl, true
				case 3:
					return tc.tls(t, ca), true
				}
				return nil, false
			})
			var l *member
			c.waitFor("member 1 or 2 to lead, the other to follow it", func() bool {
				for _, m := range []*member{c.members[1], c.members[2]} {
					if m.node.IsLeader() && c.members[1].node.Leader() == m.id && c.members[2].node.Leader() == m.id {
						l = m
						return true
					}
				}
				return false
			})
			appendN(t, l, 0, 20)
			c.waitFor("member 1 and 2 to apply", func() bool {
				return c.members[1].rep.Applied() == l.rep.Applied() && c.members[2].rep.Applied() == l.rep.Applied()
			})
			time.Sleep(500 * time.Millisecond) // 25 ticks: heartbeats would have reached it
			if m := c.members[3]; m.node.Leader() != 0 || m.rep.Applied() >= l.rep.Applied() {
				t.Fatalf("the refused member knows leader %d and applied %d (the leader %d)", m.node.Leader(), m.rep.Applied(), l.rep.Applied())
			}
			if got := strings.Contains(log.String(), "peer TLS: refused the certificate"); got != tc.logged {
				t.Fatalf("member 1 logged a refusal: %v, want %v:\n%s", got, tc.logged, log.String())
			}
		})
	}
}

// writeConcat writes the files' contents one after the other to path.
func writeConcat(t testing.TB, path string, files ...string) {
	t.Helper()
	var all []byte
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, b...)
	}
	if err := os.WriteFile(path, all, 0o600); err != nil {
		t.Fatal(err)
	}
}

// LoadTLS refuses files that cannot work, naming the problem.
func TestLoadTLSErrors(t *testing.T) {
	ca := testutil.NewCA(t, "peer CA")
	good := ca.Issue(t, "member")
	other := ca.Issue(t, "other")
	notPEM := filepath.Join(t.TempDir(), "not.pem")
	if err := os.WriteFile(notPEM, []byte("not a certificate\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		files TLSFiles
		want  string
	}{
		{"missing CA", TLSFiles{Cert: good.Cert, Key: good.Key}, "must all be set"},
		{"no such file", TLSFiles{Cert: good.Cert + ".gone", Key: good.Key, CA: good.CA}, "no such file"},
		{"key of another certificate", TLSFiles{Cert: good.Cert, Key: other.Key, CA: good.CA}, "private key does not match"},
		{"CA bundle without a certificate", TLSFiles{Cert: good.Cert, Key: good.Key, CA: notPEM}, "holds no PEM certificate"},
		{"certificate of another CA", TLSFiles{Cert: good.Cert, Key: good.Key, CA: testutil.NewCA(t, "other CA").File}, "unknown authority"},
		{"expired certificate", func() TLSFiles {
			f := ca.IssueValid(t, "old", time.Now().Add(-48*time.Hour), time.Now().Add(-time.Hour))
			return TLSFiles{Cert: f.Cert, Key: f.Key, CA: f.CA}
		}(), "expired"},
		{"server-only certificate", func() TLSFiles {
			f := ca.Issue(t, "server", x509.ExtKeyUsageServerAuth)
			return TLSFiles{Cert: f.Cert, Key: f.Key, CA: f.CA}
		}(), "client certificate"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := LoadTLS(tc.files, quiet)
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.HasPrefix(err.Error(), "peer TLS: ") {
				t.Fatalf("LoadTLS: %v, want an error naming %q", err, tc.want)
			}
		})
	}
	// A client-only certificate dials (mqgate cluster), but cannot serve.
	tl := loadTLS(t, ca.Issue(t, "operator", x509.ExtKeyUsageClientAuth))
	if err := tl.CheckServer(); err == nil || !strings.Contains(err.Error(), "server certificate") {
		t.Fatalf("CheckServer of a client-only certificate: %v", err)
	}
	if err := loadTLS(t, good).CheckServer(); err != nil {
		t.Fatal(err)
	}
}

// Changed files are read again: a new certificate and CA are used, and
// files that do not load leave the previous ones in use.
func TestTLSReload(t *testing.T) {
	ca := testutil.NewCA(t, "peer CA")
	files := ca.Issue(t, "first")
	tl := loadTLS(t, files)
	if err := tl.CheckServer(); err != nil {
		t.Fatal(err)
	}
	recheck := func() (*x509.Certificate, *x509.CertPool) {
		tl.mu.Lock()
		tl.checked = time.Time{}
		tl.mu.Unlock()
		c, p := tl.current()
		return c.Leaf, p
	}
	copyFile := func(from, to string) {
		b, err := os.ReadFile(from)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(to, b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if c, _ := recheck(); c.Subject.CommonName != "first" {
		t.Fatalf("certificate %q, want first", c.Subject.CommonName)
	}

	// A renewed certificate of the same CA.
	second := ca.Issue(t, "second")
	copyFile(second.Cert, files.Cert)
	copyFile(second.Key, files.Key)
	if c, _ := recheck(); c.Subject.CommonName != "second" {
		t.Fatalf("after renewal: certificate %q, want second", c.Subject.CommonName)
	}

	// The certificate replaced, its key not yet: the previous pair stays.
	third := ca.Issue(t, "third")
	copyFile(third.Cert, files.Cert)
	if c, _ := recheck(); c.Subject.CommonName != "second" {
		t.Fatalf("certificate without its key: %q in use, want second", c.Subject.CommonName)
	}
	copyFile(third.Key, files.Key)
	if c, _ := recheck(); c.Subject.CommonName != "third" {
		t.Fatalf("with its key: certificate %q, want third", c.Subject.CommonName)
	}

	// A new CA: a bundle of both while the members move over, then the
	// new CA's certificate; peers of the new CA are accepted.
	next := testutil.NewCA(t, "next CA")
	writeConcat(t, files.CA, ca.File, next.File)
	moved := next.Issue(t, "moved")
	copyFile(moved.Cert, files.Cert)
	copyFile(moved.Key, files.Key)
	c, roots := recheck()
	if c.Subject.CommonName != "moved" {
		t.Fatalf("after the CA change: certificate %q, want moved", c.Subject.CommonName)
	}
	if err := verifyCerts([]*x509.Certificate{c}, roots, x509.ExtKeyUsageClientAuth); err != nil {
		t.Fatalf("a certificate of the new CA: %v", err)
	}
	// A client-only certificate cannot replace a member's: refused at
	// reload (CheckServer was called).
	srv := next.Issue(t, "client-only", x509.ExtKeyUsageClientAuth)
	copyFile(srv.Cert, files.Cert)
	copyFile(srv.Key, files.Key)
	if c, _ := recheck(); c.Subject.CommonName != "moved" {
		t.Fatalf("a client-only certificate replaced a member's: %q", c.Subject.CommonName)
	}
}
