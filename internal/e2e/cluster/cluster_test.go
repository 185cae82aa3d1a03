package cluster

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	rmq "github.com/apache/rocketmq-clients/golang/v5"

	"github.com/mqgate/mqgate/internal/e2e/e2eutil"
	"github.com/mqgate/mqgate/internal/testutil"
	"github.com/mqgate/mqgate/internal/testutil/faultproxy"
)

func TestMain(m *testing.M) { e2eutil.Main(m) }

// member is one mqgate process of the group; its addresses stay the same
// across restarts.
type member struct {
	id                         int
	dir                        string
	grpc, http, remoting, peer string
	// peers is this member's --peers when it differs from the group's
	// (its links to the others go through proxies, or it joined later).
	peers string
	proc  *testutil.Proc
	// joined: a member added to the running group (started with --join).
	joined bool
	// tls is the member's peer certificate (withTLS; empty: none).
	tls testutil.CertFiles
	// env adds KEY=VALUE pairs to the member's environment when it
	// (re)starts; args adds flags to the group's.
	env, args []string
}

// group is a three-member cluster on loopback.
type group struct {
	t       *testing.T
	id      string
	members []*member
	peers   string
	args    []string
	token   string // --peer-token among args (one of the test's own when it gave none)
	// links are the proxies of a group made by newProxiedGroup: the one
	// member from dials to reach member to's peer listener, by [from, to].
	links map[[2]int]*faultproxy.Proxy
	// cliTLS is the certificate the cluster commands present (withTLS;
	// empty: none).
	cliTLS testutil.CertFiles
	// bin is the mqgate binary the members and commands run
	// (testutil.BinaryWithTags); empty: testutil.Binary.
	bin string
	// logDir: when the test fails, each member's logs go to
	// member-<id>.log there instead of the test's output.
	logDir string
}

func newGroup(t *testing.T, args ...string) *group {
	t.Helper()
	return newGroupOf(t, 3, args...)
}

// newGroupOf is newGroup with the given number of members.
func newGroupOf(t *testing.T, members int, args ...string) *group {
	t.Helper()
	g := planGroupOf(t, members, args)
	g.startNew()
	return g
}

// newProxiedGroup is newGroup with every member's raft traffic to each
// other member going through a fault proxy of its own (six links, one
// per direction): member i's --peers names its own real peer address,
// and proxy [i, j] for every other member j. Client listeners are not
// proxied: a follower relays clients to the leader's listeners directly.
func newProxiedGroup(t *testing.T, args ...string) *group {
	t.Helper()
	return newProxiedGroupOf(t, 3, args...)
}

// newProxiedGroupOf is newProxiedGroup with the given number of members.
func newProxiedGroupOf(t *testing.T, members int, args ...string) *group {
	t.Helper()
	g := planGroupOf(t, members, args)
	g.proxy()
	g.startNew()
	return g
}

// proxy puts the fault proxies of newProxiedGroup between the members
// planned (not started yet).
func (g *group) proxy() {
	t := g.t
	t.Helper()
	g.links = map[[2]int]*faultproxy.Proxy{}
	for _, m := range g.members {
		var peers []string
		for _, o := range g.members {
			addr := o.peer
			if o != m {
				// The proxies outlive member restarts: any free port does.
				p, err := faultproxy.New("127.0.0.1:0", o.peer)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { p.Close() })
				g.links[[2]int{m.id, o.id}] = p
				addr = p.Addr()
			}
			peers = append(peers, fmt.Sprintf("%d=%s", o.id, addr))
		}
		m.peers = strings.Join(peers, ",")
	}
}

// withTLS gives every member planned (not started yet) a peer
// certificate of a CA made for the group by `mqgate cluster init-certs`,
// and the cluster commands its operator certificate: the group runs with
// mutual TLS between members.
func (g *group) withTLS() {
	dir := g.t.TempDir()
	var ids []string
	for _, m := range g.members {
		ids = append(ids, strconv.Itoa(m.id))
	}
	if out, err := e2eutil.CLIResultArgs(g.t, "cluster", "init-certs", dir, "--node-ids", strings.Join(ids, ",")); err != nil {
		g.t.Fatalf("init-certs: %v\n%s", err, out)
	}
	files := func(name string) testutil.CertFiles {
		return testutil.CertFiles{Cert: filepath.Join(dir, name+".pem"), Key: filepath.Join(dir, name+"-key.pem"), CA: filepath.Join(dir, "ca.pem")}
	}
	for _, m := range g.members {
		m.tls = files(fmt.Sprintf("member-%d", m.id))
	}
	g.cliTLS = files("operator")
}

