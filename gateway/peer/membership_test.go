package peer

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"maps"
	"net"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/mqgate/mqgate/broker/raftstore"
	"github.com/mqgate/mqgate/internal/testutil"
)

// join starts member id as a new member (Config.Join) on a fresh
// directory and returns it.
func (c *testCluster) join(id uint64) *member {
	c.t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		c.t.Fatal(err)
	}
	c.addrs[id] = l.Addr().String()
	if c.joining == nil {
		c.joining = map[uint64]bool{}
	}
	c.joining[id] = true
	return c.start(id, filepath.Join(c.t.TempDir(), fmt.Sprint(id)), l)
}

// stopped waits until member id's raft loop stops and returns its error.
func (c *testCluster) stopped(id uint64) error {
	c.t.Helper()
	m := c.members[id]
	c.waitFor(fmt.Sprintf("member %d to stop", id), func() bool {
		select {
		case <-m.node.Done():
			return true
		default:
			return false
		}
	})
	return m.node.Err()
}

// drop stops member id (its raft loop stopped already) and leaves it out
// of the group's checks.
func (c *testCluster) drop(id uint64) {
	c.t.Helper()
	m := c.members[id]
	_ = m.node.Stop()
	if err := m.rep.Close(context.Background()); err != nil {
		c.t.Fatal(err)
	}
	delete(c.members, id)
}

func voters(m *member) []uint64 { return m.node.Members().Voters }

// A member added while appends run joins as a learner, catches up (from
// the raft log, or from a copy of a store when the leader compacted the
// entries it lacks), is promoted, and ends byte-identical. Removing the
// leader hands the leadership over first; the removed member stops, and
// its id cannot be added again.
func TestAddRemoveMemberUnderLoad(t *testing.T) {
	for _, tc := range []struct {
		name string
		o    testCluster
		copy bool
	}{
		{"from the log", testCluster{timeout: 3 * time.Second}, false},
		{"from a copy", testCluster{persist: 8, snap: 64, timeout: 3 * time.Second}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newTestClusterWith(t, 3, tc.o)
			l := c.leader()
			appendN(t, l, 0, 300)

			m4 := c.join(4)
			added := make(chan error, 1)
			go func() {
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				defer cancel()
				added <- l.node.AddMember(ctx, 4, c.addrs[4])
			}()
			if tc.copy {
				if err := c.stopped(4); !errors.Is(err, raftstore.ErrCopyStaged) {
					t.Fatalf("the new member stopped with %v, want ErrCopyStaged", err)
				}
				_ = m4.node.Stop()
				if err := m4.rep.Close(context.Background()); err != nil {
					t.Fatal(err)
				}
				m4 = c.restart(4)
			}
			appendN(t, l, 300, 400) // while the member is added
			if err := <-added; err != nil {
				t.Fatal(err)
			}
			if got := voters(l); !slices.Equal(got, []uint64{1, 2, 3, 4}) {
				t.Fatalf("voters %v after adding 4", got)
			}
			c.waitFor("member 4 to apply the promotion", func() bool { return slices.Equal(voters(m4), []uint64{1, 2, 3, 4}) })

			// Remove the leader: it hands over, and the request goes to
			// the new one.
			old := l.id
			err := l.node.RemoveMember(context.Background(), old)
			var nl *raftstore.NotLeaderError
			if !errors.As(err, &nl) || nl.LeaderID == old {
				t.Fatalf("removing the leader itself: %v, want NotLeaderError naming another member", err)
			}
			l = c.leader()
			if err := l.node.RemoveMember(context.Background(), old); err != nil {
				t.Fatal(err)
			}
			if err := c.stopped(old); !errors.Is(err, ErrRemoved) {
				t.Fatalf("the removed member stopped with %v, want ErrRemoved", err)
			}
			c.drop(old)
			appendN(t, l, 400, 450)
			if err := l.node.AddMember(context.Background(), old, c.addrs[old]); err == nil {
				t.Fatal("a removed id was added again")
			}
			if err := l.node.RemoveMember(context.Background(), old); err != nil {
				t.Fatalf("removing a member no longer in the group: %v", err)
			}

			c.converged(l.rep.Applied())
			want := contents(t, l)
			if len(want) != 450 {
				t.Fatalf("the leader holds %d messages", len(want))
			}
			for _, m := range c.members {
				if got := contents(t, m); !maps.Equal(got, want) {
					t.Fatalf("member %d holds %d messages, the leader %d", m.id, len(got), len(want))
				}
			}
			c.stopAll()
			c.sameStores()
		})
	}
}

