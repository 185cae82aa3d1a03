package capacity

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	rmq "github.com/apache/rocketmq-clients/golang/v5"

	"github.com/mqgate/mqgate/internal/e2e/e2eutil"
	"github.com/mqgate/mqgate/internal/testutil"
)

func TestMain(m *testing.M) { e2eutil.Main(m) }

// The benchmark's settings (environment variables; `make bench-cluster`
// passes them on):
//
//	MQGATE_BENCH_CLUSTER   set to run the benchmark at all
//	MQGATE_BENCH_CONFIGS   configurations, ';'-separated (config.go); default
//	                       "single --flush sync;cluster"; the first is the
//	                       baseline of each round's ratios
//	MQGATE_BENCH_CPUS      CPU cap of each member's cgroup, in CPUs (0.3: 30 ms
//	                       per 100 ms period); 0 or unset: not capped
//	MQGATE_BENCH_MEMBERS   members of "cluster" (default 3)
//	MQGATE_BENCH_ROUNDS    rounds of every configuration, alternated (default 3)
//	MQGATE_BENCH_DURATION  measured time per run (default 10s)
//	MQGATE_BENCH_WARMUP    unmeasured load before it (default 3s)
//	MQGATE_BENCH_PRODUCERS official producers, one client each (default 16)
//	MQGATE_BENCH_SIZE      message body bytes (default 1024)
//	MQGATE_BENCH_PROFILE   a directory: every member writes a CPU profile of
//	                       its whole run there (stopped with SIGTERM to write it)
//	MQGATE_BENCH_JSON      a file the results are written to as JSON
type options struct {
	targets   []Target
	cpus      float64
	rounds    int
	duration  time.Duration
	warmup    time.Duration
	producers int
	size      int
	profile   string
	jsonOut   string
}

