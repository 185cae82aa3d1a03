package peer

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// IssueCerts writes a CA and a certificate per member and for an
// operator; the members form a group over mutual TLS with them, the
// operator's certificate reaches them but cannot serve, and a second run
// issues only what is missing, from the same CA.
func TestIssueCerts(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "certs")
	wrote, err := IssueCerts(dir, []uint64{1, 2, 3}, 24*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if len(wrote) != 2+2*4 {
		t.Fatalf("wrote %d files: %v", len(wrote), wrote)
	}
	for _, f := range wrote {
		fi, err := os.Stat(f)
		if err != nil {
			t.Fatal(err)
		}
		if strings.HasSuffix(f, "-key.pem") && fi.Mode().Perm() != 0o600 {
			t.Fatalf("%s has mode %v, want 0600", f, fi.Mode().Perm())
		}
	}
	load := func(id uint64) *TLS {
		tl, err := LoadTLS(CertFiles(dir, id), quiet)
		if err != nil {
			t.Fatalf("load %d: %v", id, err)
		}
		return tl
	}
	if err := load(0).CheckServer(); err == nil {
		t.Fatal("the operator's certificate may serve a peer listener")
	}
	c := newTestClusterWith(t, 3, testCluster{persist: 8, timeout: 3 * time.Second, tls: load})
	l := c.leader()
	appendN(t, l, 0, 10)
	ctx := WithTLS(testCtx(t), load(0))
	if st, err := DialStatus(ctx, c.addrs[c.follower(l).id], c.id); err != nil || st.Leader != l.id {
		t.Fatalf("status with the operator's certificate: %+v, %v", st, err)
	}

	again, err := IssueCerts(dir, []uint64{1, 2, 3, 4}, 24*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	f4 := CertFiles(dir, 4)
	if !slices.Equal(again, []string{f4.Cert, f4.Key}) {
		t.Fatalf("the second run wrote %v, want member 4's files only", again)
	}
	if err := load(4).CheckServer(); err != nil {
		t.Fatalf("member 4's certificate: %v", err)
	}
	if err := os.Remove(filepath.Join(dir, "ca-key.pem")); err != nil {
		t.Fatal(err)
	}
	if _, err := IssueCerts(dir, []uint64{5}, time.Hour); err == nil {
		t.Fatal("issued from a CA without its key")
	}
}
