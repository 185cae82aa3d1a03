package cluster

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	rmq "github.com/apache/rocketmq-clients/golang/v5"
	pb "github.com/apache/rocketmq-clients/golang/v5/protocol/v2"
	"google.golang.org/grpc"
	grpcbackoff "google.golang.org/grpc/backoff"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/mqgate/mqgate/internal/e2e/e2eutil"
	"github.com/mqgate/mqgate/internal/e2e/nemesis"
	"github.com/mqgate/mqgate/internal/testutil"
)

// The nemesis test's settings (environment; `make nemesis` sets them).
const (
	// envSeed replays a run: the plan of faults, the initial clock
	// offsets and the workload's choices come from it (the timing of a
	// run is never quite the same).
	envSeed = "MQGATE_NEMESIS_SEED"
	// envDuration is about how long the faults go on (default 40 s: the
	// CI run).
	envDuration = "MQGATE_NEMESIS_DURATION"
	// envFaults limits the faults to some kinds: kill, pause, partition,
	// transfer, skew, move (comma-separated; default all, move with
	// replica sets only).
	envFaults = "MQGATE_NEMESIS_FAULTS"
	// envSkew is the largest clock offset a member gets (default 500 ms,
	// so that two members differ by at most 1 s, the skew cluster mode
	// allows between members; 0: no skew).
	envSkew = "MQGATE_NEMESIS_SKEW"
	// envSlack is how much earlier than its window's end a message may
	// be handed out again (default 100 ms; see TestNemesis).
	envSlack = "MQGATE_NEMESIS_WINDOW_SLACK"
	// envDrain bounds the drain after the faults (default 90 s).
	envDrain = "MQGATE_NEMESIS_DRAIN"
	// envArgs adds flags to every member's command line (space-separated,
	// e.g. "--raft-log-keep 64" to make members catch up from copies).
	envArgs = "MQGATE_NEMESIS_ARGS"
	// envGroups is the number of data groups the cluster is created
	// with (default 1; TestNemesisDataGroups runs with 3).
	envGroups = "MQGATE_NEMESIS_GROUPS"
	// envMembers is the number of members (default 3); envReplicas the
	// cluster's --group-replicas (default 0: every member hosts every
	// group).
	envMembers  = "MQGATE_NEMESIS_MEMBERS"
	envReplicas = "MQGATE_NEMESIS_REPLICAS"
	// envOut is where a failed run leaves the members' logs and the
	// history (history.jsonl); default a new directory in the system's
	// temporary directory, removed when the run passes.
	envOut = "MQGATE_NEMESIS_OUT"
)

// receiveInvisible is the invisible duration of every receive: the
// smallest the server allows. Changes then set 1 to 3 s, so windows end
// (and messages come back) often.
const receiveInvisible = 10 * time.Second

// nemesisToken is the group's peer token.
const nemesisToken = "nemesis-peer-token-0123456789"

type nemesisConfig struct {
	seed                         uint64
	duration, skew, slack, drain time.Duration
	kinds                        []nemesis.FaultKind
	groups                       int // data groups
	members, replicas            int // members; --group-replicas (0: none)
}

// replicaSets reports whether the data groups are on some members only
// (group 0 then keeps the catalog alone: no queue is in it).
func (c nemesisConfig) replicaSets() bool {
	return c.groups > 1 && c.replicas > 0 && c.replicas < c.members
}

// firstData is the first group holding queues.
func (c nemesisConfig) firstData() int {
	if c.replicaSets() {
		return 1
	}
	return 0
}

// placeQueue is the group holding queue q of topic.
func (c nemesisConfig) placeQueue(topic string, q int32) int {
	if c.replicaSets() {
		return placeOnData(topic, q, c.groups)
	}
	return placeGroup(topic, q, c.groups)
}

// setGroupsDrain makes the drain of a run over several data groups last
// past the producers' first settings sync, unless MQGATE_NEMESIS_DRAIN
// says otherwise. The official Go client opens a Telemetry stream only
// when it first routes to a broker and at its settings sync, every 5
// minutes from its start; a stream that ends (its member killed, or its
// channel steered onto a group's leader) stays closed until then, and
// transaction checks cannot reach the producer meanwhile. Steering
// happens in every run with data groups.
func (c *nemesisConfig) setGroupsDrain() {
	if c.groups > 1 && os.Getenv(envDrain) == "" {
		c.drain = 6 * time.Minute
	}
}

func readNemesisConfig(t *testing.T) nemesisConfig {
	t.Helper()
	c := nemesisConfig{seed: rand.Uint64() % 1_000_000_000, duration: 40 * time.Second, skew: 500 * time.Millisecond,
		slack: 100 * time.Millisecond, drain: 90 * time.Second, groups: 1, members: 3}
	if s := os.Getenv(envSeed); s != "" {
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("%s=%q: %v", envSeed, s, err)
		}
		c.seed = n
	}
	for name, d := range map[string]*time.Duration{envDuration: &c.duration, envSkew: &c.skew, envSlack: &c.slack, envDrain: &c.drain} {
		if s := os.Getenv(name); s != "" {
			v, err := time.ParseDuration(s)
			if err != nil || v < 0 {
				t.Fatalf("%s=%q: want a duration", name, s)
			}
			*d = v
		}
	}
	if s := os.Getenv(envGroups); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			t.Fatalf("%s=%q: want a number of data groups", envGroups, s)
		}
		c.groups = n
		c.setGroupsDrain()
	}
	for name, v := range map[string]*int{envMembers: &c.members, envReplicas: &c.replicas} {
		if s := os.Getenv(name); s != "" {
			n, err := strconv.Atoi(s)
			if err != nil || n < 0 || name == envMembers && n < 3 {
				t.Fatalf("%s=%q: want a number (of members, 3 or more)", name, s)
			}
			*v = n
		}
	}
	if s := os.Getenv(envFaults); s != "" {
		k, err := nemesis.ParseKinds(s)
		if err != nil {
			t.Fatalf("%s: %v", envFaults, err)
		}
		c.kinds = k
	}
	if len(c.kinds) == 0 && c.replicaSets() {
		// Replicas move between the members too.
		c.kinds = append(slices.Clone(nemesis.AllFaults), nemesis.Move)
	}
	return c
}

