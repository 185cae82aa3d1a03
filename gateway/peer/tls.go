package peer

import (
	"cmp"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
)

// Mutual TLS between members. Every member has a certificate signed by a
// CA that exists for the group (TLSFiles.CA); it presents it as the
// server certificate of its peer listener and as the client certificate
// when it dials another member, and both sides require the other's
// certificate to chain to that CA: the peer listener refuses a caller
// without one (or with one signed by another CA) during the handshake,
// before any call reaches it.
//
// Host names are not checked: a member accepts any certificate the CA
// signed, whatever address it dialled. Members are dialled at the
// addresses in --peers, which may be IP addresses, or a sidecar proxy on
// loopback that forwards to the real member (each member may name other
// addresses for the same member), so no name in a certificate could
// match every way a member is reached. The CA is what admits a member:
// it must sign peer certificates of this group only (not a public or
// company-wide CA). The cluster id, and the peer token when set, are
// still checked on every call.
//
// The files are read again when they change (checked at most once per
// reloadCheck, at a handshake): a renewed certificate or CA bundle is
// used for the connections made after it, without a restart. Files that
// do not load (say the certificate was replaced and its key not yet)
// leave the previous ones in use, and are logged once.

// reloadCheck is how often, at most, the files' modification times are
// looked at.
const reloadCheck = time.Second

// TLSFiles names the PEM files of a member's peer TLS: Cert (this
// member's certificate, optionally followed by intermediates) and Key
// (its private key), and CA (the certificates that sign every member's).
type TLSFiles struct {
	Cert, Key, CA string
}

// TLS is a member's peer TLS, loaded by LoadTLS; Config.TLS and WithTLS
// take it. It is safe for concurrent use.
type TLS struct {
	files  TLSFiles
	logger *slog.Logger

	mu      sync.Mutex
	server  bool // the certificate must also serve (CheckServer)
	cert    *tls.Certificate
	roots   *x509.CertPool
	stamps  [3]fileStamp // of the files loaded
	failed  [3]fileStamp // of the files that last failed to load
	checked time.Time
	// Refused certificates are logged at most once per refusalLogEvery,
	// with the count since the last line.
	refusedAt time.Time
	refusedN  int
	// callers counts the callers of the peer listener refused.
	callers atomic.Uint64
}

const refusalLogEvery = 10 * time.Second

type fileStamp struct {
	mod  time.Time
	size int64
}

// LoadTLS reads files: the certificate must match the key, be valid now,
// chain to a certificate of the CA bundle and allow client
// authentication (a member's must allow server authentication too,
// CheckServer). logger receives the reloads (default
// slog.Default()).
func LoadTLS(files TLSFiles, logger *slog.Logger) (*TLS, error) {
	if files.Cert == "" || files.Key == "" || files.CA == "" {
		return nil, errors.New("peer TLS: the certificate, key and CA files must all be set")
	}
	t := &TLS{files: files, logger: cmp.Or(logger, slog.Default())}
	cert, roots, err := t.load(false)
	if err != nil {
		return nil, err
	}
	st, err := t.stat()
	if err != nil {
		return nil, err
	}
	t.cert, t.roots, t.stamps, t.checked = cert, roots, st, time.Now()
	return t, nil
}

// stat reads the files' modification times and sizes.
func (t *TLS) stat() ([3]fileStamp, error) {
	var st [3]fileStamp
	for i, name := range []string{t.files.Cert, t.files.Key, t.files.CA} {
		fi, err := os.Stat(name)
		if err != nil {
			return st, fmt.Errorf("peer TLS: %w", err)
		}
		st[i] = fileStamp{mod: fi.ModTime(), size: fi.Size()}
	}
	return st, nil
}

