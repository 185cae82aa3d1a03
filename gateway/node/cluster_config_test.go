package node

import (
	"strings"
	"testing"
)

// Cluster settings are checked together, and a peer address other than
// loopback needs the peer token (or --insecure-listen-all).
func TestValidateCluster(t *testing.T) {
	base := Defaults()
	base.ClusterID, base.NodeID = "c", 1
	cases := []struct {
		name  string
		edit  func(*Config)
		wants string // "" = valid
	}{
		{"loopback peers", func(c *Config) { c.Peers = "1=127.0.0.1:7001,2=127.0.0.1:7002,3=127.0.0.1:7003" }, ""},
		{"non-loopback without a token", func(c *Config) { c.Peers = "1=10.0.0.1:7001,2=10.0.0.2:7001,3=10.0.0.3:7001" }, "--peer-token"},
		{"non-loopback with a token", func(c *Config) {
			c.Peers, c.PeerToken = "1=10.0.0.1:7001,2=10.0.0.2:7001,3=10.0.0.3:7001", "t"
		}, ""},
		{"node id not a member", func(c *Config) { c.Peers, c.NodeID = "2=127.0.0.1:7002,3=127.0.0.1:7003", 1 }, "node-id"},
		{"peers without cluster id", func(c *Config) { c.ClusterID, c.Peers = "", "1=127.0.0.1:7001" }, "cluster-id"},
		{"tiny raft log", func(c *Config) { c.Peers, c.RaftLogKeep = "1=127.0.0.1:7001", 4 }, "raft-log-keep"},
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