// TestNemesis is a Jepsen-style test of cluster mode. Three members (the
// binary built with the mqgate_testhooks tag, for clock offsets) run with
// fault proxies on every raft link; the official Go client, configured
// with all three addresses, sends (normal, delayed, transactional: half
// committed, half rolled back, some left to the check-back), receives with
// a 10 s invisible duration, changes the invisibility of some deliveries
// (1 to 3 s; some as a client that gives up after a few milliseconds) and
// acknowledges most of them (some with the new handle after
// a change, some first with the old one, which must be refused), while a
// nemesis injects one fault at a time from a seeded plan: kill -9 and
// restart, SIGSTOP and SIGCONT, partitions, leadership transfers, and
// members restarted with their broker's clock shifted (up to ±500 ms, so
// that no two members differ by more than the 1 s cluster mode allows)
// and handed the leadership, and, with replica sets, a data group's
// replica moved from one member to another (cluster move-replica). Every operation is recorded as the client saw
// it. Then every fault is healed, all members restart on true clocks, the
// consumers drain (acknowledging everything) until every send answered OK
// was delivered and every delivery was acknowledged or came back, the
// members stop, and the history is checked (nemesis.Check):
//
//   - every send answered OK is delivered, every committed transaction's
//     message too, no rolled-back one, none before its commit; no commit
//     or rollback of a stored transaction is refused;
//   - no message is handed out again before the invisibility window of an
//     earlier delivery ended, as the client measured it (from when it
//     asked), less 100 ms. That is the bound mqgate must meet while the
//     members' clocks are within the skew it allows of each other: the
//     injected skew is not allowed for, since a window the client asked
//     for must not shrink because the member that recorded it and the
//     one that enforces it disagree on the time. (The offset shifts the
//     broker's clock only: a check of the members' clocks against each
//     other that reads another clock does not see it, so a larger
//     MQGATE_NEMESIS_SKEW tests what happens beyond the bound unchecked.)
//   - nothing acknowledged (ack answered OK) is delivered again, and no
//     ack or change is answered OK for a superseded handle;
//   - a delayed message sent once is stored once, and delivered no
//     earlier than its due time less the largest injected skew (plus
//     100 ms): its due time is an absolute time only a clock can judge;
//   - a delivery never acknowledged comes back;
//   - after a clean stop, the members' commit logs are byte-identical.
//
// The run prints its seed; MQGATE_NEMESIS_SEED replays it (the plan and
// the workload's choices; not the timing). `make nemesis` runs it longer
// (MQGATE_NEMESIS_DURATION); the other MQGATE_NEMESIS_* settings are
// above.
func TestNemesis(t *testing.T) {
	e2eutil.Begin(t)
	runNemesis(t, readNemesisConfig(t))
}

// TestNemesisDataGroups is TestNemesis on a cluster of three data groups
// (unless MQGATE_NEMESIS_GROUPS says otherwise): faults aimed at a
// leader aim at a group's, transfers move a group's leadership, and the
// members must converge, and their commit logs agree, in every group.
func TestNemesisDataGroups(t *testing.T) {
	e2eutil.Begin(t)
	cfg := readNemesisConfig(t)
	if os.Getenv(envGroups) == "" {
		cfg.groups = 3
		cfg.setGroupsDrain()
	}
	runNemesis(t, cfg)
}

func runNemesis(t *testing.T, cfg nemesisConfig) {
	plan := nemesis.NewPlan(cfg.seed, nemesis.PlanOptions{Duration: cfg.duration, Kinds: cfg.kinds, MaxSkew: cfg.skew, Members: cfg.members})
	t.Logf("nemesis plan over %d members, %d data group(s), group replicas %d (replay: %s=%d):\n%s", cfg.members, cfg.groups, cfg.replicas, envSeed, cfg.seed, plan)

	args := []string{"--peer-token", nemesisToken}
	if cfg.groups > 1 {
		args = append(args, "--data-groups", strconv.Itoa(cfg.groups))
	}
	if cfg.replicas > 0 {
		args = append(args, "--group-replicas", strconv.Itoa(cfg.replicas))
	}
	g := planGroupOf(t, cfg.members, append(args, strings.Fields(os.Getenv(envArgs))...))
	g.bin = testutil.BinaryWithTags(t, "mqgate_testhooks")
	g.logDir = nemesisOut(t, cfg.seed)
	g.proxy()
	r := &nemesisRun{t: t, g: g, cfg: cfg, base: time.Now(), procs: map[int][]*testutil.Proc{}, offset: map[int]time.Duration{},
		down: map[int]bool{}, paused: map[int]bool{}, gaveUp: map[int]map[int]bool{}}
	if cfg.replicaSets() {
		r.voters = createdSets(cfg.groups, cfg.members, cfg.replicas)
	}
	for i, m := range g.members {
		r.setOffset(m, plan.Initial[i])
	}
	g.startNew()
	for _, m := range g.members {
		r.started(m)
	}
	l := g.leader(30 * time.Second)
	r.note("member %d leads", l.id)

	w := r.startWorkload(plan.Seed)
	w.waitSends(t, 20, 60*time.Second)
	for i, f := range plan.Faults {
		r.apply(i+1, f, w)
	}
	w.stopProducers()
	r.note("faults over; producers stopped")

	// Heal everything, restart every member on a true clock, and drain.
	r.healAll()
	g.killAll()
	for _, m := range g.members {
		r.down[m.id] = true
		r.roles = append(r.roles, role{at: time.Now(), member: m.id})
		r.setOffset(m, 0)
	}
	r.note("all members killed; restarting them together on true clocks")
	g.startAll()
	for _, m := range g.members {
		r.started(m)
	}
	r.note("member %d leads after the restart", g.leader(60*time.Second).id)
	left := w.drain(cfg.drain)
	if len(left) > 0 {
		r.finding("the drain ended after %v with %d expectations unmet (reported below as violations)", cfg.drain, len(left))
	}
	w.stopConsumers()
	end := time.Now()
	r.note("drain over")

	r.converge(30 * time.Second)
	g.stopAll()
	if err := r.sameLogs(); err != nil {
		r.finding("%v", err)
	}

	events := w.h.Events()
	t.Logf("history: %d events: %s", len(events), nemesis.Summary(events))
	writeHistory(t, filepath.Join(g.logDir, "history.jsonl"), events)
	w.logRefusals(t)
	vs := nemesis.Check(events, nemesis.Bounds{Slack: cfg.slack, DelayEarly: cfg.skew + cfg.slack, Redeliver: 20 * time.Second, End: end})
	r.buildTimeline()
	if len(vs) > 0 || len(r.findings) > 0 {
		t.Errorf("nemesis run with seed %d (replay: %s=%d); times are relative to %s:\n%s\n%s\n\nplan:\n%s", cfg.seed, envSeed, cfg.seed,
			r.base.UTC().Format("15:04:05.000"), strings.Join(r.findings, "\n"), nemesis.Report(vs, r.base, r.context), plan)
	}
}

// nemesisOut is the directory a failed run leaves its logs and history
// in ($MQGATE_NEMESIS_OUT, or a new one removed if the run passes).
func nemesisOut(t *testing.T, seed uint64) string {
	t.Helper()
	if dir := os.Getenv(envOut); dir != "" {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		return dir
	}
	dir, err := os.MkdirTemp("", fmt.Sprintf("mqgate-nemesis-%d-", seed))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("the members' logs and the history (history.jsonl) are in %s", dir)
		} else {
			os.RemoveAll(dir)
		}
	})
	return dir
}