// tlsFlags are the peer TLS flags of f (none for empty f).
func tlsFlags(f testutil.CertFiles) []string {
	if f == (testutil.CertFiles{}) {
		return nil
	}
	return []string{"--peer-tls-cert", f.Cert, "--peer-tls-key", f.Key, "--peer-tls-ca", f.CA}
}

// isolate cuts every raft link to and from m (newProxiedGroup only).
func (g *group) isolate(m *member) {
	g.t.Helper()
	for _, o := range g.others(m) {
		g.link(m, o).Block()
		g.link(o, m).Block()
	}
}

// heal restores every raft link to and from m.
func (g *group) heal(m *member) {
	g.t.Helper()
	for _, o := range g.others(m) {
		g.link(m, o).Unblock()
		g.link(o, m).Unblock()
	}
}

// link is the proxy from dials to reach to.
func (g *group) link(from, to *member) *faultproxy.Proxy {
	g.t.Helper()
	p := g.links[[2]int{from.id, to.id}]
	if p == nil {
		g.t.Fatalf("no proxied link from member %d to member %d: the group was not made by newProxiedGroup", from.id, to.id)
	}
	return p
}

// planGroup picks the members' addresses and data dirs; startNew starts
// them.
func planGroup(t *testing.T, args []string) *group {
	t.Helper()
	return planGroupOf(t, 3, args)
}

// planGroupOf is planGroup with the given number of members.
func planGroupOf(t *testing.T, members int, args []string) *group {
	t.Helper()
	g := &group{t: t, id: e2eutil.Uniq("cl"), args: args}
	for i, a := range args {
		if a == "--peer-token" && i+1 < len(args) {
			g.token = args[i+1]
		}
	}
	if g.token == "" {
		// Members must authenticate each other.
		g.token = e2eutil.Uniq("peer-token-of-the-group")
		g.args = append(slices.Clone(args), "--peer-token", g.token)
	}
	var peers []string
	for i := 1; i <= members; i++ {
		m := &member{id: i, dir: t.TempDir(), grpc: testutil.StableAddr(t), http: testutil.StableAddr(t),
			remoting: testutil.StableAddr(t), peer: testutil.StableAddr(t)}
		g.members = append(g.members, m)
		peers = append(peers, fmt.Sprintf("%d=%s", i, m.peer))
	}
	g.peers = strings.Join(peers, ",")
	return g
}

// startNew starts every member at once.
func (g *group) startNew() {
	g.t.Helper()
	var wg sync.WaitGroup
	for _, m := range g.members {
		wg.Add(1)
		go func() { defer wg.Done(); g.start(m) }()
	}
	wg.Wait()
	g.started()
}

// start runs m (again) on its data dir and addresses. The ready line
// comes once the member's listeners serve, leader known or not.
func (g *group) start(m *member) {
	peers := g.peers
	if m.peers != "" {
		peers = m.peers
	}
	args := append([]string{"--grpc-addr", m.grpc, "--http-addr", m.http, "--remoting-addr", m.remoting,
		"--cluster-id", g.id, "--node-id", strconv.Itoa(m.id), "--peers", peers, "--auto-create"}, g.args...)
	if m.joined {
		args = append(args, "--join")
	}
	args = append(args, m.args...)
	args = append(args, tlsFlags(m.tls)...)
	o := testutil.StartOptions{DataDir: m.dir, Args: args, Env: m.env, Binary: g.bin}
	if g.logDir != "" {
		o.LogFile = filepath.Join(g.logDir, fmt.Sprintf("member-%d.log", m.id))
	}
	m.proc = testutil.Start(g.t, o)
}

// started ends the test when a member started from another goroutine
// did not come up (t.Fatal there ended only that goroutine).
func (g *group) started() {
	g.t.Helper()
	for _, m := range g.members {
		if m.proc == nil {
			g.t.FailNow()
		}
	}
}

// cli runs `mqgate <args>` with the group's peer token and client
// certificate, if any.
func (g *group) cli(args ...string) (string, error) {
	if g.token != "" {
		args = append(args, "--peer-token", g.token)
	}
	args = append(args, tlsFlags(g.cliTLS)...)
	return g.run(args...)
}

// run runs `mqgate <args>` as given, with the group's binary, and
// returns its combined output and exit error.
func (g *group) run(args ...string) (string, error) {
	if g.bin == "" {
		return e2eutil.CLIResultArgs(g.t, args...)
	}
	out, err := exec.Command(g.bin, args...).CombinedOutput()
	return string(out), err
}

