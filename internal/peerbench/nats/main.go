// Command natspeer measures NATS JetStream's pipelined async publish
// beside `mqgate bench produce --sdk-linger` in the same run: the peer
// shape for mqgate's SDK batching.
//
//	cd internal/peerbench/nats && GOWORK=off go run . --mqgate /path/to/mqgate --rounds 3
//
// Each round runs the NATS workload, then `mqgate bench produce
// --sdk-linger` (mqgate's own echo and server as that command runs them),
// and reports both with the ratio of mqgate's msgs/s to NATS's. The NATS
// workload: an embedded nats-server (a child process of this program, so
// its CPU is measured apart from the load generator's) with JetStream on
// a temporary directory and a file-stored stream; N producers, each on its
// own connection, publish 1 KiB messages with PublishAsync and keep up to
// --window acknowledgements pending. A message counts once its
// acknowledgement (stored in the stream) comes back inside the measured
// window. JetStream's default durability is asynchronous (an fsync every
// two minutes), like mqgate's --flush async; --sync-always is its
// SyncAlways.
//
// It is its own module so that the NATS server and client stay out of
// mqgate's dependency graph, and outside the repository's go.work (hence
// GOWORK=off): see README.md.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Figures is one run's measurements (the fields of mqgate bench's JSON
// that this comparison uses).
type Figures struct {
	Target           string  `json:"target"`
	Messages         int64   `json:"messages"`
	Seconds          float64 `json:"seconds"`
	PerSecond        float64 `json:"msgs_per_sec"`
	P50us            float64 `json:"p50_us"`
	P99us            float64 `json:"p99_us"`
	CPUusPerMsg      float64 `json:"server_cpu_us_per_msg,omitempty"`
	BenchCPUusPerMsg float64 `json:"bench_cpu_us_per_msg,omitempty"`
	Errors           int64   `json:"errors"`
}

// Round is one NATS run and the mqgate run after it.
type Round struct {
	NATS   Figures `json:"nats"`
	Mqgate Figures `json:"mqgate"`
	// Echo is the v2 echo of the mqgate command's own run.
	Echo *Figures `json:"echo,omitempty"`
	// Ratio is mqgate's msgs/s over NATS's; CPURatio mqgate's server CPU
	// per message over NATS's.
	Ratio    float64 `json:"ratio_to_nats"`
	CPURatio float64 `json:"cpu_ratio_to_nats"`
}

func main() {
	if len(os.Args) > 1 && os.Args[1] == "server" {
		os.Exit(runServer(os.Args[2:]))
	}
	var (
		mqgate     = flag.String("mqgate", "", "the mqgate binary to run `bench produce --sdk-linger` with (empty: NATS only)")
		producers  = flag.Int("producers", 16, "producers, one connection each")
		size       = flag.Int("size", 1024, "message body bytes")
		window     = flag.Int("window", 256, "acknowledgements each producer keeps pending (mqgate: --sdk-window)")
		duration   = flag.Duration("duration", 5*time.Second, "measured time per run")
		warmup     = flag.Duration("warmup", 2*time.Second, "unmeasured warm-up per run")
		rounds     = flag.Int("rounds", 1, "rounds of NATS then mqgate")
		linger     = flag.Duration("linger", time.Millisecond, "mqgate: --sdk-linger")
		syncAlways = flag.Bool("sync-always", false, "NATS: fsync every write (SyncAlways); mqgate: --flush sync")
		jsonOut    = flag.Bool("json", false, "print the rounds as JSON")
	)
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	var out []Round
	for i := range *rounds {
		var rd Round
		f, err := natsRun(ctx, *producers, *size, *window, *warmup, *duration, *syncAlways)
		if err != nil {
			fmt.Fprintln(os.Stderr, "natspeer: nats run:", err)
			os.Exit(1)
		}
		rd.NATS = f
		if *mqgate != "" {
			flush := "async"
			if *syncAlways {
				flush = "sync"
			}
			m, e, err := mqgateRun(ctx, *mqgate, *producers, *size, *window, *warmup, *duration, *linger, flush)
			if err != nil {
				fmt.Fprintln(os.Stderr, "natspeer: mqgate run:", err)
				os.Exit(1)
			}
			rd.Mqgate, rd.Echo = m, e
			if f.PerSecond > 0 {
				rd.Ratio = m.PerSecond / f.PerSecond
			}
			if f.CPUusPerMsg > 0 {
				rd.CPURatio = m.CPUusPerMsg / f.CPUusPerMsg
			}
		}
		out = append(out, rd)
		if !*jsonOut {
			fmt.Printf("round %d: nats %.0f msgs/s %.1fµs/msg p50 %.0fµs p99 %.0fµs", i+1, f.PerSecond, f.CPUusPerMsg, f.P50us, f.P99us)
			if *mqgate != "" {
				fmt.Printf("; mqgate %.0f msgs/s %.1fµs/msg p50 %.0fµs p99 %.0fµs; mqgate/nats msgs/s %.2f, CPU/msg %.2f",
					rd.Mqgate.PerSecond, rd.Mqgate.CPUusPerMsg, rd.Mqgate.P50us, rd.Mqgate.P99us, rd.Ratio, rd.CPURatio)
			}
			fmt.Println()
		}
	}
	if *jsonOut {
		enc := json.NewEncoder(os.Stdout)
		enc.SetIndent("", "  ")
		_ = enc.Encode(out)
	}
}

