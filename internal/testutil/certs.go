package testutil

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// CA is a certificate authority made for a test.
type CA struct {
	Cert *x509.Certificate
	Key  *ecdsa.PrivateKey
	// File is the CA certificate as a PEM file.
	File string
	dir  string
}

// CertFiles are a PEM certificate and key written by CA.Issue, with the
// issuing CA's file.
type CertFiles struct {
	Cert, Key, CA string
}

var (
	serialMu sync.Mutex
	serial   = big.NewInt(time.Now().UnixNano())
)

func nextSerial() *big.Int {
	serialMu.Lock()
	defer serialMu.Unlock()
	serial.Add(serial, big.NewInt(1))
	return new(big.Int).Set(serial)
}

// NewCA makes a CA named name and writes its certificate to a file in a
// temporary directory.
func NewCA(t testing.TB, name string) *CA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: nextSerial(), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	ca := &CA{Cert: cert, Key: key, File: filepath.Join(dir, "ca.pem"), dir: dir}
	writePEM(t, ca.File, "CERTIFICATE", der)
	return ca
}

// Issue signs a certificate for name (its common name; no host names)
// with the extended key usages given (none: server and client
// authentication), and writes it and its key to files.
func (ca *CA) Issue(t testing.TB, name string, usages ...x509.ExtKeyUsage) CertFiles {
	t.Helper()
	return ca.IssueValid(t, name, time.Now().Add(-time.Hour), time.Now().Add(24*time.Hour), usages...)
}

// IssueValid is Issue with the certificate valid from notBefore to
// notAfter.
func (ca *CA) IssueValid(t testing.TB, name string, notBefore, notAfter time.Time, usages ...x509.ExtKeyUsage) CertFiles {
	t.Helper()
	if len(usages) == 0 {
		usages = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: nextSerial(), Subject: pkix.Name{CommonName: name},
		NotBefore: notBefore, NotAfter: notAfter,
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: usages,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, &key.PublicKey, ca.Key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	f := CertFiles{Cert: filepath.Join(ca.dir, nextSerial().String()+"-"+name+".pem"), CA: ca.File}
	f.Key = f.Cert[:len(f.Cert)-len(".pem")] + "-key.pem"
	writePEM(t, f.Cert, "CERTIFICATE", der)
	writePEM(t, f.Key, "PRIVATE KEY", kder)
	return f
}

func writePEM(t testing.TB, path, typ string, der []byte) {
	t.Helper()
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
}
