package grpcserver

import (
	"bufio"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"

	"google.golang.org/grpc/credentials"
)

// tlsRecordHandshake is the first byte of every TLS ClientHello record. An
// HTTP/2 prior-knowledge preface starts with 'P' instead.
const tlsRecordHandshake = 0x16

// dualCreds serves TLS and plaintext gRPC on one port: the first byte of a
// connection decides. The Go and Java clients default to TLS (without
// verifying), Node and Python to plaintext. The deadline of the whole
// handshake (the first byte, TLS, then the HTTP/2 preface and first frame
// that grpc-go reads) is the one grpc-go sets on the connection
// (grpc.ConnectionTimeout: Options.HandshakeTimeout); the credentials
// leave it in place.
type dualCreds struct {
	tls *tls.Config
}

// NewDualCredentials returns server transport credentials that accept TLS
// (with ALPN h2, which grpc-go clients require) and plaintext h2c.
func NewDualCredentials(cfg *tls.Config) credentials.TransportCredentials {
	c := cfg.Clone()
	c.NextProtos = []string{"h2"}
	if c.MinVersion == 0 {
		c.MinVersion = tls.VersionTLS12
	}
	return &dualCreds{tls: c}
}

func (d *dualCreds) ServerHandshake(raw net.Conn) (net.Conn, credentials.AuthInfo, error) {
	br := bufio.NewReaderSize(raw, 16)
	first, err := br.Peek(1)
	if err != nil {
		return nil, nil, fmt.Errorf("reading the first byte: %w", err)
	}
	conn := &peekedConn{Conn: raw, r: br}
	if first[0] != tlsRecordHandshake {
		return conn, plaintextInfo{credentials.CommonAuthInfo{SecurityLevel: credentials.NoSecurity}}, nil
	}
	tc := tls.Server(conn, d.tls)
	if err := tc.HandshakeContext(context.Background()); err != nil {
		return nil, nil, fmt.Errorf("tls handshake: %w", err)
	}
	st := tc.ConnectionState()
	if st.NegotiatedProtocol != "" && st.NegotiatedProtocol != "h2" {
		return nil, nil, fmt.Errorf("tls: client negotiated %q, gRPC needs h2", st.NegotiatedProtocol)
	}
	return tc, credentials.TLSInfo{State: st, CommonAuthInfo: credentials.CommonAuthInfo{SecurityLevel: credentials.PrivacyAndIntegrity}}, nil
}

func (d *dualCreds) ClientHandshake(context.Context, string, net.Conn) (net.Conn, credentials.AuthInfo, error) {
	return nil, nil, errors.New("dual credentials are server-side only")
}

func (d *dualCreds) Info() credentials.ProtocolInfo {
	return credentials.ProtocolInfo{SecurityProtocol: "tls+plaintext"}
}

func (d *dualCreds) Clone() credentials.TransportCredentials {
	return &dualCreds{tls: d.tls.Clone()}
}

func (d *dualCreds) OverrideServerName(string) error { return nil }

type plaintextInfo struct{ credentials.CommonAuthInfo }

func (plaintextInfo) AuthType() string { return "insecure" }

// peekedConn reads through the buffered reader that holds the sniffed byte.
type peekedConn struct {
	net.Conn
	r *bufio.Reader
}

func (c *peekedConn) Read(p []byte) (int, error) { return c.r.Read(p) }

// LoadOrCreateCertificate loads certFile/keyFile when given; otherwise it
// uses dir/tls/{cert,key}.pem, creating a self-signed ECDSA certificate
// there on first use (clients do not verify it; see the README for real
// certificates).
func LoadOrCreateCertificate(dir, certFile, keyFile string) (tls.Certificate, error) {
	if certFile != "" {
		c, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			return tls.Certificate{}, fmt.Errorf("tls-cert/tls-key: %w", err)
		}
		return c, nil
	}
	tdir := filepath.Join(dir, "tls")
	certFile, keyFile = filepath.Join(tdir, "cert.pem"), filepath.Join(tdir, "key.pem")
	if c, err := tls.LoadX509KeyPair(certFile, keyFile); err == nil {
		return c, nil
	} else if !errors.Is(err, os.ErrNotExist) {
		return tls.Certificate{}, fmt.Errorf("self-signed certificate in %s: %w", tdir, err)
	}
	if err := os.MkdirAll(tdir, 0o700); err != nil {
		return tls.Certificate{}, fmt.Errorf("creating %s: %w", tdir, err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		return tls.Certificate{}, err
	}
	host, _ := os.Hostname()
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: "mqgate self-signed", Organization: []string{"mqgate"}},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().AddDate(10, 0, 0),
		KeyUsage:              x509.KeyUsageDigitalSignature,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		DNSNames:              []string{"localhost", host},
		IPAddresses:           []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return tls.Certificate{}, err
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return tls.Certificate{}, err
	}
	if err := writeFileAtomic(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}), 0o600); err != nil {
		return tls.Certificate{}, err
	}
	if err := writeFileAtomic(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644); err != nil {
		return tls.Certificate{}, err
	}
	return tls.LoadX509KeyPair(certFile, keyFile)
}

func writeFileAtomic(path string, data []byte, perm os.FileMode) error {
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, perm)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