// load reads and checks the three files.
func (t *TLS) load(server bool) (*tls.Certificate, *x509.CertPool, error) {
	cert, err := tls.LoadX509KeyPair(t.files.Cert, t.files.Key)
	if err != nil {
		return nil, nil, fmt.Errorf("peer TLS: certificate %s and key %s: %w", t.files.Cert, t.files.Key, err)
	}
	pem, err := os.ReadFile(t.files.CA)
	if err != nil {
		return nil, nil, fmt.Errorf("peer TLS: CA bundle: %w", err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(pem) {
		return nil, nil, fmt.Errorf("peer TLS: CA bundle %s holds no PEM certificate", t.files.CA)
	}
	usages := []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	if server {
		usages = append(usages, x509.ExtKeyUsageServerAuth)
	}
	for _, u := range usages {
		if err := verifyChain(cert.Certificate, roots, u); err != nil {
			return nil, nil, fmt.Errorf("peer TLS: certificate %s: %w", t.files.Cert, err)
		}
	}
	return &cert, roots, nil
}

// CheckServer checks that the certificate may also serve a peer listener
// (a member's is both a server and a client certificate), and makes
// every reload check it too. Start calls it.
func (t *TLS) CheckServer() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if err := verifyChain(t.cert.Certificate, t.roots, x509.ExtKeyUsageServerAuth); err != nil {
		return fmt.Errorf("peer TLS: certificate %s: %w", t.files.Cert, err)
	}
	t.server = true
	return nil
}

// current is the certificate and CA pool to use now, read again from the
// files when they changed.
func (t *TLS) current() (*tls.Certificate, *x509.CertPool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if time.Since(t.checked) >= reloadCheck {
		t.checked = time.Now()
		t.reloadLocked()
	}
	return t.cert, t.roots
}

func (t *TLS) reloadLocked() {
	st, err := t.stat()
	if err != nil {
		// A file being replaced (removed, then written): tried again at
		// the next check.
		return
	}
	if st == t.stamps || st == t.failed {
		return
	}
	cert, roots, err := t.load(t.server)
	if err != nil {
		t.failed = st
		t.logger.Warn("peer TLS: the changed files do not load: the previous certificate and CA stay in use", "err", err)
		return
	}
	t.cert, t.roots, t.stamps = cert, roots, st
	t.logger.Info("peer TLS: certificate and CA reloaded", "cert", t.files.Cert, "ca", t.files.CA,
		"not_after", cert.Leaf.NotAfter)
}

// verifyChain checks that chain[0] (DER), with the intermediates after
// it, chains to roots, is valid now and allows usage.
func verifyChain(chain [][]byte, roots *x509.CertPool, usage x509.ExtKeyUsage) error {
	if len(chain) == 0 {
		return errors.New("no certificate")
	}
	certs := make([]*x509.Certificate, len(chain))
	for i, der := range chain {
		c, err := x509.ParseCertificate(der)
		if err != nil {
			return err
		}
		certs[i] = c
	}
	return verifyCerts(certs, roots, usage)
}

func verifyCerts(certs []*x509.Certificate, roots *x509.CertPool, usage x509.ExtKeyUsage) error {
	inter := x509.NewCertPool()
	for _, c := range certs[1:] {
		inter.AddCert(c)
	}
	if _, err := certs[0].Verify(x509.VerifyOptions{Roots: roots, Intermediates: inter, KeyUsages: []x509.ExtKeyUsage{usage}}); err != nil {
		what := "client"
		if usage == x509.ExtKeyUsageServerAuth {
			what = "server"
		}
		return fmt.Errorf("%q as a %s certificate of the peer CA: %w", certs[0].Subject.String(), what, err)
	}
	return nil
}

// verifyPeer checks the other side's certificate against the CA (not
// its host name: see the comment at the top of this file).
func (t *TLS) verifyPeer(usage x509.ExtKeyUsage) func(tls.ConnectionState) error {
	return func(cs tls.ConnectionState) error {
		if len(cs.PeerCertificates) == 0 {
			return errors.New("peer TLS: the other side presented no certificate")
		}
		_, roots := t.current()
		if err := verifyCerts(cs.PeerCertificates, roots, usage); err != nil {
			err = fmt.Errorf("peer TLS: refused %w", err)
			t.refused(usage, err)
			return err
		}
		return nil
	}
}

// refused logs a refused certificate (rate-limited): the other side of
// the connection sees only a failed or closed connection.
func (t *TLS) refused(usage x509.ExtKeyUsage, err error) {
	if usage == x509.ExtKeyUsageClientAuth {
		t.callers.Add(1)
	}
	t.mu.Lock()
	t.refusedN++
	if time.Since(t.refusedAt) < refusalLogEvery {
		t.mu.Unlock()
		return
	}
	n := t.refusedN
	t.refusedN, t.refusedAt = 0, time.Now()
	t.mu.Unlock()
	msg := "peer TLS: refused the certificate of a caller of the peer address"
	if usage == x509.ExtKeyUsageServerAuth {
		msg = "peer TLS: refused the certificate of a member dialled"
	}
	t.logger.Warn(msg, "err", err, "refused_since_last_line", n)
}

// callersRefused is how many callers of the peer listener presented no
// certificate of the CA (0 for a nil TLS).
func (t *TLS) callersRefused() uint64 {
	if t == nil {
		return 0
	}
	return t.callers.Load()
}

func (t *TLS) getCertificate() (*tls.Certificate, error) {
	cert, _ := t.current()
	return cert, nil
}

// serverConfig is the peer listener's: it requires a client certificate
// of the CA.
func (t *TLS) serverConfig() *tls.Config {
	return &tls.Config{
		MinVersion:       tls.VersionTLS13,
		ClientAuth:       tls.RequireAnyClientCert, // verified against the current CA by VerifyConnection
		GetCertificate:   func(*tls.ClientHelloInfo) (*tls.Certificate, error) { return t.getCertificate() },
		VerifyConnection: t.verifyPeer(x509.ExtKeyUsageClientAuth),
	}
}

// clientConfig is the one a member or `mqgate cluster` dials with.
func (t *TLS) clientConfig() *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS13,
		// The chain is verified against the CA by VerifyConnection; the
		// host name is not (see the comment at the top of this file).
		InsecureSkipVerify:   true,
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return t.getCertificate() },
		VerifyConnection:     t.verifyPeer(x509.ExtKeyUsageServerAuth),
	}
}

// serverOption is the peer listener's transport security (none without
// TLS).
func (t *TLS) serverOption() []grpc.ServerOption {
	if t == nil {
		return nil
	}
	return []grpc.ServerOption{grpc.Creds(credentials.NewTLS(t.serverConfig()))}
}

// dialOption is the transport security of a connection to a member.
func (t *TLS) dialOption() grpc.DialOption {
	if t == nil {
		return grpc.WithTransportCredentials(insecure.NewCredentials())
	}
	return grpc.WithTransportCredentials(credentials.NewTLS(t.clientConfig()))
}

type tlsKey struct{}

// WithTLS makes the peer calls made with ctx (DialStatus, DialTransfer,
// DialAddMember, DialRemoveMember) dial with t; without it they dial in
// plaintext.
func WithTLS(ctx context.Context, t *TLS) context.Context {
	return context.WithValue(ctx, tlsKey{}, t)
}

func tlsFrom(ctx context.Context) *TLS {
	t, _ := ctx.Value(tlsKey{}).(*TLS)
	return t
}