// writeHistory writes events to file, one JSON object a line.
func writeHistory(t *testing.T, file string, events []nemesis.Event) {
	t.Helper()
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	for _, e := range events {
		if err := enc.Encode(e); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(file, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

// nemesisRun is the state of TestNemesis's faults, kept by the test's
// goroutine.
type nemesisRun struct {
	t    *testing.T
	g    *group
	cfg  nemesisConfig
	base time.Time // times in reports are relative to it

	mu       sync.Mutex
	notes    []timed
	findings []string

	procs  map[int][]*testutil.Proc // every process each member ran
	offset map[int]time.Duration    // each member's clock offset
	down   map[int]bool             // killed, not restarted yet
	paused map[int]bool             // SIGSTOPped

	roles []role // who leads, with what clock, from when (buildTimeline)

	// voters are each data group's voters, as created and as the Move
	// faults changed them (replica sets only); gaveUp, by member, the
	// groups it gave a replica of up since it last started (it hosts
	// them again only once restarted).
	voters [][]int
	gaveUp map[int]map[int]bool
}

// hosts reports whether member id holds a replica of data group grp.
func (r *nemesisRun) hosts(id, grp int) bool {
	return !r.cfg.replicaSets() || grp == 0 || slices.Contains(r.voters[grp], id)
}

// move moves a replica of a data group (f.Pick chooses it, the member it
// leaves and the one it goes to, among those that can host it now) with
// `cluster move-replica`; it must succeed, the cluster being healthy
// between faults.
func (r *nemesisRun) move(n int, f nemesis.Fault) {
	if !r.cfg.replicaSets() {
		r.note("fault %d: no replica to move: every member hosts every group", n)
		return
	}
	grp := 1 + f.Pick%(r.cfg.groups-1)
	vs := r.voters[grp]
	from := vs[(f.Pick/7)%len(vs)]
	var to []int
	for _, m := range r.g.members {
		if !slices.Contains(vs, m.id) && !r.gaveUp[m.id][grp] {
			to = append(to, m.id)
		}
	}
	if len(to) == 0 {
		r.note("fault %d: no member can take a replica of data group %d now (voters %v)", n, grp, vs)
		return
	}
	dest := to[(f.Pick/13)%len(to)]
	via := r.g.members[0]
	if via.id == from {
		via = r.g.members[1]
	}
	r.note("fault %d: move data group %d's replica from member %d to member %d", n, grp, from, dest)
	out, err := r.g.cli("cluster", "move-replica", "--peer", via.peer, "--cluster-id", r.g.id, "--group", strconv.Itoa(grp),
		"--from", strconv.Itoa(from), "--to", strconv.Itoa(dest), "--timeout", "120s")
	if err != nil {
		r.finding("fault %d: moving data group %d's replica from member %d to member %d failed: %v: %s", n, grp, from, dest, err, strings.TrimSpace(out))
		if st, err := r.g.groupStatus(via, grp); err == nil {
			r.voters[grp] = st.Voters
		}
		return
	}
	r.voters[grp] = append(slices.DeleteFunc(slices.Clone(vs), func(id int) bool { return id == from }), dest)
	slices.Sort(r.voters[grp])
	if r.gaveUp[from] == nil {
		r.gaveUp[from] = map[int]bool{}
	}
	r.gaveUp[from][grp] = true
}

type timed struct {
	at   time.Time
	text string
}

// role is a change of a member's role or clock: it starts with a clock
// offset (start), leads (leads), stops leading or is killed.
type role struct {
	at     time.Time
	member int
	leads  bool
	start  bool
	offset time.Duration
}

// note records what the nemesis did, for the log and the report.
func (r *nemesisRun) note(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := timed{at: time.Now(), text: fmt.Sprintf(format, args...)}
	r.notes = append(r.notes, n)
	r.t.Logf("%+8.3fs %s", n.at.Sub(r.base).Seconds(), n.text)
}

// finding records a failure the history's checker cannot see (no
// leader, diverged replicas).
func (r *nemesisRun) finding(format string, args ...any) {
	r.note("FINDING: "+format, args...)
	r.mu.Lock()
	r.findings = append(r.findings, fmt.Sprintf(format, args...))
	r.mu.Unlock()
}

// setOffset is m's clock offset from its next start on.
func (r *nemesisRun) setOffset(m *member, d time.Duration) {
	r.offset[m.id] = d
	m.env = nil
	if d != 0 {
		m.env = []string{"MQGATE_TEST_CLOCK_OFFSET=" + d.String()}
	}
}

// started records m's new process, and checks that its clock offset
// took effect.
func (r *nemesisRun) started(m *member) {
	r.t.Helper()
	r.procs[m.id] = append(r.procs[m.id], m.proc)
	r.down[m.id], r.paused[m.id] = false, false
	delete(r.gaveUp, m.id)
	d := r.offset[m.id]
	r.roles = append(r.roles, role{at: time.Now(), member: m.id, start: true, offset: d})
	if d != 0 {
		if _, ok := m.proc.WaitLog(10*time.Second, func(l map[string]any) bool {
			return l["msg"] == "test hook: the broker's clock is offset" && l["offset"] == d.String()
		}); !ok {
			r.t.Fatalf("member %d was started with a clock offset of %v, and does not say it runs with it", m.id, d)
		}
	}
	r.note("member %d started (clock offset %v)", m.id, d)
}

// start restarts m.
func (r *nemesisRun) start(m *member) {
	r.g.start(m)
	r.started(m)
}

// kill kills m with kill -9.
func (r *nemesisRun) kill(m *member) {
	m.proc.Kill9()
	r.down[m.id] = true
	r.roles = append(r.roles, role{at: time.Now(), member: m.id})
}

// hold lets a fault last d: the time passing is the fault.
func hold(d time.Duration) { time.Sleep(d) }

// leaderOf asks the members the nemesis has not stopped who leads data
// group grp, until one names a leader that is up, or timeout passes
// (nil).
func (r *nemesisRun) leaderOf(grp int, timeout time.Duration) *member {
	deadline := time.Now().Add(timeout)
	for {
		for _, m := range r.g.members {
			if r.down[m.id] || r.paused[m.id] {
				continue
			}
			out, err := r.g.cli("cluster", "status", "--peer", m.peer, "--cluster-id", r.g.id, "--group", strconv.Itoa(grp), "--json", "--timeout", "2s")
			if err != nil {
				continue
			}
			if l := r.g.byID(leaderOf(out)); l != nil && !r.down[l.id] && !r.paused[l.id] {
				return l
			}
		}
		if time.Now().After(deadline) {
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// target is the member fault f aims at. With data groups, a fault
// aimed at a leader aims at the leader of the group f.Member picks.
func (r *nemesisRun) target(f nemesis.Fault) (*member, string) {
	if !f.AtLeader {
		return r.g.byID(f.Member), fmt.Sprintf("member %d", f.Member)
	}
	grp := r.faultGroup(f)
	if l := r.leaderOf(grp, 10*time.Second); l != nil {
		if r.cfg.groups > 1 {
			return l, fmt.Sprintf("member %d (the leader of data group %d)", l.id, grp)
		}
		return l, fmt.Sprintf("member %d (the leader)", l.id)
	}
	m := r.g.members[0]
	return m, fmt.Sprintf("member %d (no leader known)", m.id)
}

// faultGroup is the data group a fault aimed at a leader, or a
// transfer, concerns (0 without data groups).
func (r *nemesisRun) faultGroup(f nemesis.Fault) int { return f.Member % r.cfg.groups }

// transfer hands the leadership of data group grp to m, asking again for
// up to 10 s (a member just restarted is not known as a voter at once).
func (r *nemesisRun) transfer(m *member, grp int) {
	var out string
	var err error
	deadline := time.Now().Add(10 * time.Second)
	for {
		via := m
		if l := r.leaderOf(grp, 5*time.Second); l != nil {
			via = l
		}
		out, err = r.g.cli("cluster", "transfer-leader", "--peer", via.peer, "--cluster-id", r.g.id, "--group", strconv.Itoa(grp), "--to", strconv.Itoa(m.id))
		if err == nil {
			r.note("member %d leads data group %d (transferred)", m.id, grp)
			return
		}
		if time.Now().After(deadline) {
			break
		}
		time.Sleep(500 * time.Millisecond)
	}
	r.note("transfer of the leadership of data group %d to member %d failed: %v: %s", grp, m.id, err, strings.TrimSpace(out))
}

// apply injects fault n, lets it last, heals it, and waits until the
// group serves sends again.
func (r *nemesisRun) apply(n int, f nemesis.Fault, w *workload) {
	r.t.Helper()
	hold(f.Gap)
	switch f.Kind {
	case nemesis.Kill:
		m, what := r.target(f)
		r.note("fault %d: kill -9 %s for %v", n, what, f.Hold)
		r.kill(m)
		hold(f.Hold)
		r.start(m)
	case nemesis.Pause:
		m, what := r.target(f)
		r.note("fault %d: SIGSTOP %s for %v", n, what, f.Hold)
		m.proc.Signal(syscall.SIGSTOP)
		r.paused[m.id] = true
		hold(f.Hold)
		m.proc.Signal(syscall.SIGCONT)
		r.paused[m.id] = false
		r.note("fault %d: SIGCONT member %d", n, m.id)
	case nemesis.Partition:
		m, what := r.target(f)
		r.note("fault %d: partition %s away for %v", n, what, f.Hold)
		r.g.isolate(m)
		hold(f.Hold)
		r.g.heal(m)
		r.note("fault %d: partition of member %d healed", n, m.id)
	case nemesis.Transfer:
		m, grp := r.g.byID(f.Member), r.faultGroup(f)
		l := r.leaderOf(grp, 10*time.Second)
		for i := 1; (l == m || !r.hosts(m.id, grp)) && i < len(r.g.members); i++ {
			m = r.g.byID((f.Member+i-1)%len(r.g.members) + 1) // the next replica of grp
		}
		r.note("fault %d: transfer the leadership of data group %d to member %d", n, grp, m.id)
		r.transfer(m, grp)
	case nemesis.Move:
		r.move(n, f)
	case nemesis.Skew:
		m := r.g.byID(f.Member)
		r.note("fault %d: restart member %d with its clock offset by %v, then hand it the leadership", n, m.id, f.Offset)
		r.kill(m)
		r.setOffset(m, f.Offset)
		r.start(m)
		r.transfer(m, 0)
	}
	// Recovered: every group has a leader, and sends are answered OK again.
	for grp := range r.cfg.groups {
		if l := r.leaderOf(grp, 30*time.Second); l == nil {
			r.finding("fault %d (%s): data group %d has no leader within 30 s after it was healed", n, f.Kind, grp)
			return
		}
	}
	if !w.progress(30 * time.Second) {
		r.finding("fault %d (%s): no send answered OK within 30 s after it was healed", n, f.Kind)
	}
}

// healAll ends every fault still in place (none should be: each fault is
// healed before the next).
func (r *nemesisRun) healAll() {
	for _, m := range r.g.members {
		if r.paused[m.id] {
			m.proc.Signal(syscall.SIGCONT)
			r.paused[m.id] = false
		}
		r.g.heal(m)
	}
}

// converge waits until every member has applied all the leader
// committed.
func (r *nemesisRun) converge(timeout time.Duration) {
	for grp := range r.cfg.groups {
		r.convergeGroup(grp, timeout)
	}
}

func (r *nemesisRun) convergeGroup(grp int, timeout time.Duration) {
	var last string
	if waitFor(timeout, func() bool {
		var sts []memberStatus
		for _, m := range r.g.members {
			if !r.hosts(m.id, grp) {
				continue
			}
			st, err := r.g.groupStatus(m, grp)
			if err != nil {
				last = err.Error()
				return false
			}
			sts = append(sts, st)
		}
		last = fmt.Sprintf("%+v", sts)
		for _, st := range sts {
			if st.Leader == 0 || st.Applied != sts[0].Applied || st.Applied < st.Commit {
				return false
			}
		}
		return true
	}) {
		r.note("members converged in data group %d: %s", grp, last)
		return
	}
	r.finding("the members did not converge in data group %d within %v: %s", grp, timeout, last)
}

// sameLogs compares the stopped members' commit logs byte for byte
// (their preallocated zero tails aside), in every data group.
func (r *nemesisRun) sameLogs() error {
	for grp := r.cfg.firstData(); grp < r.cfg.groups; grp++ {
		if err := r.sameGroupLogs(grp); err != nil {
			return err
		}
	}
	r.note("commit logs byte-identical on all members")
	return nil
}

func (r *nemesisRun) sameGroupLogs(grp int) error {
	read := func(m *member) (map[string][]byte, error) {
		out := map[string][]byte{}
		dir := filepath.Join(memberGroupDir(m, grp), "replica", "store", "commitlog")
		err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(p, ".log") {
				return err
			}
			b, err := os.ReadFile(p)
			out[d.Name()] = bytes.TrimRight(b, "\x00")
			return err
		})
		return out, err
	}
	var hosts []*member
	for _, m := range r.g.members {
		if r.hosts(m.id, grp) {
			hosts = append(hosts, m)
		}
	}
	first, err := read(hosts[0])
	if err != nil {
		return err
	}
	if len(first) == 0 {
		return fmt.Errorf("member %d has no commit log in data group %d", hosts[0].id, grp)
	}
	for _, m := range hosts[1:] {
		other, err := read(m)
		if err != nil {
			return err
		}
		names := slices.Sorted(func(yield func(string) bool) {
			for n := range first {
				if !yield(n) {
					return
				}
			}
			for n := range other {
				if _, ok := first[n]; !ok && !yield(n) {
					return
				}
			}
		})
		for _, n := range names {
			a, b := first[n], other[n]
			if bytes.Equal(a, b) {
				continue
			}
			at := 0
			for at < len(a) && at < len(b) && a[at] == b[at] {
				at++
			}
			return fmt.Errorf("replicas differ: commit log segment %s of data group %d of member 1 (%d bytes) and member %d (%d bytes) differ from byte %d on",
				n, grp, len(a), m.id, len(b), at)
		}
	}
	return nil
}

// memberGroupDir is where m keeps data group grp (the member's data
// directory for group 0, as a cluster of one group keeps it).
func memberGroupDir(m *member, grp int) string {
	if grp == 0 {
		return m.dir
	}
	return filepath.Join(m.dir, "groups", strconv.Itoa(grp))
}

// buildTimeline adds the leadership changes the members logged to the
// roles (starts and kills) the nemesis recorded.
func (r *nemesisRun) buildTimeline() {
	for id, ps := range r.procs {
		for _, p := range ps {
			for _, line := range strings.Split(p.Log(), "\n") {
				var l struct {
					Time time.Time `json:"time"`
					Msg  string    `json:"msg"`
				}
				if !strings.Contains(line, "leads") || json.Unmarshal([]byte(line), &l) != nil {
					continue
				}
				switch l.Msg {
				case "this member leads: serving":
					r.roles = append(r.roles, role{at: l.Time, member: id, leads: true})
				case "this member no longer leads: relaying to the leader":
					r.roles = append(r.roles, role{at: l.Time, member: id})
				}
			}
		}
	}
	sort.SliceStable(r.roles, func(i, j int) bool { return r.roles[i].at.Before(r.roles[j].at) })
}

// leaderAt says which member served as the leader at t (it had logged
// that it serves, and neither that it stopped nor was killed since), and
// its clock offset.
func (r *nemesisRun) leaderAt(t time.Time) string {
	lead := 0
	offset := map[int]time.Duration{}
	for _, c := range r.roles {
		if c.at.After(t) {
			break
		}
		switch {
		case c.start:
			offset[c.member] = c.offset
		case c.leads:
			lead = c.member
		case lead == c.member:
			lead = 0
		}
	}
	if lead == 0 {
		return "no member serving as the leader"
	}
	return fmt.Sprintf("member %d serving as the leader (clock offset %v)", lead, offset[lead])
}

// context is what happened around a violation: who led when each of its
// events was answered, the nemesis's steps from 1 s before its first
// event to its last, and the members' log lines that name its message.
func (r *nemesisRun) context(v nemesis.Violation, from, to time.Time) []string {
	var out []string
	rel := func(t time.Time) string { return fmt.Sprintf("%+.3fs", t.Sub(r.base).Seconds()) }
	for _, e := range v.Events {
		out = append(out, fmt.Sprintf("%s (%s by %s answered): %s", rel(e.End), e.Op, e.Client, r.leaderAt(e.End)))
	}
	for _, n := range r.notes {
		if !n.at.Before(from.Add(-time.Second)) && !n.at.After(to) {
			out = append(out, fmt.Sprintf("%s nemesis: %s", rel(n.at), n.text))
		}
	}
	if v.MsgID == "" {
		return out
	}
	for id := 1; id <= len(r.g.members); id++ {
		n := 0
		for _, p := range r.procs[id] {
			for _, line := range strings.Split(p.Log(), "\n") {
				if strings.Contains(line, v.MsgID) && n < 6 {
					out = append(out, fmt.Sprintf("member %d log: %s", id, line))
					n++
				}
			}
		}
	}
	return out
}

// workload is the clients of TestNemesis: two senders of normal
// messages and one of transactions (official producers), one of delayed
// messages (raw v2 sends, each made once), and four consumers (official
// SimpleConsumers of one group), acknowledging through raw v2 calls,
// since the official client's Ack hides the server's answer.
type workload struct {
	t   *testing.T
	g   *group
	h   nemesis.History
	raw *rawClient

	// normals: the topics of the plain sends, one in each data group the
	// delayed and transactional topics leave free.
	normals                 []string
	delayed, txTopic, group string

	prodCtx        context.Context
	stopProd       context.CancelFunc
	consCtx        context.Context
	stopCons       context.CancelFunc
	prodWG, consWG sync.WaitGroup
	draining       atomic.Bool
	sendsOK        atomic.Int64
	consumers      []rmq.SimpleConsumer
}

func (r *nemesisRun) startWorkload(seed uint64) *workload {
	t, g := r.t, r.g
	t.Helper()
	// With data groups, each topic in a group of its own (as far as there
	// are groups), and a plain topic in each group left, so that every
	// group carries traffic and faults.
	name := func(prefix string, grp int) string {
		for {
			first := r.cfg.firstData()
			if n := e2eutil.Uniq(prefix); r.cfg.placeQueue(n, 0) == first+grp%(r.cfg.groups-first) {
				return n
			}
		}
	}
	w := &workload{t: t, g: g, raw: newRawClient(t, g), normals: []string{name("nem-normal", 0)}, delayed: name("nem-delay", 1),
		txTopic: name("nem-tx", 2), group: e2eutil.Uniq("nem-g")}
	for grp := 3; grp < r.cfg.groups-r.cfg.firstData(); grp++ {
		w.normals = append(w.normals, name("nem-normal", grp))
	}
	types := map[string]string{w.delayed: "DELAY", w.txTopic: "TRANSACTION"}
	subs := map[string]*rmq.FilterExpression{w.delayed: rmq.SUB_ALL, w.txTopic: rmq.SUB_ALL}
	for _, n := range w.normals {
		types[n], subs[n] = "NORMAL", rmq.SUB_ALL
	}
	// One queue per topic: a message id and a queue offset then name one
	// stored copy (a send the client retried may be stored twice).
	for topic, typ := range types {
		if out, err := g.run("topic", "create", topic, "--type", typ, "--queues", "1", "--server", g.members[0].grpc); err != nil {
			t.Fatalf("topic create %s: %v\n%s", topic, err, out)
		}
	}
	w.prodCtx, w.stopProd = context.WithCancel(context.Background())
	w.consCtx, w.stopCons = context.WithCancel(context.Background())
	t.Cleanup(func() { w.stopProd(); w.stopCons(); w.prodWG.Wait(); w.consWG.Wait() })

	pr := e2eutil.StartProducer(t, config(g, ""), rmq.WithTopics(w.normals...))
	txPr := e2eutil.StartProducer(t, config(g, ""), rmq.WithTopics(w.txTopic),
		rmq.WithTransactionChecker(&rmq.TransactionChecker{Check: w.checkBack}))
	for i := range 4 {
		c := e2eutil.StartSimpleConsumer(t, config(g, w.group), rmq.WithSimpleAwaitDuration(time.Second),
			rmq.WithSimpleSubscriptionExpressions(maps.Clone(subs)))
		w.consumers = append(w.consumers, c)
		w.consWG.Add(1)
		rng := rand.New(rand.NewPCG(seed, uint64(100+i)))
		go func() { defer w.consWG.Done(); w.consume(fmt.Sprintf("consumer-%d", i+1), c, rng) }()
	}
	for i := range 2 {
		w.prodWG.Add(1)
		go func() { defer w.prodWG.Done(); w.sendNormal(pr, i) }()
	}
	w.prodWG.Add(2)
	go func() { defer w.prodWG.Done(); w.sendTx(txPr, rand.New(rand.NewPCG(seed, 200))) }()
	go func() { defer w.prodWG.Done(); w.sendDelayed(rand.New(rand.NewPCG(seed, 300))) }()
	return w
}

// pace waits d between a producer's sends, or until the producers stop.
func (w *workload) pace(d time.Duration) bool {
	select {
	case <-w.prodCtx.Done():
		return false
	case <-time.After(d):
		return true
	}
}

func (w *workload) sendNormal(pr rmq.Producer, p int) {
	for i := 0; w.prodCtx.Err() == nil; i++ {
		e := nemesis.Event{Op: nemesis.Send, Kind: nemesis.Normal, Client: fmt.Sprintf("producer-%d", p+1), Body: fmt.Sprintf("n%d-%d", p+1, i), Start: time.Now()}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		rs, err := pr.Send(ctx, &rmq.Message{Topic: w.normals[i%len(w.normals)], Body: []byte(e.Body)})
		cancel()
		e.End = time.Now()
		if err == nil {
			e.Outcome, e.MsgID = nemesis.OK, rs[0].MessageID
			w.sendsOK.Add(1)
		} else {
			e.Outcome, e.Detail = nemesis.Unknown, shortErr(err)
		}
		w.h.Add(e)
		if !w.pace(100 * time.Millisecond) {
			return
		}
	}
}

// commits tells a transaction's resolution from its body: its producer
// means it, and its checker answers it.
func commits(body string) bool { return strings.HasSuffix(body, "-commit") }

func (w *workload) checkBack(mv *rmq.MessageView) rmq.TransactionResolution {
	body := string(mv.GetBody())
	now := time.Now()
	w.h.Add(nemesis.Event{Op: nemesis.CheckBack, Outcome: nemesis.OK, Client: "tx-producer", Body: body, MsgID: mv.GetMessageId(),
		Commit: commits(body), Start: now, End: now})
	if commits(body) {
		return rmq.COMMIT
	}
	return rmq.ROLLBACK
}

// sendTx sends transactions: half meant to commit, half to roll back;
// about one in six is left to the check-back, the others ended at once
// through raw v2 calls (the official Commit and RollBack answer nil
// whatever the server says).
func (w *workload) sendTx(pr rmq.Producer, rng *rand.Rand) {
	for i := 0; w.prodCtx.Err() == nil; i++ {
		commit, leave := rng.IntN(2) == 0, rng.IntN(6) == 0
		body := fmt.Sprintf("tx%d-rollback", i)
		if commit {
			body = fmt.Sprintf("tx%d-commit", i)
		}
		e := nemesis.Event{Op: nemesis.Send, Kind: nemesis.Txn, Client: "tx-producer", Body: body, Commit: commit, Start: time.Now()}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		rs, err := pr.SendWithTransaction(ctx, &rmq.Message{Topic: w.txTopic, Body: []byte(body)}, pr.BeginTransaction())
		cancel()
		e.End = time.Now()
		if err != nil {
			e.Outcome, e.Detail = nemesis.Unknown, shortErr(err)
			w.h.Add(e)
		} else {
			e.Outcome, e.MsgID = nemesis.OK, rs[0].MessageID
			w.h.Add(e)
			if !leave {
				end := nemesis.Event{Op: nemesis.EndTx, Client: "tx-producer", Body: body, MsgID: e.MsgID, Commit: commit, Start: time.Now()}
				res := pb.TransactionResolution_ROLLBACK
				if commit {
					res = pb.TransactionResolution_COMMIT
				}
				req := &pb.EndTransactionRequest{Topic: &pb.Resource{Name: w.txTopic}, MessageId: e.MsgID, TransactionId: rs[0].TransactionId, Resolution: res}
				end.Outcome, end.Member, end.Detail = w.raw.call(10*time.Second, rng.IntN(len(w.raw.conns)), func(ctx context.Context, c pb.MessagingServiceClient) (*pb.Status, error) {
					resp, err := c.EndTransaction(ctx, req)
					return resp.GetStatus(), err
				})
				end.End = time.Now()
				w.h.Add(end)
			}
		}
		if !w.pace(250 * time.Millisecond) {
			return
		}
	}
}

// sendDelayed sends delayed messages due in 2 to 5 s, each once, to one
// member over the v2 API: a second stored copy can only be the server's.
func (w *workload) sendDelayed(rng *rand.Rand) {
	for i := 0; w.prodCtx.Err() == nil; i++ {
		at := time.Now().Add(2*time.Second + time.Duration(rng.Int64N(int64(3*time.Second)))).Truncate(time.Millisecond)
		e := nemesis.Event{Op: nemesis.Send, Kind: nemesis.Delayed, Client: "delayer", Body: fmt.Sprintf("d-%d", i), DeliverAt: at,
			OneShot: true, MsgID: fmt.Sprintf("01AABBCCDDEEFF%04X%016X", os.Getpid()&0xffff, rawSeq.Add(1)), Start: time.Now()}
		req := &pb.SendMessageRequest{Messages: []*pb.Message{{Topic: &pb.Resource{Name: w.delayed}, Body: []byte(e.Body),
			SystemProperties: &pb.SystemProperties{MessageId: e.MsgID, MessageType: pb.MessageType_DELAY, DeliveryTimestamp: timestamppb.New(at)}}}}
		e.Outcome, e.Member, e.Detail = w.raw.once(5*time.Second, rng.IntN(len(w.raw.conns)), func(ctx context.Context, c pb.MessagingServiceClient) (*pb.Status, error) {
			resp, err := c.SendMessage(ctx, req)
			return resp.GetStatus(), err
		})
		e.End = time.Now()
		w.h.Add(e)
		if !w.pace(300 * time.Millisecond) {
			return
		}
	}
}

// consume receives until the consumers stop, and hands each delivery to
// its own goroutine, which decides (from rng, drawn here) what to do with
// it: acknowledge it; change its invisibility to 1 to 3 s and then
// acknowledge it with the new handle (sometimes first with the old one,
// which must be refused), or leave it; change it as a client that gives
// up after a few milliseconds, and acknowledge it with the handle it
// then holds; or leave it to come back after its 10 s. While draining, and from the third attempt on, every
// delivery is acknowledged at once.
func (w *workload) consume(name string, c rmq.SimpleConsumer, rng *rand.Rand) {
	var wg sync.WaitGroup
	defer wg.Wait()
	sem := make(chan struct{}, 16)
	for w.consCtx.Err() == nil {
		start := time.Now()
		ctx, cancel := context.WithTimeout(w.consCtx, 10*time.Second)
		mvs, err := c.Receive(ctx, 16, receiveInvisible)
		cancel()
		end := time.Now()
		for _, mv := range mvs {
			w.h.Add(nemesis.Event{Op: nemesis.Deliver, Outcome: nemesis.OK, Client: name, Start: start, End: end, Body: string(mv.GetBody()),
				MsgID: mv.GetMessageId(), Offset: mv.GetOffset(), Attempt: mv.GetDeliveryAttempt(), Handle: mv.GetReceiptHandle(), Invisible: receiveInvisible})
			choice, d, first := rng.IntN(100), time.Second+time.Duration(rng.Int64N(int64(2*time.Second))), rng.IntN(len(w.raw.conns))
			sem <- struct{}{}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer func() { <-sem }()
				w.handle(name, c, mv, choice, d, first)
			}()
		}
		if err != nil && !e2eutil.IsNoMessage(err) && w.consCtx.Err() == nil {
			time.Sleep(100 * time.Millisecond) // a member down, an election: it may fail again at once
		}
	}
}

func (w *workload) handle(name string, c rmq.SimpleConsumer, mv *rmq.MessageView, choice int, d time.Duration, first int) {
	if w.draining.Load() || mv.GetDeliveryAttempt() >= 3 || choice < 50 {
		w.ack(name, mv, mv.GetReceiptHandle(), first)
		return
	}
	if choice >= 92 {
		return // left: back after its window
	}
	old := mv.GetReceiptHandle()
	var e nemesis.Event
	if choice >= 85 {
		// An impatient client: it gives up on the change after 2 to
		// 40 ms, and acknowledges with the handle it holds.
		e = w.changeRaw(name, mv, d, time.Duration(2+(choice*7+first*13)%39)*time.Millisecond, first)
	} else {
		e = nemesis.Event{Op: nemesis.Change, Client: name, Handle: old, Invisible: d, Start: time.Now()}
		err := c.ChangeInvisibleDuration(mv, d)
		e.End = time.Now()
		switch {
		case err == nil:
			e.Outcome, e.NewHandle = nemesis.OK, mv.GetReceiptHandle()
		case e2eutil.RPCCode(err) >= 0:
			e.Outcome, e.Detail = outcomeOf(pb.Code(e2eutil.RPCCode(err))), shortErr(err)
		default:
			e.Outcome, e.Detail = nemesis.Unknown, shortErr(err)
		}
		w.h.Add(e)
	}
	mv.ReceiptHandle = old
	if e.Outcome == nemesis.OK {
		mv.ReceiptHandle = e.NewHandle
	}
	switch {
	case choice >= 75 && choice < 85:
		return // changed and left: back after the new window
	case choice >= 65 && choice < 75 && e.Outcome == nemesis.OK:
		w.ack(name, mv, old, first) // superseded: must be refused
	}
	w.ack(name, mv, mv.GetReceiptHandle(), first)
}

// changeRaw changes mv's invisible duration to d over the v2 API, giving
// up after timeout (the official client takes no deadline per call), and
// records it.
func (w *workload) changeRaw(name string, mv *rmq.MessageView, d, timeout time.Duration, member int) nemesis.Event {
	e := nemesis.Event{Op: nemesis.Change, Client: name, Handle: mv.GetReceiptHandle(), Invisible: d, Start: time.Now()}
	req := &pb.ChangeInvisibleDurationRequest{Group: &pb.Resource{Name: w.group}, Topic: &pb.Resource{Name: mv.GetTopic()},
		ReceiptHandle: e.Handle, InvisibleDuration: durationpb.New(d), MessageId: mv.GetMessageId()}
	var nh string
	e.Outcome, e.Member, e.Detail = w.raw.once(timeout, member, func(ctx context.Context, c pb.MessagingServiceClient) (*pb.Status, error) {
		resp, err := c.ChangeInvisibleDuration(ctx, req)
		nh = resp.GetReceiptHandle()
		return resp.GetStatus(), err
	})
	e.End = time.Now()
	if e.Outcome == nemesis.OK {
		e.NewHandle = nh
	} else {
		e.Detail = fmt.Sprintf("gave up after %v: %s", timeout, e.Detail)
	}
	return w.h.Add(e)
}

// ack acknowledges handle through the members in turn, from member
// first, until one answers for good or 8 s pass, and records the outcome.
func (w *workload) ack(name string, mv *rmq.MessageView, handle string, first int) {
	e := nemesis.Event{Op: nemesis.Ack, Client: name, Handle: handle, Start: time.Now()}
	req := &pb.AckMessageRequest{Group: &pb.Resource{Name: w.group}, Topic: &pb.Resource{Name: mv.GetTopic()},
		Entries: []*pb.AckMessageEntry{{MessageId: mv.GetMessageId(), ReceiptHandle: handle}}}
	e.Outcome, e.Member, e.Detail = w.raw.call(8*time.Second, first, func(ctx context.Context, c pb.MessagingServiceClient) (*pb.Status, error) {
		resp, err := c.AckMessage(ctx, req)
		if err != nil {
			return nil, err
		}
		if len(resp.GetEntries()) != 1 {
			return resp.GetStatus(), nil
		}
		return resp.GetEntries()[0].GetStatus(), nil
	})
	e.End = time.Now()
	w.h.Add(e)
}

// waitSends waits until n sends were answered OK.
func (w *workload) waitSends(t *testing.T, n int64, timeout time.Duration) {
	t.Helper()
	if !waitFor(timeout, func() bool { return w.sendsOK.Load() >= n }) {
		t.Fatalf("%d sends answered OK within %v, want %d", w.sendsOK.Load(), timeout, n)
	}
}

// progress reports whether a send is answered OK within timeout.
func (w *workload) progress(timeout time.Duration) bool {
	n := w.sendsOK.Load()
	return waitFor(timeout, func() bool { return w.sendsOK.Load() > n })
}

func (w *workload) stopProducers() {
	w.stopProd()
	w.prodWG.Wait()
}

func (w *workload) stopConsumers() {
	w.stopCons()
	w.consWG.Wait()
}

// drain makes the consumers acknowledge everything, and waits until
// nothing is outstanding and the history has settled, or timeout passes;
// it returns what is still outstanding then.
func (w *workload) drain(timeout time.Duration) []nemesis.Violation {
	w.draining.Store(true)
	// The official producer (v5.1.3) reopens a Telemetry stream that a
	// failover closed only at its next settings sync, every 5 minutes:
	// until then no member can ask it about its transactions. A producer
	// started now, as by an application restarting, answers the checks of
	// the transactions still open.
	e2eutil.StartProducer(w.t, config(w.g, ""), rmq.WithTopics(w.txTopic),
		rmq.WithTransactionChecker(&rmq.TransactionChecker{Check: w.checkBack}))
	deadline := time.Now().Add(timeout)
	for {
		evs := w.h.Events()
		left := nemesis.Outstanding(evs)
		if len(left) == 0 && time.Now().After(nemesis.Settled(evs).Add(3*time.Second)) {
			return nil
		}
		if time.Now().After(deadline) {
			return left
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// logRefusals logs how many acks, changes and transaction ends were
// refused, by answer.
func (w *workload) logRefusals(t *testing.T) {
	n := map[string]int{}
	for _, e := range w.h.Events() {
		if e.Outcome == nemesis.Refused || (e.Outcome == nemesis.Unknown && e.Op != nemesis.Send) {
			d := e.Detail
			if i := strings.Index(d, ": "); i >= 0 && strings.HasPrefix(d, "member ") {
				d = d[i+2:]
			}
			d = variable.ReplaceAllString(d, "…")
			if len(d) > 110 {
				d = d[:110]
			}
			n[fmt.Sprintf("%s %s: %s", e.Op, e.Outcome, d)]++
		}
	}
	keys := slices.Sorted(func(yield func(string) bool) {
		for k := range n {
			if !yield(k) {
				return
			}
		}
	})
	var sb strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&sb, "\n  %4d × %s", n[k], k)
	}
	t.Logf("answers other than OK, by operation and answer:%s", sb.String())
}

// variable matches what varies between answers of one kind: times,
// durations, counts.
var variable = regexp.MustCompile(`[0-9][0-9:.TZ-]*(ms|s)?`)

// outcomeOf classifies a v2 status code answered to a write: OK; a
// refusal that says nothing was done (a bad request, an invalid handle,
// an unknown transaction: the 4xxxx codes but a timeout); or unknown (a
// timeout, a lost leadership, an internal error: the write may still
// take effect).
func outcomeOf(c pb.Code) nemesis.Outcome {
	switch {
	case c == pb.Code_OK:
		return nemesis.OK
	case c == pb.Code_REQUEST_TIMEOUT:
		return nemesis.Unknown
	case c >= 40000 && c < 50000:
		return nemesis.Refused
	}
	return nemesis.Unknown
}

// rawClient makes v2 calls to the members directly (a follower relays
// them to the leader), with connections that retry quickly after a
// member comes back.
type rawClient struct {
	id    string
	conns []pb.MessagingServiceClient // by member index
}

func newRawClient(t *testing.T, g *group) *rawClient {
	t.Helper()
	c := &rawClient{id: e2eutil.Uniq("nemesis-raw")}
	for _, m := range g.members {
		conn, err := grpc.NewClient(m.grpc, grpc.WithTransportCredentials(insecure.NewCredentials()),
			grpc.WithConnectParams(grpc.ConnectParams{Backoff: grpcbackoff.Config{BaseDelay: 100 * time.Millisecond, Multiplier: 1.6, MaxDelay: time.Second},
				MinConnectTimeout: 2 * time.Second}))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		c.conns = append(c.conns, pb.NewMessagingServiceClient(conn))
	}
	return c
}

func (c *rawClient) ctx(parent context.Context) context.Context {
	return metadata.AppendToOutgoingContext(parent, "x-mq-client-id", c.id, "x-mq-language", "GO", "x-mq-protocol", "v2")
}

// call makes f to the members in turn, from member first, until one
// answers OK or a refusal, or d passes. The outcome is OK when any
// attempt was answered OK; refused when the last answer refused and no
// earlier attempt may have taken effect; unknown otherwise.
func (c *rawClient) call(d time.Duration, first int, f func(context.Context, pb.MessagingServiceClient) (*pb.Status, error)) (nemesis.Outcome, int, string) {
	deadline := time.Now().Add(d)
	uncertain := false
	detail := ""
	for k := 0; ; k++ {
		i := (first + k) % len(c.conns)
		o, st, err := c.attempt(max(min(time.Until(deadline), 2*time.Second), 100*time.Millisecond), i, f)
		switch {
		case o == nemesis.OK:
			return o, i + 1, ""
		case err != nil:
			detail = fmt.Sprintf("member %d: %s", i+1, shortErr(err))
		default:
			detail = fmt.Sprintf("member %d: %v: %s", i+1, st.GetCode(), st.GetMessage())
		}
		switch {
		case o == nemesis.Refused && st.GetCode() == pb.Code_TOO_MANY_REQUESTS:
			time.Sleep(50 * time.Millisecond) // nothing done: asked to retry
		case o == nemesis.Refused:
			if uncertain {
				return nemesis.Unknown, i + 1, detail + " (after an attempt not answered)"
			}
			return o, i + 1, detail
		default:
			uncertain = true
		}
		if time.Now().After(deadline) {
			if uncertain {
				return nemesis.Unknown, 0, detail
			}
			return nemesis.Refused, 0, detail
		}
		if k%len(c.conns) == len(c.conns)-1 {
			time.Sleep(100 * time.Millisecond) // every member asked: a failover under way
		}
	}
}

// once makes f to member i once, giving up after timeout.
func (c *rawClient) once(timeout time.Duration, i int, f func(context.Context, pb.MessagingServiceClient) (*pb.Status, error)) (nemesis.Outcome, int, string) {
	o, st, err := c.attempt(timeout, i, f)
	switch {
	case o == nemesis.OK:
		return o, i + 1, ""
	case err != nil:
		return o, i + 1, shortErr(err)
	}
	return o, i + 1, fmt.Sprintf("%v: %s", st.GetCode(), st.GetMessage())
}

// attempt makes f to member i, giving up after timeout.
func (c *rawClient) attempt(timeout time.Duration, i int, f func(context.Context, pb.MessagingServiceClient) (*pb.Status, error)) (nemesis.Outcome, *pb.Status, error) {
	ctx, cancel := context.WithTimeout(c.ctx(context.Background()), timeout)
	defer cancel()
	st, err := f(ctx, c.conns[i])
	if err != nil {
		return nemesis.Unknown, nil, err
	}
	return outcomeOf(st.GetCode()), st, nil
}
