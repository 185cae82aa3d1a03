package testutil

import (
	"net"
	"strconv"
	"testing"
)

// A port StableAddr handed out is locked: another holder of the lock
// file (another test process) does not get it.
func TestStableAddrLocksItsPort(t *testing.T) {
	addr := StableAddr(t)
	_, p, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	port, _ := strconv.Atoi(p)
	if lockPort(port) {
		t.Fatalf("port %d locked again while this process holds it", port)
	}
	l, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("the port handed out is not free: %v", err)
	}
	l.Close()
}
