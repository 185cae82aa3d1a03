package node

import (
	"crypto/x509"
	"fmt"
	"strings"
	"testing"

	"github.com/mqgate/mqgate/internal/testutil"
)

// Cluster settings are checked together, and a member needs peer
// authentication: a token of 16 characters or more, or mutual TLS.
func TestValidateCluster(t *testing.T) {
	base := Defaults()
	base.ClusterID, base.NodeID, base.PeerToken = "c", 1, "0123456789abcdef"
	cases := []struct {
		name  string
		edit  func(*Config)
		wants string // "" = valid
	}{
		{"loopback peers", func(c *Config) { c.Peers = "1=127.0.0.1:7001,2=127.0.0.1:7002,3=127.0.0.1:7003" }, ""},
		{"loopback peers without a token", func(c *Config) {
			c.Peers, c.PeerToken = "1=127.0.0.1:7001,2=127.0.0.1:7002,3=127.0.0.1:7003", ""
		}, "MQGATE_PEER_TOKEN"},
		{"a short token", func(c *Config) { c.Peers, c.PeerToken = "1=127.0.0.1:7001", "s3cret" }, "at least 16"},
		{"non-loopback with a token", func(c *Config) { c.Peers = "1=10.0.0.1:7001,2=10.0.0.2:7001,3=10.0.0.3:7001" }, ""},
		{"node id not a member", func(c *Config) { c.Peers, c.NodeID = "2=127.0.0.1:7002,3=127.0.0.1:7003", 1 }, "node-id"},
		{"peers without cluster id", func(c *Config) { c.ClusterID, c.Peers = "", "1=127.0.0.1:7001" }, "cluster-id"},
		{"tiny raft log", func(c *Config) { c.Peers, c.RaftLogKeep = "1=127.0.0.1:7001", 4 }, "raft-log-keep"},
		{"three data groups", func(c *Config) { c.Peers, c.DataGroups = "1=127.0.0.1:7001", 3 }, ""},
		{"data groups left out", func(c *Config) { c.Peers, c.DataGroups = "1=127.0.0.1:7001", 0 }, ""},
		{"negative data groups", func(c *Config) { c.Peers, c.DataGroups = "1=127.0.0.1:7001", -1 }, "data-groups"},
		{"too many data groups", func(c *Config) { c.Peers, c.DataGroups = "1=127.0.0.1:7001", maxDataGroups+1 }, "data-groups"},
		{"data groups and join", func(c *Config) { c.Peers, c.DataGroups, c.Join = "1=127.0.0.1:7001", 3, true }, ""},
		{"data groups of a single node", func(c *Config) { c.ClusterID, c.NodeID, c.DataGroups = "", 0, 3 }, "data-groups"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := base
			tc.edit(&c)
			err := c.Validate()
			switch {
			case tc.wants == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.wants != "" && (err == nil || !strings.Contains(err.Error(), tc.wants)):
				t.Fatalf("error %v, want one naming %s", err, tc.wants)
			}
		})
	}
}

// The peer TLS settings go together, only in cluster mode, and their
// files must load; mutual TLS alone lets the peer address be a
// non-loopback one.
func TestValidatePeerTLS(t *testing.T) {
	ca := testutil.NewCA(t, "peer CA")
	good := ca.Issue(t, "member")
	clientOnly := ca.Issue(t, "operator", x509.ExtKeyUsageClientAuth)
	base := Defaults()
	base.ClusterID, base.NodeID = "c", 1
	base.Peers = "1=10.0.0.1:7001,2=10.0.0.2:7001,3=10.0.0.3:7001"
	cases := []struct {
		name  string
		edit  func(*Config)
		wants string // "" = valid
	}{
		{"mutual TLS", func(c *Config) { c.PeerTLSCert, c.PeerTLSKey, c.PeerTLSCA = good.Cert, good.Key, good.CA }, ""},
		{"mutual TLS and a token", func(c *Config) {
			c.PeerTLSCert, c.PeerTLSKey, c.PeerTLSCA, c.PeerToken = good.Cert, good.Key, good.CA, "0123456789abcdef"
		}, ""},
		{"no CA", func(c *Config) { c.PeerTLSCert, c.PeerTLSKey = good.Cert, good.Key }, "peer-tls-ca missing"},
		{"only the CA", func(c *Config) { c.PeerTLSCA = good.CA }, "peer-tls-cert and peer-tls-key missing"},
		{"unreadable key", func(c *Config) { c.PeerTLSCert, c.PeerTLSKey, c.PeerTLSCA = good.Cert, good.Key+".gone", good.CA }, "no such file"},
		{"key of another certificate", func(c *Config) {
			c.PeerTLSCert, c.PeerTLSKey, c.PeerTLSCA = good.Cert, clientOnly.Key, good.CA
		}, "private key does not match"},
		{"certificate of another CA", func(c *Config) {
			c.PeerTLSCert, c.PeerTLSKey, c.PeerTLSCA = good.Cert, good.Key, testutil.NewCA(t, "other").File
		}, "unknown authority"},
		{"client-only certificate", func(c *Config) {
			c.PeerTLSCert, c.PeerTLSKey, c.PeerTLSCA = clientOnly.Cert, clientOnly.Key, clientOnly.CA
		}, "server certificate"},
		{"without cluster mode", func(c *Config) {
			c.ClusterID, c.NodeID, c.Peers = "", 0, ""
			c.PeerTLSCert, c.PeerTLSKey, c.PeerTLSCA = good.Cert, good.Key, good.CA
		}, "only in cluster mode"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := base
			tc.edit(&c)
			err := c.Validate()
			switch {
			case tc.wants == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.wants != "" && (err == nil || !strings.Contains(err.Error(), tc.wants) || !strings.Contains(err.Error(), "peer-tls-")):
				t.Fatalf("error %v, want one naming %s and the setting", err, tc.wants)
			}
		})
	}
	// Without TLS or a token, the refusal names both ways out.
	c := base
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "--peer-tls-cert") || !strings.Contains(err.Error(), "MQGATE_PEER_TOKEN") ||
		!strings.Contains(err.Error(), "mqgate cluster init-certs") {
		t.Fatalf("peers without a token or TLS: %v", err)
	}
}