// A member removed while it was down learns it when it comes back: the
// others refuse its messages, and it stops with ErrRemoved; started
// again, it refuses to start.
func TestRemovedWhileDownStops(t *testing.T) {
	c := newTestCluster(t, 3, 0)
	l := c.leader()
	appendN(t, l, 0, 20)
	var gone uint64
	for id := range c.members {
		if id != l.id {
			gone = id
			break
		}
	}
	c.kill(gone)
	if err := l.node.RemoveMember(context.Background(), gone); err != nil {
		t.Fatal(err)
	}
	m := c.restart(gone)
	if err := c.stopped(gone); !errors.Is(err, ErrRemoved) {
		t.Fatalf("the removed member stopped with %v, want ErrRemoved", err)
	}
	_ = m.node.Stop()
	if err := m.rep.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	m.node = nil
	l2, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l2.Close()
	rep, err := raftstore.OpenReplica(filepath.Join(m.dir, "replica"), raftstore.Options{Store: storeOpts(), StoreHost: "cluster:8081", Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer rep.Close(context.Background())
	if _, err := Start(Config{ClusterID: c.id, NodeID: gone, Peers: maps.Clone(c.addrs), WALDir: filepath.Join(m.dir, "wal"), Listener: l2, Token: testToken, Logger: quiet}, rep); !errors.Is(err, ErrRemoved) {
		t.Fatalf("starting a removed member: %v, want ErrRemoved", err)
	}
	delete(c.members, gone)
	appendN(t, l, 20, 40)
}

// The membership calls over the peer port go to the leader, wherever
// they are sent.
func TestDialMembership(t *testing.T) {
	testDialMembership(t, testCluster{timeout: 3 * time.Second}, func(ctx context.Context) context.Context { return WithToken(ctx, testToken) })
}

// The same with mutual TLS: the caller's certificate, a client-only one
// of the members' CA, and the new member's.
func TestDialMembershipTLS(t *testing.T) {
	ca := testutil.NewCA(t, "peer CA")
	caller := loadTLS(t, ca.Issue(t, "operator", x509.ExtKeyUsageClientAuth))
	testDialMembership(t, testCluster{timeout: 3 * time.Second, tls: func(uint64) *TLS { return loadTLS(t, ca.Issue(t, "member")) }},
		func(ctx context.Context) context.Context { return WithTLS(ctx, caller) })
}

func testDialMembership(t *testing.T, o testCluster, client func(context.Context) context.Context) {
	c := newTestClusterWith(t, 3, o)
	l := c.leader()
	var f *member
	for _, m := range c.members {
		if m != l {
			f = m
			break
		}
	}
	ctx, cancel := context.WithTimeout(client(context.Background()), 20*time.Second)
	defer cancel()
	c.join(4)
	if err := DialAddMember(ctx, c.addrs[f.id], c.id, 4, c.addrs[4]); err != nil {
		t.Fatal(err)
	}
	st, err := DialStatus(ctx, c.addrs[f.id], c.id)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(st.Voters, []uint64{1, 2, 3, 4}) || st.Peers[4] != c.addrs[4] {
		t.Fatalf("status after adding 4: voters %v, peers %v", st.Voters, st.Peers)
	}
	if err := DialRemoveMember(ctx, c.addrs[f.id], c.id, l.id); err != nil {
		t.Fatal(err)
	}
	if err := c.stopped(l.id); !errors.Is(err, ErrRemoved) {
		t.Fatalf("the removed leader stopped with %v, want ErrRemoved", err)
	}
	c.drop(l.id)
	if err := DialAddMember(ctx, c.addrs[f.id], c.id, l.id, c.addrs[l.id]); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("adding a removed id: %v, want InvalidArgument", err)
	}
	if err := DialAddMember(ctx, c.addrs[f.id], c.id, 9, "no-port"); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("adding with a bad address: %v, want InvalidArgument", err)
	}
	appendN(t, c.leader(), 0, 20)
}

// A member restarted with --peers that predate an added member still
// dials it: the address came with the change that added it and was kept
// in the members file.
func TestAddedMemberAddressKept(t *testing.T) {
	// The raft logs are compacted past the change that added member 4.
	c := newTestClusterWith(t, 3, testCluster{persist: 8, snap: 64, timeout: 3 * time.Second})
	l := c.leader()
	appendN(t, l, 0, 20)
	c.join(4)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := l.node.AddMember(ctx, 4, c.addrs[4]); err != nil {
		t.Fatal(err)
	}
	appendN(t, l, 20, 300)
	var x, y uint64
	for _, id := range []uint64{1, 2, 3} {
		switch {
		case id == l.id:
		case x == 0:
			x = id
		default:
			y = id
		}
	}
	c.converged(l.rep.Applied())
	c.kill(x)
	all := c.addrs
	c.addrs = maps.Clone(all)
	delete(c.addrs, 4)
	c.restart(x)
	c.addrs = all
	c.converged(l.rep.Applied()) // x has applied the changes again
	c.kill(y)
	// Four voters, one down: x leading needs the old leader and member 4.
	if err := l.node.TransferLeadership(ctx, x); err != nil {
		t.Fatal(err)
	}
	appendN(t, c.members[x], 300, 320)
	if got := c.members[x].node.book.addr(4); got != all[4] {
		t.Fatalf("member %d dials member 4 at %q, want %q", x, got, all[4])
	}
}