// endpoint is every member's gRPC address: what a client is configured
// with (the Go client dials them in order and moves on when one fails).
func (g *group) endpoint() string {
	var a []string
	for _, m := range g.members {
		a = append(a, m.grpc)
	}
	return strings.Join(a, ";")
}

// leader waits until the members agree on a leader serving, and returns it.
func (g *group) leader(timeout time.Duration) *member {
	g.t.Helper()
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		for _, m := range g.members {
			if m.proc == nil || !alive(m.proc) {
				continue
			}
			out, err := g.cli("cluster", "status", "--peer", m.peer, "--cluster-id", g.id, "--json")
			if err != nil {
				continue
			}
			if l := g.byID(leaderOf(out)); l != nil && l.proc != nil && alive(l.proc) && l.proc.HasLine("this member leads: serving") {
				return l
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	g.t.Fatalf("no leader serving within %v", timeout)
	return nil
}

// byID is the member with id (nil: none).
func (g *group) byID(id int) *member {
	for _, m := range g.members {
		if m.id == id {
			return m
		}
	}
	return nil
}

func alive(p *testutil.Proc) bool {
	select {
	case <-p.Done():
		return false
	default:
		return true
	}
}

// leaderOf reads the leader id from `mqgate cluster status --json`.
func leaderOf(out string) int {
	var st struct {
		Leader int `json:"leader"`
	}
	if err := json.Unmarshal([]byte(out), &st); err != nil {
		return 0
	}
	return st.Leader
}

// stopAll stops every member gracefully.
func (g *group) stopAll() {
	for _, m := range g.members {
		if m.proc != nil && alive(m.proc) {
			m.proc.Stop(30 * time.Second)
		}
	}
}

// sameLogs fails unless the members' commit logs hold the same bytes, up
// to the end of the shorter one: members stop one after the other while
// clients may still write, so one stopped earlier may lack what the others
// applied after it stopped, and nothing else.
func (g *group) sameLogs() { g.sameLogsOf("replica") }

// sameLogsOf is sameLogs of the replica in each member's data directory
// at replica ("replica" for a cluster's first group, "groups/G/replica"
// for data group G).
func (g *group) sameLogsOf(replica string) { g.sameLogsOn(replica, g.members) }

// sameLogsOn is sameLogsOf over the members ms only (those holding a
// replica of the group).
func (g *group) sameLogsOn(replica string, ms []*member) {
	g.t.Helper()
	read := func(m *member) []byte {
		dir := filepath.Join(m.dir, replica, "store", "commitlog")
		var names []string
		err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
			if err == nil && !d.IsDir() {
				names = append(names, p)
			}
			return err
		})
		if err != nil {
			g.t.Fatal(err)
		}
		slices.Sort(names) // segment files are named by their base offset, zero-padded
		var log []byte
		for i, p := range names {
			b, err := os.ReadFile(p)
			if err != nil {
				g.t.Fatal(err)
			}
			if i == len(names)-1 {
				b = bytes.TrimRight(b, "\x00") // the active segment's preallocated tail
			}
			log = append(log, b...)
		}
		return log
	}
	first := read(ms[0])
	if len(first) == 0 {
		g.t.Fatalf("member %d has no commit log in %s", ms[0].id, replica)
	}
	for _, m := range ms[1:] {
		other := read(m)
		n := min(len(first), len(other))
		if at := commonPrefix(first[:n], other[:n]); at < n {
			g.t.Fatalf("the commit logs in %s of member %d (%d bytes) and member %d (%d bytes) differ from byte %d on", replica, ms[0].id, len(first), m.id, len(other), at)
		}
	}
}

// commonPrefix is the length of the longest common prefix of a and b.
func commonPrefix(a, b []byte) int {
	n := 0
	for n < len(a) && n < len(b) && a[n] == b[n] {
		n++
	}
	return n
}

func config(g *group, consumerGroup string) *rmq.Config {
	return e2eutil.Config(g.endpoint(), consumerGroup)
}