// ForHost finds the member a host name is in --peers, as a StatefulSet's
// pods need, and puts its id in the peer TLS paths.
func TestForHost(t *testing.T) {
	base := Defaults()
	base.ClusterID, base.NodeIDFromHostname = "demo", true
	base.Peers = "1=mqgate-0.mqgate-peers.ns.svc.cluster.local:7000,2=mqgate-1.mqgate-peers.ns.svc.cluster.local:7000,3=mqgate-2.mqgate-peers.ns.svc.cluster.local:7000"
	base.PeerTLSCert, base.PeerTLSKey, base.PeerTLSCA = "/tls/member-{node-id}.pem", "/tls/member-{node-id}-key.pem", "/tls/ca.pem"
	for i, host := range []string{"mqgate-0", "mqgate-1", "mqgate-2"} {
		c, err := base.ForHost(host)
		if err != nil {
			t.Fatal(err)
		}
		if want := i + 1; c.NodeID != want || c.PeerTLSCert != fmt.Sprintf("/tls/member-%d.pem", want) ||
			c.PeerTLSKey != fmt.Sprintf("/tls/member-%d-key.pem", want) || c.PeerTLSCA != "/tls/ca.pem" {
			t.Fatalf("%s: node %d, cert %q, key %q, ca %q", host, c.NodeID, c.PeerTLSCert, c.PeerTLSKey, c.PeerTLSCA)
		}
	}
	// The whole host name matches too; a prefix of a label does not.
	c := base
	c.Peers = "1=a:7000,2=b:7000,3=bb:7000"
	if got, err := c.ForHost("b"); err != nil || got.NodeID != 2 {
		t.Fatalf("host b: %d %v", got.NodeID, err)
	}
	for _, tc := range []struct {
		host, peers string
		nodeID      int
		clustered   bool
		want        string
	}{
		{"mqgate-9", base.Peers, 0, true, "no member"},
		{"mqgate", base.Peers, 0, true, "no member"},
		{"x", "1=x.a:7000,2=x.b:7000", 0, true, "members [1 2]"},
		{"mqgate-1", base.Peers, 3, true, "but --node-id is 3"},
		{"mqgate-1", base.Peers, 0, false, "only in cluster mode"},
	} {
		c := base
		c.Peers, c.NodeID = tc.peers, tc.nodeID
		if !tc.clustered {
			c.ClusterID = ""
		}
		if _, err := c.ForHost(tc.host); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want an error saying %q", tc, err, tc.want)
		}
	}
	// Without the setting: {node-id} from --node-id, and nothing else moves.
	c = Defaults()
	c.NodeID, c.PeerTLSCert = 2, "/tls/m{node-id}.pem"
	if got, err := c.ForHost("anything"); err != nil || got.NodeID != 2 || got.PeerTLSCert != "/tls/m2.pem" {
		t.Fatalf("placeholder with --node-id: %+v %v", got, err)
	}
	c.NodeID = 0
	if _, err := c.ForHost("anything"); err == nil || !strings.Contains(err.Error(), "{node-id}") {
		t.Fatalf("placeholder without a node id: %v", err)
	}
}