func FuzzMembersBook(f *testing.F) {
	f.Add([]byte(`{"index":7,"addrs":{"1":"127.0.0.1:7001","4":"10.0.0.4:7001"},"removed":[2]}`))
	f.Add([]byte(`{}`))
	f.Add([]byte(`{"index":1,"addrs":null}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		b := &book{path: filepath.Join(t.TempDir(), "members.json"), addrs: map[uint64]string{}, removed: map[uint64]bool{}}
		if err := b.restore(data); err != nil {
			return
		}
		f1 := b.file()
		reopened, err := openBook(b.path, nil)
		if f1.Index == 0 {
			return // nothing newer than an empty book: not saved
		}
		if err != nil {
			t.Fatalf("a saved book does not open: %v", err)
		}
		if f2 := reopened.file(); f2.Index != f1.Index || !maps.Equal(f2.Addrs, f1.Addrs) || !slices.Equal(f2.Removed, f1.Removed) {
			t.Fatalf("book %+v saved and read back as %+v", f1, f2)
		}
		for id := range f1.Addrs {
			if b.isRemoved(id) {
				continue
			}
			if b.dialable(0)[id] != f1.Addrs[id] {
				t.Fatalf("member %d not dialled at its address", id)
			}
		}
	})
}

// Before the configuration changes, the leader asks the member at the
// given address who it is: a wrong address, a member of another cluster
// and a member that already follows a leader are refused, and the group
// is left as it was.
func TestAddMemberProbesFirst(t *testing.T) {
	c := newTestCluster(t, 3, 0)
	l := c.leader()
	c.join(4)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	refused := func(t *testing.T, id uint64, addr, want string) {
		t.Helper()
		err := l.node.AddMember(ctx, id, addr)
		var bad *badRequestError
		if !errors.As(err, &bad) || !strings.Contains(err.Error(), want) {
			t.Fatalf("adding %d at %s: %v, want a bad request saying %q", id, addr, err, want)
		}
	}
	refused(t, 5, c.addrs[4], "is member 4")
	nobody, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gone := nobody.Addr().String()
	nobody.Close()
	refused(t, 5, gone, "no member answers")
	// A group of its own under the same cluster id: its member 4 follows
	// its own leader.
	other := newTestCluster(t, 4, 0)
	other.leader()
	other.waitFor("member 4 of the other group to know its leader", func() bool { return other.members[4].node.lead.Load() != 0 })
	refused(t, 4, other.addrs[4], "already follows leader")
	t.Run("another cluster", func(t *testing.T) {
		another := newTestCluster(t, 1, 0)
		refused(t, 4, another.addrs[1], "belongs to another cluster")
	})
	if m := l.node.Members(); len(m.Learners) != 0 || !slices.Equal(m.Voters, []uint64{1, 2, 3}) {
		t.Fatalf("members after refused adds: %+v", m)
	}
	if err := l.node.AddMember(ctx, 4, c.addrs[4]); err != nil {
		t.Fatal(err)
	}
}

// A transfer raft abandons (its member was down for longer than an
// election timeout) is asked again until that member leads.
func TestTransferLeadershipAsksAgain(t *testing.T) {
	c := newTestCluster(t, 3, 0)
	l := c.leader()
	var to uint64
	for id := range c.members {
		if id != l.id {
			to = id
			break
		}
	}
	c.kill(to)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- l.node.TransferLeadership(ctx, to) }()
	c.waitFor("the transfer to be asked again", func() bool { return l.node.transferAsks.Load() > 0 })
	c.restart(to)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	c.waitFor(fmt.Sprintf("member %d to lead", to), func() bool { return c.members[to].node.IsLeader() })
}

// A joining member whose --peers names one running member only, not the
// leader, learns the others from it: it takes the leader's messages and
// answers them, and is added.
func TestJoinerLearnsTheMembers(t *testing.T) {
	c := newTestCluster(t, 3, 8)
	l := c.leader()
	appendN(t, l, 0, 10)
	var other uint64
	for id := range c.members {
		if id != l.id {
			other = id
			break
		}
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	all := maps.Clone(c.addrs)
	all[4] = lis.Addr().String()
	c.addrs = map[uint64]string{other: all[other], 4: all[4]}
	c.joining = map[uint64]bool{4: true}
	c.start(4, filepath.Join(t.TempDir(), "4"), lis)
	c.addrs = all
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := l.node.AddMember(ctx, 4, all[4]); err != nil {
		t.Fatalf("adding member 4, which knew member %d only, at leader %d: %v", other, l.id, err)
	}
	if got := c.members[4].node.book.addr(l.id); got != all[l.id] {
		t.Fatalf("member 4 dials the leader %d at %q, want %q", l.id, got, all[l.id])
	}
	appendN(t, l, 10, 20)
	c.converged(l.rep.Applied())
}
