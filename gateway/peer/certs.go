package peer

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"math/big"
	"os"
	"path/filepath"
	"time"
)

// Issuing peer certificates (`mqgate cluster init-certs`). A directory
// holds a CA made for one group and a certificate per member, named so
// that each member's flags are obvious:
//
//	ca.pem, ca-key.pem               the group's CA (keep ca-key.pem off the members)
//	member-N.pem, member-N-key.pem   member N's certificate (server and client) and key
//	operator.pem, operator-key.pem   a client-only certificate for `mqgate cluster` commands
//
// Run again on the same directory, it keeps what is there and issues
// what is missing with the CA it finds (a member added later gets its
// certificate from the same CA). Keys are ECDSA P-256, written 0600.

// CertFiles are the files IssueCerts names for member id (0: the
// operator's).
func CertFiles(dir string, id uint64) TLSFiles {
	name := "operator"
	if id != 0 {
		name = fmt.Sprintf("member-%d", id)
	}
	return TLSFiles{Cert: filepath.Join(dir, name+".pem"), Key: filepath.Join(dir, name+"-key.pem"), CA: filepath.Join(dir, "ca.pem")}
}

// caKeyFile is the CA's private key in an IssueCerts directory.
func caKeyFile(dir string) string { return filepath.Join(dir, "ca-key.pem") }

// IssueCerts writes into dir (created if needed) a CA, unless one is
// there, and a certificate for each member id and for an operator,
// unless one is there; member and operator certificates are valid for
// validity from now, the CA for ten years. It returns the files it
// wrote.
func IssueCerts(dir string, ids []uint64, validity time.Duration) ([]string, error) {
	if validity <= 0 {
		return nil, errors.New("peer certificates: the validity must be positive")
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("peer certificates: %w", err)
	}
	var wrote []string
	ca, caKey, made, err := loadOrMakeCA(dir)
	if err != nil {
		return nil, err
	}
	if made {
		wrote = append(wrote, CertFiles(dir, 0).CA, caKeyFile(dir))
	}
	for _, id := range append([]uint64{0}, ids...) {
		f := CertFiles(dir, id)
		if exists(f.Cert) || exists(f.Key) {
			continue
		}
		if err := issueLeaf(f, id, ca, caKey, validity); err != nil {
			return wrote, err
		}
		wrote = append(wrote, f.Cert, f.Key)
	}
	return wrote, nil
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return !errors.Is(err, fs.ErrNotExist)
}

// loadOrMakeCA reads dir's CA, or makes one when neither of its files is
// there.
func loadOrMakeCA(dir string) (*x509.Certificate, crypto.Signer, bool, error) {
	certFile, keyFile := CertFiles(dir, 0).CA, caKeyFile(dir)
	switch have, haveKey := exists(certFile), exists(keyFile); {
	case have && haveKey:
		cert, key, err := readCA(certFile, keyFile)
		return cert, key, false, err
	case have || haveKey:
		return nil, nil, false, fmt.Errorf("peer certificates: %s has one of ca.pem and ca-key.pem without the other", dir)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, false, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: serial(), Subject: pkix.Name{CommonName: "mqgate peer CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.AddDate(10, 0, 0),
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageCRLSign, IsCA: true, BasicConstraintsValid: true, MaxPathLenZero: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, nil, false, fmt.Errorf("peer certificates: CA: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, nil, false, err
	}
	if err := writePEM(keyFile, key, nil); err != nil {
		return nil, nil, false, err
	}
	if err := writePEM(certFile, nil, der); err != nil {
		return nil, nil, false, err
	}
	return cert, key, true, nil
}

func readCA(certFile, keyFile string) (*x509.Certificate, crypto.Signer, error) {
	cb, err := os.ReadFile(certFile)
	if err != nil {
		return nil, nil, fmt.Errorf("peer certificates: %w", err)
	}
	kb, err := os.ReadFile(keyFile)
	if err != nil {
		return nil, nil, fmt.Errorf("peer certificates: %w", err)
	}
	cblock, _ := pem.Decode(cb)
	kblock, _ := pem.Decode(kb)
	if cblock == nil || kblock == nil {
		return nil, nil, fmt.Errorf("peer certificates: %s or %s is not PEM", certFile, keyFile)
	}
	cert, err := x509.ParseCertificate(cblock.Bytes)
	if err != nil {
		return nil, nil, fmt.Errorf("peer certificates: %s: %w", certFile, err)
	}
	k, err := x509.ParsePKCS8PrivateKey(kblock.Bytes)
	if err != nil {
		return nil, nil, fmt.Errorf("peer certificates: %s: %w", keyFile, err)
	}
	key, ok := k.(crypto.Signer)
	if !ok || !cert.IsCA {
		return nil, nil, fmt.Errorf("peer certificates: %s and %s are not a CA and its key", certFile, keyFile)
	}
	return cert, key, nil
}

// issueLeaf writes the certificate and key of member id (0: the
// operator, client only), signed by ca.
func issueLeaf(f TLSFiles, id uint64, ca *x509.Certificate, caKey crypto.Signer, validity time.Duration) error {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: serial(), Subject: pkix.Name{CommonName: "mqgate operator"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(validity),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	if id != 0 {
		tmpl.Subject.CommonName = fmt.Sprintf("mqgate member %d", id)
		tmpl.ExtKeyUsage = append(tmpl.ExtKeyUsage, x509.ExtKeyUsageServerAuth)
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return fmt.Errorf("peer certificates: %s: %w", tmpl.Subject.CommonName, err)
	}
	if err := writePEM(f.Key, key, nil); err != nil {
		return err
	}
	return writePEM(f.Cert, nil, der)
}

// writePEM writes a private key (0600) or a certificate (0644) as PEM,
// refusing to replace a file.
func writePEM(path string, key *ecdsa.PrivateKey, certDER []byte) error {
	block, mode := &pem.Block{Type: "CERTIFICATE", Bytes: certDER}, os.FileMode(0o644)
	if key != nil {
		der, err := x509.MarshalPKCS8PrivateKey(key)
		if err != nil {
			return err
		}
		block, mode = &pem.Block{Type: "PRIVATE KEY", Bytes: der}, 0o600
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if err != nil {
		return fmt.Errorf("peer certificates: %w", err)
	}
	if err := pem.Encode(f, block); err != nil {
		f.Close()
		return fmt.Errorf("peer certificates: %s: %w", path, err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("peer certificates: %s: %w", path, err)
	}
	return f.Close()
}

func serial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		panic(err) // crypto/rand does not fail
	}
	return n
}