func loadOptions(t *testing.T) options {
	t.Helper()
	env := func(name, def string) string {
		if v := os.Getenv(name); v != "" {
			return v
		}
		return def
	}
	num := func(name, def string) int {
		n, err := strconv.Atoi(env(name, def))
		if err != nil || n < 1 {
			t.Fatalf("%s: want a positive integer, got %q", name, env(name, def))
		}
		return n
	}
	dur := func(name, def string) time.Duration {
		d, err := time.ParseDuration(env(name, def))
		if err != nil || d <= 0 {
			t.Fatalf("%s: want a positive duration, got %q", name, env(name, def))
		}
		return d
	}
	o := options{rounds: num("MQGATE_BENCH_ROUNDS", "3"), duration: dur("MQGATE_BENCH_DURATION", "10s"),
		warmup: dur("MQGATE_BENCH_WARMUP", "3s"), producers: num("MQGATE_BENCH_PRODUCERS", "16"),
		size: num("MQGATE_BENCH_SIZE", "1024"), profile: os.Getenv("MQGATE_BENCH_PROFILE"), jsonOut: os.Getenv("MQGATE_BENCH_JSON")}
	var err error
	if o.targets, err = ParseTargets(env("MQGATE_BENCH_CONFIGS", "single --flush sync;cluster"), num("MQGATE_BENCH_MEMBERS", "3")); err != nil {
		t.Fatalf("MQGATE_BENCH_CONFIGS: %v", err)
	}
	if o.cpus, err = strconv.ParseFloat(env("MQGATE_BENCH_CPUS", "0"), 64); err != nil || o.cpus < 0 {
		t.Fatalf("MQGATE_BENCH_CPUS: want a number of CPUs, got %q", os.Getenv("MQGATE_BENCH_CPUS"))
	}
	if o.profile != "" {
		if err := os.MkdirAll(o.profile, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return o
}

// MemberResult is one member's share of a run.
type MemberResult struct {
	ID   int    `json:"id"`
	Role string `json:"role"` // single, leader, follower
	// CPUusPerMsg is the member's CPU time over the messages sent in the
	// window; CPUs its CPU time over the window's length.
	CPUusPerMsg float64 `json:"cpu_us_per_msg"`
	CPUs        float64 `json:"cpus"`
	// Throttled is the share of the cap's periods in which it was held
	// back (capped runs only).
	Throttled float64 `json:"throttled,omitempty"`
	// Work is the raft loop's work per message sent in the window, by
	// counter (`mqgate cluster status --json`, "work"), when the member
	// reports it.
	Work map[string]float64 `json:"work_per_msg,omitempty"`
}

// Result is one run of one configuration.
type Result struct {
	Round       int            `json:"round"`
	Config      string         `json:"config"`
	Messages    int64          `json:"messages"`
	Errors      int64          `json:"errors"`
	Seconds     float64        `json:"seconds"`
	PerSecond   float64        `json:"msgs_per_sec"`
	P50us       float64        `json:"p50_us"`
	P99us       float64        `json:"p99_us"`
	ClientCPUus float64        `json:"client_cpu_us_per_msg"`
	Members     []MemberResult `json:"members"`
	// LeaderChanged: the leader at the end of the window was not the one
	// at its start (the run's member figures mix roles).
	LeaderChanged bool `json:"leader_changed,omitempty"`
}

// TestCapacity is the benchmark (package doc).
func TestCapacity(t *testing.T) {
	if os.Getenv("MQGATE_BENCH_CLUSTER") == "" {
		t.Skip("a benchmark: run it with make bench-cluster (MQGATE_BENCH_CLUSTER=1)")
	}
	if testutil.RaceEnabled {
		t.Skip("the official Go client races internally; run the benchmark without -race")
	}
	o := loadOptions(t)
	acct := newAccounting(t, o.cpus)
	var results []Result
	for round := 1; round <= o.rounds; round++ {
		for _, tg := range o.targets {
			var res Result
			ok := t.Run(fmt.Sprintf("round%d-%s", round, fileName(tg.Spec)), func(t *testing.T) {
				res = runTarget(t, o, acct, tg, round)
			})
			if !ok {
				t.FailNow()
			}
			results = append(results, res)
			fmt.Println(formatResult(res))
		}
	}
	fmt.Println()
	fmt.Print(summarize(o, results))
	if o.jsonOut != "" {
		b, err := json.MarshalIndent(results, "", "  ")
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(o.jsonOut, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// accounting is how members' CPU is measured: a cgroup each, or /proc
// when no cgroup can be made (uncapped runs only).
type accounting struct {
	parent *Parent // nil: /proc
	cpus   float64
}

func newAccounting(t *testing.T, cpus float64) *accounting {
	h, err := FindHierarchy(CgroupRoot)
	var p *Parent
	if err == nil {
		p, err = h.NewParent(fmt.Sprintf("mqgate-bench-%d", os.Getpid()))
	}
	if err != nil {
		if cpus > 0 {
			t.Skipf("members capped at %v CPU need a cgroup of their own, and none can be made here (run as root with cgroup v1's cpu and cpuacct controllers, or cgroup v2's cpu controller, writable): %v", cpus, err)
		}
		t.Logf("no cgroup can be made (%v): members' CPU is read from /proc", err)
		return &accounting{cpus: cpus}
	}
	t.Cleanup(func() {
		if err := p.Remove(); err != nil {
			t.Errorf("remove the bench's cgroups: %v", err)
		}
	})
	if cpus > 0 {
		t.Logf("cgroup v%d: each member capped at %v CPU", h.Version, cpus)
	} else {
		t.Logf("cgroup v%d: members not capped, CPU accounted per member", h.Version)
	}
	return &accounting{parent: p, cpus: cpus}
}

// meter reads one member's CPU.
type meter struct {
	g   *Group // nil: /proc
	pid int
}

func (m meter) read(t *testing.T) CPU {
	if m.g != nil {
		c, err := m.g.Read()
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	d, err := ProcCPU(m.pid)
	if err != nil {
		t.Fatal(err)
	}
	return CPU{Usage: d}
}

// member is one started mqgate of a run.
type member struct {
	id                         int
	grpc, http, remoting, peer string
	proc                       *testutil.Proc
	meter                      meter
	profile                    string
}

func runTarget(t *testing.T, o options, acct *accounting, tg Target, round int) Result {
	clusterID, token := e2eutil.Uniq("capacity"), e2eutil.Uniq("capacity-peer-token")
	ms := make([]*member, tg.Members)
	var peers []string
	for i := range ms {
		ms[i] = &member{id: i + 1, grpc: testutil.StableAddr(t), http: testutil.StableAddr(t), remoting: testutil.StableAddr(t), peer: testutil.StableAddr(t)}
		peers = append(peers, fmt.Sprintf("%d=%s", i+1, ms[i].peer))
	}
	// Groups first: their cleanups run after the processes are killed.
	var groups []*Group
	if acct.parent != nil {
		for _, m := range ms {
			g, err := acct.parent.NewGroup(fmt.Sprintf("r%d-%d-m%d", round, time.Now().UnixNano(), m.id), acct.cpus)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() {
				if err := g.remove(); err != nil {
					t.Errorf("remove cgroup %s: %v", g.Name, err)
				}
			})
			groups = append(groups, g)
		}
	}
	// Every launcher is written before any member starts: a file being
	// written while another goroutine forks cannot be run (ETXTBSY).
	starts := make([]testutil.StartOptions, len(ms))
	for i, m := range ms {
		args := []string{"--grpc-addr", m.grpc, "--http-addr", m.http, "--remoting-addr", m.remoting, "--log-level", "info", "--auto-create"}
		if tg.Cluster {
			args = append(args, "--cluster-id", clusterID, "--node-id", strconv.Itoa(m.id), "--peers", strings.Join(peers, ","), "--peer-token", token)
		}
		args = append(args, tg.Args...)
		env := slices.Clone(tg.Env)
		if o.profile != "" {
			m.profile = filepath.Join(o.profile, fmt.Sprintf("round%d-%s-m%d.pprof", round, fileName(tg.Spec), m.id))
			env = append(env, "MQGATE_TEST_CPUPROFILE="+m.profile)
		}
		bin := tg.Binary
		if bin == "" {
			bin = testutil.Binary(t)
		}
		if groups != nil {
			launcher, err := groups[i].Launcher(t.TempDir(), bin)
			if err != nil {
				t.Fatal(err)
			}
			bin = launcher
		}
		starts[i] = testutil.StartOptions{Args: args, Env: env, Binary: bin}
	}
	var wg sync.WaitGroup
	for i, m := range ms {
		wg.Go(func() {
			m.proc = testutil.Start(t, starts[i])
			m.meter = meter{pid: m.proc.Cmd.Process.Pid}
			if groups != nil {
				m.meter.g = groups[i]
			}
		})
	}
	wg.Wait()
	for _, m := range ms {
		if m.proc == nil || t.Failed() {
			t.FailNow() // a member did not start (testutil.Start failed in its goroutine)
		}
	}
	var endpoints []string
	for _, m := range ms {
		endpoints = append(endpoints, m.grpc)
	}
	leader := func() int { return 0 }
	if tg.Cluster {
		leader = func() int { return waitLeader(t, ms, clusterID, token) }
	}
	lead0 := leader()
	dgroups, first := dataGroups(tg.Args), firstDataGroup(tg.Args, len(ms))
	if tg.Cluster && dgroups > 1 {
		// Every data group serving, their leaders spread, before the load.
		waitSpread(t, ms, clusterID, token, dgroups, first)
	}

	// The topic's queues spread evenly over the groups holding queues, so
	// that each leader takes the same share of the sends.
	topic := e2eutil.Uniq("capacity")
	e2eutil.CLI(t, ms[0].grpc, "topic", "create", topic, "--queues", strconv.Itoa(evenQueues(dgroups-first)))
	cfg := e2eutil.Config(strings.Join(endpoints, ";"), "")
	prods := make([]rmq.Producer, cmp.Or(tg.Producers, o.producers))
	for i := range prods {
		wg.Go(func() { prods[i] = startProducer(t, cfg, topic) })
	}
	wg.Wait()
	for _, p := range prods {
		if p == nil {
			t.FailNow()
		}
	}
	body := make([]byte, o.size)
	for i := range body {
		body[i] = byte('a' + i%26)
	}
	var (
		measuring atomic.Bool
		sent      atomic.Int64
		failed    atomic.Int64
		firstErr  atomic.Pointer[error]
		lats      = make([][]time.Duration, len(prods))
	)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var load sync.WaitGroup
	for i, p := range prods {
		load.Go(func() {
			for ctx.Err() == nil {
				t0 := time.Now()
				sctx, scancel := context.WithTimeout(ctx, 10*time.Second)
				_, err := p.Send(sctx, &rmq.Message{Topic: topic, Body: body})
				scancel()
				d := time.Since(t0)
				if !measuring.Load() {
					continue
				}
				if err != nil {
					if ctx.Err() == nil {
						failed.Add(1)
						firstErr.CompareAndSwap(nil, &err)
					}
					continue
				}
				sent.Add(1)
				lats[i] = append(lats[i], d)
			}
		})
	}
	time.Sleep(o.warmup) // a benchmark's unmeasured load: a span of time, not a condition
	before := make([]CPU, len(ms))
	work0 := make([]map[string]float64, len(ms))
	for i, m := range ms {
		if tg.Cluster {
			work0[i] = memberWork(t, m, clusterID, token, dataGroups(tg.Args))
		}
		before[i] = m.meter.read(t)
	}
	ru0 := selfCPU(t)
	t0 := time.Now()
	measuring.Store(true)
	time.Sleep(o.duration) // the measured window
	measuring.Store(false)
	elapsed := time.Since(t0)
	after := make([]CPU, len(ms))
	work1 := make([]map[string]float64, len(ms))
	for i, m := range ms {
		after[i] = m.meter.read(t)
		if tg.Cluster {
			work1[i] = memberWork(t, m, clusterID, token, dataGroups(tg.Args))
		}
	}
	ru1 := selfCPU(t)
	cancel()
	load.Wait()
	lead1 := leader()

	n := sent.Load()
	if n == 0 {
		if p := firstErr.Load(); p != nil {
			t.Fatalf("no send answered OK in the window; the first error: %v", *p)
		}
		t.Fatal("no send answered OK in the window")
	}
	var all []time.Duration
	for _, l := range lats {
		all = append(all, l...)
	}
	slices.Sort(all)
	res := Result{Round: round, Config: tg.Spec, Messages: n, Errors: failed.Load(), Seconds: elapsed.Seconds(),
		PerSecond: float64(n) / elapsed.Seconds(), P50us: us(pct(all, 0.50)), P99us: us(pct(all, 0.99)),
		ClientCPUus: us(ru1-ru0) / float64(n), LeaderChanged: lead0 != lead1}
	for i, m := range ms {
		d := after[i].Sub(before[i])
		mr := MemberResult{ID: m.id, Role: "single", CPUusPerMsg: us(d.Usage) / float64(n), CPUs: d.Usage.Seconds() / elapsed.Seconds()}
		if tg.Cluster {
			mr.Role = "follower"
			if m.id == lead1 {
				mr.Role = "leader"
			}
		}
		if d.Periods > 0 && acct.cpus > 0 {
			mr.Throttled = float64(d.ThrottledPeriod) / float64(d.Periods)
		}
		if work0[i] != nil && work1[i] != nil && work1[i]["rounds"] > 0 {
			mr.Work = map[string]float64{}
			for k, v := range work1[i] {
				mr.Work[k] = (v - work0[i][k]) / float64(n)
			}
		}
		res.Members = append(res.Members, mr)
	}
	if o.profile != "" {
		stopForProfiles(t, ms, res)
	}
	return res
}

// startProducer starts an official producer for topic (nil after a
// failure reported on t: it may run on another goroutine).
func startProducer(t *testing.T, cfg *rmq.Config, topic string) rmq.Producer {
	pr, err := e2eutil.NewStartedProducer(cfg, rmq.WithTopics(topic))
	if err != nil {
		t.Error(err)
		return nil
	}
	t.Cleanup(func() { _ = pr.GracefulStop() })
	return pr
}

// waitLeader waits until the members agree on a leader that serves, and
// returns its id.
func waitLeader(t *testing.T, ms []*member, clusterID, token string) int {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		for _, m := range ms {
			out, err := e2eutil.CLIResultArgs(t, "cluster", "status", "--peer", m.peer, "--cluster-id", clusterID, "--peer-token", token, "--json")
			if err != nil {
				continue
			}
			var st struct {
				Leader int `json:"leader"`
			}
			if json.Unmarshal([]byte(out), &st) != nil || st.Leader < 1 || st.Leader > len(ms) {
				continue
			}
			if ms[st.Leader-1].proc.HasLine("this member leads: serving") {
				return st.Leader
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("no leader serving within 60s")
	return 0
}

// dataGroups is the --data-groups of a configuration's flags (1 when
// not set).
func dataGroups(args []string) int { return intFlag(args, "data-groups", 1) }

// intFlag is the value of --name in args (def when not set).
func intFlag(args []string, name string, def int) int {
	for i, a := range args {
		v, ok := strings.CutPrefix(a, "--"+name+"=")
		if a == "--"+name && i+1 < len(args) {
			v, ok = args[i+1], true
		}
		if n, err := strconv.Atoi(v); ok && err == nil {
			return n
		}
	}
	return def
}

// evenQueues is the least number of queues, 8 at least, that spread
// evenly over n groups.
func evenQueues(n int) int {
	n = max(n, 1)
	return n * ((8 + n - 1) / n)
}

// firstDataGroup is the first group holding queues: 1 when the
// configuration's data groups are on some members only (group 0 keeps
// the catalog alone), else 0.
func firstDataGroup(args []string, members int) int {
	if r := intFlag(args, "group-replicas", 0); r > 0 && r < members && dataGroups(args) > 1 {
		return 1
	}
	return 0
}

// waitSpread waits until each of a cluster's data groups has a leader
// that serves it and no member leads more than its share of those from
// first on, the groups holding queues (⌈(groups-first)/members⌉), as the
// members balance them after a start.
func waitSpread(t *testing.T, ms []*member, clusterID, token string, groups, first int) {
	t.Helper()
	share := (groups - first + len(ms) - 1) / len(ms)
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		leads := map[int]int{}
		ok := true
		for g := 0; g < groups && ok; g++ {
			out, err := e2eutil.CLIResultArgs(t, "cluster", "status", "--peer", ms[0].peer, "--cluster-id", clusterID, "--peer-token", token,
				"--group", strconv.Itoa(g), "--json")
			var st struct {
				Leader int `json:"leader"`
			}
			if err != nil || json.Unmarshal([]byte(out), &st) != nil || st.Leader < 1 || st.Leader > len(ms) {
				ok = false
				break
			}
			if g >= first {
				leads[st.Leader]++
			}
			_, serving := ms[st.Leader-1].proc.WaitLog(0, func(l map[string]any) bool {
				grp, _ := l["group"].(float64)
				return l["msg"] == "this member leads: serving" && int(grp) == g
			})
			ok = serving && leads[st.Leader] <= share
		}
		if ok {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("the leaders of %d data groups did not spread over the members within 60s", groups)
}

// memberWork is the "work" counters of m's `mqgate cluster status
// --json`, summed over the groups it hosts (nil when it has none).
func memberWork(t *testing.T, m *member, clusterID, token string, groups int) map[string]float64 {
	t.Helper()
	var sum map[string]float64
	for g := range groups {
		out, err := e2eutil.CLIResultArgs(t, "cluster", "status", "--peer", m.peer, "--cluster-id", clusterID, "--peer-token", token,
			"--group", strconv.Itoa(g), "--json")
		if err != nil {
			t.Logf("status of member %d, group %d: %v: %s", m.id, g, err, out)
			return nil
		}
		var st struct {
			ID   int                `json:"id"`
			Work map[string]float64 `json:"work"`
		}
		if err := json.Unmarshal([]byte(out), &st); err != nil {
			t.Logf("status of member %d, group %d: %v", m.id, g, err)
			return nil
		}
		if st.ID != m.id {
			continue // a group m does not host: another member answered
		}
		if sum == nil {
			sum = map[string]float64{}
		}
		for k, v := range st.Work {
			sum[k] += v
		}
	}
	return sum
}

// stopForProfiles stops every member with SIGTERM, so that each writes
// its CPU profile, and names the profiles after the members' roles.
func stopForProfiles(t *testing.T, ms []*member, res Result) {
	var wg sync.WaitGroup
	for _, m := range ms {
		wg.Go(func() { _ = m.proc.Cmd.Process.Signal(syscall.SIGTERM); m.proc.Wait(60 * time.Second) })
	}
	wg.Wait()
	for i, m := range ms {
		named := strings.TrimSuffix(m.profile, ".pprof") + "-" + res.Members[i].Role + ".pprof"
		if err := os.Rename(m.profile, named); err != nil {
			t.Logf("profile of member %d: %v", m.id, err)
		}
	}
}

// fileName is s with every character but letters, digits, '.' and '-'
// made '_'.
func fileName(s string) string {
	return strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '-' {
			return r
		}
		return '_'
	}, s)
}

// selfCPU is the CPU time this process (the producers) has used.
func selfCPU(t *testing.T) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		t.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func pct(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[min(len(sorted)-1, int(p*float64(len(sorted))))]
}

func us(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }

func formatResult(r Result) string {
	var b strings.Builder
	fmt.Fprintf(&b, "round %d  %-28s %8.0f msgs/s  p50 %6.2f ms  p99 %6.2f ms  errors %d  client %5.1f µs/msg |",
		r.Round, r.Config, r.PerSecond, r.P50us/1000, r.P99us/1000, r.Errors, r.ClientCPUus)
	for _, m := range r.Members {
		fmt.Fprintf(&b, "  m%d %s %.1f µs/msg (%.2f CPU", m.ID, m.Role, m.CPUusPerMsg, m.CPUs)
		if m.Throttled > 0 {
			fmt.Fprintf(&b, ", throttled %.0f%%", 100*m.Throttled)
		}
		if w := m.Work; w != nil {
			fmt.Fprintf(&b, "; per msg: %.2f rounds, %.3f log syncs, %.3f entries, %.2f raft msgs out, %.2f in", w["rounds"], w["log_syncs"], w["entries_written"], w["messages_sent"], w["messages_received"])
		}
		b.WriteString(")")
	}
	if r.LeaderChanged {
		b.WriteString("  (the leader changed during the window)")
	}
	return b.String()
}

// summarize is the report over rounds: per configuration the median and
// range of its throughput and p99 as ratios to the first configuration
// of the same round, and the median CPU per message by role.
func summarize(o options, results []Result) string {
	var b strings.Builder
	base := o.targets[0].Spec
	byRound := map[int]Result{}
	for _, r := range results {
		if r.Config == base {
			byRound[r.Round] = r
		}
	}
	capped := "not capped"
	if o.cpus > 0 {
		capped = fmt.Sprintf("each member capped at %v CPU", o.cpus)
	}
	fmt.Fprintf(&b, "%d rounds of %v, %d producers, %d-byte sync sends, %s; ratios to %q in the same round (median, range)\n",
		o.rounds, o.duration, o.producers, o.size, capped, base)
	for _, tg := range o.targets {
		var tput, ratio, p99, p99r, lead, fol, folMin, folMax, single []float64
		for _, r := range results {
			if r.Config != tg.Spec {
				continue
			}
			tput = append(tput, r.PerSecond)
			p99 = append(p99, r.P99us/1000)
			if bs, ok := byRound[r.Round]; ok {
				ratio = append(ratio, r.PerSecond/bs.PerSecond)
				p99r = append(p99r, r.P99us/bs.P99us)
			}
			var fs []float64
			for _, m := range r.Members {
				switch m.Role {
				case "leader":
					lead = append(lead, m.CPUusPerMsg)
				case "follower":
					fs = append(fs, m.CPUusPerMsg)
				default:
					single = append(single, m.CPUusPerMsg)
				}
			}
			if len(fs) > 0 {
				fol = append(fol, mean(fs))
				folMin = append(folMin, slices.Min(fs))
				folMax = append(folMax, slices.Max(fs))
			}
		}
		fmt.Fprintf(&b, "%-28s %s msgs/s, ratio %s; p99 %s ms, ratio %s", tg.Spec, stat(tput, "%.0f"), stat(ratio, "%.2f"), stat(p99, "%.2f"), stat(p99r, "%.2f"))
		if len(single) > 0 {
			fmt.Fprintf(&b, "; CPU %s µs/msg", stat(single, "%.1f"))
		}
		if len(lead) > 0 {
			fmt.Fprintf(&b, "; leader %s µs/msg, followers %s (least %s, most %s)", stat(lead, "%.1f"), stat(fol, "%.1f"), stat(folMin, "%.1f"), stat(folMax, "%.1f"))
			l, f, n := median(lead), median(fol), float64(tg.Members)
			// Each message costs its group's leader L and each other
			// replica F; with as many balanced groups as members, every
			// member carries (L + (n-1)F)/n per message of the cluster.
			fmt.Fprintf(&b, "; balanced over %d groups: n·L/(L+(n-1)·F) = %.2fx one group", tg.Members, n*l/(l+(n-1)*f))
		}
		b.WriteString("\n")
	}
	return b.String()
}

func mean(v []float64) float64 {
	s := 0.0
	for _, x := range v {
		s += x
	}
	return s / float64(len(v))
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s)%2 == 0 {
		return (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	return s[len(s)/2]
}

// stat is "median (min–max)" of v in format f.
func stat(v []float64, f string) string {
	if len(v) == 0 {
		return "—"
	}
	if len(v) == 1 {
		return fmt.Sprintf(f, v[0])
	}
	return fmt.Sprintf(f+" ("+f+"–"+f+")", median(v), slices.Min(v), slices.Max(v))
}