// TestClusterKill9LeaderUnderSyncSends kills the leader with kill -9 at a
// random point of a send load, round after round, and restarts it: every
// send answered OK is received afterwards, the client sees sends resume
// within the failover bound, and the members' logs end byte-identical.
func TestClusterKill9LeaderUnderSyncSends(t *testing.T) {
	e2eutil.Begin(t)
	rounds := 20
	if s := os.Getenv("MQGATE_CLUSTER_ROUNDS"); s != "" {
		rounds, _ = strconv.Atoi(s)
	}
	g := newGroup(t, "--flush", "sync")
	g.leader(30 * time.Second)
	topic, cg := e2eutil.Uniq("kill"), e2eutil.Uniq("g")
	pr := e2eutil.StartProducer(t, config(g, ""), rmq.WithTopics(topic))

	load := startLoad(pr, topic, 4)
	defer load.stop()
	var failovers []time.Duration
	for r := range rounds {
		load.waitFor(t, load.count()+50+r*17%40, 60*time.Second, "before the kill")
		l := g.leader(30 * time.Second)
		killedAt := time.Now()
		l.proc.Kill9()
		load.waitFor(t, load.count()+1, 60*time.Second, fmt.Sprintf("round %d: after killing member %d", r, l.id))
		load.mu.Lock()
		i, _ := slices.BinarySearchFunc(load.okAt, killedAt, func(a, b time.Time) int { return a.Compare(b) })
		resumed := load.okAt[min(i, len(load.okAt)-1)]
		load.mu.Unlock()
		failovers = append(failovers, resumed.Sub(killedAt))
		g.start(l)
	}
	load.waitFor(t, load.count()+50, 60*time.Second, "after the last restart")
	acked := load.stop()
	slices.Sort(failovers)
	t.Logf("%d rounds, %d sends answered OK; failover seen by the client (kill to the next OK send): p50 %v, max %v",
		rounds, len(acked), failovers[len(failovers)/2], failovers[len(failovers)-1])
	if worst := failovers[len(failovers)-1]; worst > 10*time.Second {
		t.Errorf("sends resumed %v after a leader was killed; the bound is 10 s", worst)
	}

	// Every acknowledged send is there.
	c := e2eutil.StartSimpleConsumer(t, config(g, cg), rmq.WithSimpleAwaitDuration(2*time.Second),
		rmq.WithSimpleSubscriptionExpressions(map[string]*rmq.FilterExpression{topic: rmq.SUB_ALL}))
	got := receiveAcked(c, acked, 120*time.Second, true)
	if n := missingOf(acked, got); n > 0 {
		t.Fatalf("%d of %d acknowledged sends are missing after %d leader kills", n, len(acked), rounds)
	}
	for id, body := range acked {
		if got[id] != body {
			t.Fatalf("message %s: body %q, sent %q", id, got[id], body)
		}
	}
	g.stopAll()
	g.sameLogs()
}

// receiveAcked receives with c until every message of acked (id → body)
// came or d passes, and returns what came (id → body); with ack, each
// delivery is acknowledged.
func receiveAcked(c rmq.SimpleConsumer, acked map[string]string, d time.Duration, ack bool) map[string]string {
	got := map[string]string{}
	deadline := time.Now().Add(d)
	for missingOf(acked, got) > 0 && time.Now().Before(deadline) {
		rctx, rcancel := context.WithTimeout(context.Background(), 10*time.Second)
		mvs, err := c.Receive(rctx, 32, 60*time.Second)
		rcancel()
		if err != nil {
			continue
		}
		for _, mv := range mvs {
			got[mv.GetMessageId()] = string(mv.GetBody())
			if ack {
				actx, acancel := context.WithTimeout(context.Background(), 10*time.Second)
				_ = c.Ack(actx, mv)
				acancel()
			}
		}
	}
	return got
}

// receiveAll receives topic through consumer group cg with the official
// client, acknowledging, until every send in acked came (up to 120 s),
// and fails the test unless all did; after says what preceded, for the
// failure. It returns the consumer.
func (g *group) receiveAll(topic, cg string, acked map[string]string, after string) rmq.SimpleConsumer {
	g.t.Helper()
	c := e2eutil.StartSimpleConsumer(g.t, config(g, cg), rmq.WithSimpleAwaitDuration(2*time.Second),
		rmq.WithSimpleSubscriptionExpressions(map[string]*rmq.FilterExpression{topic: rmq.SUB_ALL}))
	got := receiveAcked(c, acked, 120*time.Second, true)
	if n := missingOf(acked, got); n > 0 {
		g.t.Fatalf("%d of %d acknowledged sends are missing after %s", n, len(acked), after)
	}
	return c
}

func missingOf(acked, got map[string]string) int {
	n := 0
	for id := range acked {
		if _, ok := got[id]; !ok {
			n++
		}
	}
	return n
}