// runServer is the child process: an embedded nats-server with JetStream
// in dir, printing its client URL as its first line, until SIGTERM.
func runServer(args []string) int {
	fs := flag.NewFlagSet("server", flag.ExitOnError)
	dir := fs.String("dir", "", "JetStream store directory")
	syncAlways := fs.Bool("sync-always", false, "fsync every write")
	_ = fs.Parse(args)
	opts := &server.Options{Host: "127.0.0.1", Port: -1, JetStream: true, StoreDir: *dir, SyncAlways: *syncAlways,
		NoLog: true, NoSigs: true, MaxPayload: 8 << 20}
	s, err := server.NewServer(opts)
	if err != nil {
		fmt.Fprintln(os.Stderr, "nats server:", err)
		return 1
	}
	go s.Start()
	if !s.ReadyForConnections(10 * time.Second) {
		fmt.Fprintln(os.Stderr, "nats server: not ready")
		return 1
	}
	fmt.Println(s.ClientURL())
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	<-sigs
	s.Shutdown()
	s.WaitForShutdown()
	return 0
}

// startServer starts the child server on a fresh directory.
func startServer(syncAlways bool) (url string, cmd *exec.Cmd, cleanup func(), err error) {
	dir, err := os.MkdirTemp("", "natspeer-")
	if err != nil {
		return "", nil, nil, err
	}
	self, err := os.Executable()
	if err != nil {
		return "", nil, nil, err
	}
	args := []string{"server", "--dir", dir}
	if syncAlways {
		args = append(args, "--sync-always")
	}
	cmd = exec.Command(self, args...)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return "", nil, nil, err
	}
	if err := cmd.Start(); err != nil {
		return "", nil, nil, err
	}
	cleanup = func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
		_ = os.RemoveAll(dir)
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		cleanup()
		return "", nil, nil, fmt.Errorf("nats server did not start: %w", err)
	}
	return strings.TrimSpace(line), cmd, cleanup, nil
}

// natsRun is one run of the NATS workload.
func natsRun(ctx context.Context, producers, size, window int, warmup, duration time.Duration, syncAlways bool) (Figures, error) {
	url, cmd, cleanup, err := startServer(syncAlways)
	if err != nil {
		return Figures{}, err
	}
	defer cleanup()
	setup, err := nats.Connect(url)
	if err != nil {
		return Figures{}, err
	}
	js, err := jetstream.New(setup)
	if err != nil {
		return Figures{}, err
	}
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "BENCH", Subjects: []string{"bench.>"}, Storage: jetstream.FileStorage}); err != nil {
		return Figures{}, err
	}
	setup.Close()

	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	var (
		on      atomic.Bool
		count   atomic.Int64
		errs    atomic.Int64
		mu      sync.Mutex
		lat     []time.Duration
		wg      sync.WaitGroup
		connErr = make(chan error, producers)
	)
	body := make([]byte, size)
	for i := range producers {
		nc, err := nats.Connect(url)
		if err != nil {
			return Figures{}, err
		}
		defer nc.Close()
		pjs, err := jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(window))
		if err != nil {
			return Figures{}, err
		}
		type sent struct {
			f  jetstream.PubAckFuture
			t0 time.Time
		}
		// The futures in publish order; the collector waits for each
		// acknowledgement in turn (JetStream acknowledges a connection's
		// publishes in order).
		futures := make(chan sent, window)
		wg.Add(2)
		go func() {
			defer wg.Done()
			defer close(futures)
			subj := "bench." + strconv.Itoa(i)
			for runCtx.Err() == nil {
				t0 := time.Now()
				f, err := pjs.PublishAsync(subj, body)
				if err != nil {
					if runCtx.Err() == nil && on.Load() {
						errs.Add(1)
					}
					if errors.Is(err, nats.ErrConnectionClosed) {
						connErr <- err
						return
					}
					continue
				}
				futures <- sent{f, t0}
			}
		}()
		go func() {
			defer wg.Done()
			local := make([]time.Duration, 0, 1<<16)
			for s := range futures {
				select {
				case <-s.f.Ok():
					if on.Load() {
						count.Add(1)
						local = append(local, time.Since(s.t0))
					}
				case <-s.f.Err():
					if on.Load() && runCtx.Err() == nil {
						errs.Add(1)
					}
				}
			}
			mu.Lock()
			lat = append(lat, local...)
			mu.Unlock()
		}()
	}
	select {
	case <-time.After(warmup):
	case <-ctx.Done():
	}
	c0, o0 := cpuTicks(cmd.Process.Pid), cpuTicks(os.Getpid())
	t0 := time.Now()
	on.Store(true)
	select {
	case <-time.After(duration):
	case <-ctx.Done():
	case err := <-connErr:
		return Figures{}, err
	}
	on.Store(false)
	secs := time.Since(t0).Seconds()
	c1, o1 := cpuTicks(cmd.Process.Pid), cpuTicks(os.Getpid())
	stop()
	wg.Wait()
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	pct := func(p float64) float64 {
		if len(lat) == 0 {
			return 0
		}
		return float64(lat[min(int(float64(len(lat))*p), len(lat)-1)].Microseconds())
	}
	f := Figures{Target: "nats", Messages: count.Load(), Seconds: secs, Errors: errs.Load(), P50us: pct(0.5), P99us: pct(0.99)}
	if secs > 0 {
		f.PerSecond = float64(f.Messages) / secs
	}
	if f.Messages > 0 {
		f.CPUusPerMsg = float64(c1-c0) * 10000 / float64(f.Messages)
		f.BenchCPUusPerMsg = float64(o1-o0) * 10000 / float64(f.Messages)
	}
	return f, nil
}

// mqgateRun runs `mqgate bench produce --sdk-linger` with the same
// producers, size and window, and returns its mqgate and echo figures.
func mqgateRun(ctx context.Context, bin string, producers, size, window int, warmup, duration, linger time.Duration, flush string) (Figures, *Figures, error) {
	cmd := exec.CommandContext(ctx, bin, "bench", "produce", "--sdk-linger", linger.String(), "--sdk-window", strconv.Itoa(window),
		"--producers", strconv.Itoa(producers), "--size", strconv.Itoa(size), "--warmup", warmup.String(), "--duration", duration.String(),
		"--flush", flush, "--json")
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return Figures{}, nil, err
	}
	var r struct {
		Echo   *Figures `json:"echo"`
		Mqgate Figures  `json:"mqgate"`
	}
	if err := json.Unmarshal(out, &r); err != nil {
		return Figures{}, nil, fmt.Errorf("reading mqgate bench's JSON: %w", err)
	}
	return r.Mqgate, r.Echo, nil
}

// cpuTicks reads a process's user+system CPU in clock ticks (1/100 s), 0
// when it cannot.
func cpuTicks(pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	if len(f) < 13 {
		return 0
	}
	u, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return u + st
}
