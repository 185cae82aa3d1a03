package bench

import (
	"bufio"
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/pprof"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/types/known/durationpb"

	v2 "github.com/mqgate/mqgate/gen/apache/rocketmq/v2"
	"github.com/mqgate/mqgate/sdk"
)

const benchUsage = `Usage: mqgate bench produce|consume|e2e|http|remoting [flags]

Measures mqgate against a plain gRPC echo server (same calls, same payloads,
no work) started in the same run, and prints each figure as a ratio to it.
Without --server, bench starts its own mqgate (a child process on a temporary
data dir) so it can also measure the server's CPU per message.

  produce  N producers on N connections, one message per SendMessage call
           (--batch M: M messages per call)
  consume  receive (batch 32) + one batched ack per batch from a backlog;
           the ack of a batch overlaps the next receive (--pipeline-acks);
           --ack-batch M splits each batch's acks into calls of M handles,
           each awaited before the next (--ack-batch 1 --pipeline-acks=false:
           every ack on its own, after the receive)
  e2e      send at a fixed rate while consumers long-poll; send→receive latency
           (the echo relays each sent message to a receive through memory;
           the ratio is the echo's p99 over mqgate's)
  http     produce over gRPC, then over REST (HTTP/1.1 keep-alive), same server
  remoting produce over gRPC, then over classic remoting, same server

--rounds N runs the echo and mqgate N times, alternated, and reports the
round with the median ratio with every round listed:
this machine's noise moves a single run by ±10 % or more.

produce and consume run two echoes (--echo both, the default): the v2 echo,
which decodes each request and encodes each response as any v2 server must,
and the plain echo, which answers with responses encoded once at start
without decoding anything (the floor of a gRPC call). --echo v2|plain runs
one of them.

produce --sdk-linger D sends with mqgate's Go SDK instead, each producer
batching on its own (ProducerConfig.Linger D, --sdk-batch messages at most)
with up to --sdk-window messages in flight; against the v2 echo only.

produce and consume also report calls per second and server CPU per call
(consume's calls are its receives and acks), the echo making the same calls.

`

type benchOpts struct {
	mode      string
	server    string
	serverPID int
	producers int
	consumers int
	size      int
	duration  time.Duration
	warmup    time.Duration
	backlog   int
	rate      int
	flush     string
	topic     string
	group     string
	jsonOut   bool
	rounds    int
	// ownNames: topic and group are the bench's random defaults, not the
	// user's (who may have created them on a server without auto-create).
	ownNames bool

	// echo: which echoes run beside mqgate (v2, plain or both).
	echo string
	// sdkLinger, when set, makes produce send with the SDK's batching
	// producer; sdkBatch and sdkWindow are its batch bound and the
	// messages each producer keeps in flight.
	sdkLinger time.Duration
	sdkBatch  int
	sdkWindow int

	pipelineAcks bool
	// batch is the messages per SendMessage (produce); ackBatch the
	// receipt handles per AckMessage (consume).
	batch    int
	ackBatch int
}

// receiveBatchSize is the batch size of the bench's receives.
const receiveBatchSize = 32

func Cmd(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 && args[0] == "echo-server" {
		return benchEchoServer(args[1:], stdout, stderr)
	}
	if len(args) == 0 || strings.HasPrefix(args[0], "-") {
		fmt.Fprint(stderr, benchUsage)
		return 2
	}
	o := benchOpts{mode: args[0]}
	fs := flag.NewFlagSet("mqgate bench "+o.mode, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.server, "server", "", "an already running mqgate (host:port, plaintext gRPC); default: start one")
	fs.IntVar(&o.serverPID, "server-pid", 0, "pid of --server, to measure its CPU")
	fs.IntVar(&o.producers, "producers", 16, "producers, one connection each")
	fs.IntVar(&o.consumers, "consumers", 4, "consumers, one connection each")
	fs.IntVar(&o.size, "size", 1024, "message body bytes")
	fs.DurationVar(&o.duration, "duration", 10*time.Second, "measured time per run")
	fs.DurationVar(&o.warmup, "warmup", 2*time.Second, "unmeasured warm-up per run")
	fs.IntVar(&o.backlog, "backlog", 200000, "consume: messages preloaded before consuming")
	fs.IntVar(&o.rate, "rate", 5000, "e2e: messages per second sent")
	fs.StringVar(&o.flush, "flush", "async", "flush policy of the mqgate bench starts (async|sync)")
	fs.StringVar(&o.topic, "topic", "", "topic (default bench-<mode>-<random>)")
	fs.StringVar(&o.group, "group", "", "consumer group (default bench-<random>)")
	fs.BoolVar(&o.jsonOut, "json", false, "print results as JSON")
	fs.IntVar(&o.rounds, "rounds", 1, "produce|consume|e2e: runs of the echo and of mqgate, alternated; the round with the median ratio is reported")
	fs.BoolVar(&o.pipelineAcks, "pipeline-acks", true, "consume: ack a batch while receiving the next (one ack in flight per consumer)")
	fs.IntVar(&o.batch, "batch", 1, "produce: messages per SendMessage call")
	fs.IntVar(&o.ackBatch, "ack-batch", receiveBatchSize, "consume: receipt handles per AckMessage call, each call awaited before the next (at most the receive batch of 32 counts)")
	fs.StringVar(&o.echo, "echo", "both", "produce|consume: the echoes run beside mqgate: v2 (decodes and encodes the v2 messages), plain (answers without decoding) or both")
	fs.DurationVar(&o.sdkLinger, "sdk-linger", 0, "produce: send with the SDK's batching producer, lingering this long (0: plain SendMessage calls)")
	fs.IntVar(&o.sdkBatch, "sdk-batch", sdk.DefaultBatchMessages, "produce --sdk-linger: most messages per batch")
	fs.IntVar(&o.sdkWindow, "sdk-window", 256, "produce --sdk-linger: messages each producer keeps in flight")
	accessKey := fs.String("access-key", os.Getenv("MQGATE_ACCESS_KEY"), "produce|consume|e2e: sign every call as this user, for a --server running with --auth-file (env MQGATE_ACCESS_KEY; the secret comes from MQGATE_SECRET_KEY)")
	if err := fs.Parse(args[1:]); err != nil {
		return 2
	}
	if *accessKey != "" {
		benchSigner = sdk.Credentials(*accessKey, os.Getenv("MQGATE_SECRET_KEY"))
	}
	switch o.mode {
	case "produce", "consume", "e2e", "http", "remoting":
	default:
		fmt.Fprintf(stderr, "mqgate bench: unknown mode %q\n\n%s", o.mode, benchUsage)
		return 2
	}
	if o.batch < 1 || o.batch != 1 && o.mode != "produce" {
		fmt.Fprintf(stderr, "mqgate bench: --batch must be 1 or more, and 1 in %s mode\n", o.mode)
		return 2
	}
	if o.ackBatch < 1 || o.ackBatch != receiveBatchSize && o.mode != "consume" {
		fmt.Fprintf(stderr, "mqgate bench: --ack-batch must be 1 or more, and is for consume mode only\n")
		return 2
	}
	o.ackBatch = min(o.ackBatch, receiveBatchSize)
	switch o.echo {
	case "v2", "plain", "both":
	default:
		fmt.Fprintf(stderr, "mqgate bench: --echo is v2, plain or both\n")
		return 2
	}
	if o.sdkLinger < 0 || o.sdkLinger > 0 && (o.mode != "produce" || o.batch != 1) || o.sdkBatch < 1 || o.sdkWindow < 1 {
		fmt.Fprintf(stderr, "mqgate bench: --sdk-linger is for produce without --batch, with --sdk-batch and --sdk-window of 1 or more\n")
		return 2
	}
	if o.rounds < 1 || o.rounds > 1 && (o.mode == "http" || o.mode == "remoting") {
		fmt.Fprintf(stderr, "mqgate bench: --rounds must be 1 or more, and 1 in %s mode\n", o.mode)
		return 2
	}
	suffix := randHex(4)
	o.ownNames = o.topic == "" && o.group == ""
	if o.topic == "" {
		o.topic = "bench-" + o.mode + "-" + suffix
	}
	if o.group == "" {
		o.group = "bench-" + suffix
	}
	// The same diagnostic hook as serve's, for the load generator itself.
	if path := os.Getenv("MQGATE_TEST_BENCH_CPUPROFILE"); path != "" {
		if f, err := os.Create(path); err == nil && pprof.StartCPUProfile(f) == nil {
			defer func() { pprof.StopCPUProfile(); f.Close() }()
		}
	}
	res, err := runBench(ctx, o, stderr)
	if err != nil {
		fmt.Fprintf(stderr, "mqgate bench: %v\n", err)
		return 1
	}
	if o.jsonOut {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		_ = enc.Encode(res)
	} else {
		printBench(stdout, o, res)
	}
	return 0
}

// Figures is one run's measurements.
type Figures struct {
	Target      string  `json:"target"`
	Messages    int64   `json:"messages"`
	Seconds     float64 `json:"seconds"`
	PerSecond   float64 `json:"msgs_per_sec"`
	P50us       float64 `json:"p50_us"`
	P99us       float64 `json:"p99_us"`
	P999us      float64 `json:"p999_us"`
	CPUusPerMsg float64 `json:"server_cpu_us_per_msg,omitempty"`
	// BenchCPUusPerMsg is the load generator's own CPU per message: it
	// runs on the same cores as the server.
	BenchCPUusPerMsg float64 `json:"bench_cpu_us_per_msg,omitempty"`
	Errors           int64   `json:"errors"`
	RSSAnonMiB       float64 `json:"server_rss_anon_mib,omitempty"`
	// SendP50us and SendP99us (e2e) are the sends' own latencies, from
	// the call to its answer; P50us and P99us are send to receive there.
	SendP50us float64 `json:"send_p50_us,omitempty"`
	SendP99us float64 `json:"send_p99_us,omitempty"`

	// Calls counts the RPCs of the measured window (consume: receives
	// and acks; AckCalls the acks among them), with their rate and the
	// server's CPU per call.
	Calls          int64   `json:"calls,omitempty"`
	CallsPerSecond float64 `json:"calls_per_sec,omitempty"`
	CPUusPerCall   float64 `json:"server_cpu_us_per_call,omitempty"`
	AckCalls       int64   `json:"ack_calls,omitempty"`
	// Batch is the messages per SendMessage (produce), AckBatch the
	// receipt handles per AckMessage (consume) this run used.
	Batch    int `json:"batch,omitempty"`
	AckBatch int `json:"ack_batch,omitempty"`
}

// Result is a bench's outcome. With --rounds > 1, Echo, Mqgate and
// Ratio are those of the round with the median ratio (e2e: the median
// p99) and Rounds holds every round in the order run.
type Result struct {
	Mode  string `json:"mode"`
	Flush string `json:"flush,omitempty"`
	// Round holds the figures (its fields are the result's own in JSON).
	Round
	Rounds []Round `json:"rounds,omitempty"`
}

// Round is one run of each echo and the mqgate run right after them.
// PlainEcho is the plain echo's run (--echo plain|both); PlainRatio is
// mqgate's msgs/s over the plain echo's; the CPU ratios are mqgate's
// server CPU per call (per message when calls are not counted) over each
// echo's.
type Round struct {
	Echo          *Figures `json:"echo,omitempty"`
	PlainEcho     *Figures `json:"plain_echo,omitempty"`
	Mqgate        Figures  `json:"mqgate"`
	Ratio         float64  `json:"ratio_to_echo,omitempty"`
	PlainRatio    float64  `json:"ratio_to_plain_echo,omitempty"`
	CPURatio      float64  `json:"cpu_ratio_to_echo,omitempty"`
	PlainCPURatio float64  `json:"cpu_ratio_to_plain_echo,omitempty"`
}

// cpuRatio is m's server CPU per call over base's (per message when
// either counted no calls), 0 when either is unknown.
func cpuRatio(m Figures, base *Figures) float64 {
	switch {
	case base == nil:
		return 0
	case m.CPUusPerCall > 0 && base.CPUusPerCall > 0:
		return m.CPUusPerCall / base.CPUusPerCall
	case m.CPUusPerMsg > 0 && base.CPUusPerMsg > 0:
		return m.CPUusPerMsg / base.CPUusPerMsg
	}
	return 0
}

func printBench(w io.Writer, o benchOpts, r Result) {
	fmt.Fprintf(w, "mode %s, %d-byte messages", r.Mode, o.size)
	if r.Flush != "" {
		fmt.Fprintf(w, ", mqgate flush %s", r.Flush)
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, "%-8s %12s %10s %10s %10s %14s %14s %8s\n", "target", "msgs/s", "p50", "p99", "p999", "srv CPU/msg", "bench CPU/msg", "errors")
	row := func(f Figures) {
		us := func(v float64) string {
			if v <= 0 {
				return "-"
			}
			return fmt.Sprintf("%.1fµs", v)
		}
		fmt.Fprintf(w, "%-8s %12.0f %9.0fµs %9.0fµs %9.0fµs %14s %14s %8d\n", f.Target, f.PerSecond, f.P50us, f.P99us, f.P999us, us(f.CPUusPerMsg), us(f.BenchCPUusPerMsg), f.Errors)
	}
	if r.Echo != nil {
		row(*r.Echo)
	}
	if r.PlainEcho != nil {
		row(*r.PlainEcho)
	}
	row(r.Mqgate)
	if r.PlainEcho != nil && r.PlainRatio > 0 {
		fmt.Fprintf(w, "ratio mqgate/plain-echo msgs/s: %.2f\n", r.PlainRatio)
	}
	if r.Echo != nil {
		base := "echo"
		if r.Mode == "http" || r.Mode == "remoting" {
			base = "grpc"
		}
		if r.Mode == "e2e" {
			fmt.Fprintf(w, "sends' own latency p50/p99: echo %.0f/%.0fµs, mqgate %.0f/%.0fµs\n", r.Echo.SendP50us, r.Echo.SendP99us, r.Mqgate.SendP50us, r.Mqgate.SendP99us)
			fmt.Fprintf(w, "ratio echo/mqgate p99: %.2f\n", r.Ratio)
		} else {
			fmt.Fprintf(w, "ratio %s/%s msgs/s: %.2f\n", r.Mqgate.Target, base, r.Ratio)
		}
	}
	if (r.Mode == "produce" || r.Mode == "consume") && r.Mqgate.Calls > 0 {
		printCalls(w, r)
	}
	if r.CPURatio > 0 && r.Mqgate.Calls == 0 {
		fmt.Fprintf(w, "ratio mqgate/echo srv CPU/msg: %.2f\n", r.CPURatio)
	}
	if r.Mqgate.RSSAnonMiB > 0 {
		fmt.Fprintf(w, "mqgate anonymous (non-file-backed) memory after the run: %.1f MiB\n", r.Mqgate.RSSAnonMiB)
	}
	if len(r.Rounds) > 1 {
		fmt.Fprintf(w, "%d rounds (echo then mqgate, alternated); the rows above are the median round:\n", len(r.Rounds))
		for i, rd := range r.Rounds {
			fmt.Fprintf(w, "  round %d:", i+1)
			if rd.Echo != nil {
				fmt.Fprintf(w, " echo %.0f msgs/s %.1fµs/msg p99 %.0fµs,", rd.Echo.PerSecond, rd.Echo.CPUusPerMsg, rd.Echo.P99us)
			}
			if rd.PlainEcho != nil {
				fmt.Fprintf(w, " plain-echo %.0f msgs/s %.1fµs/msg,", rd.PlainEcho.PerSecond, rd.PlainEcho.CPUusPerMsg)
			}
			fmt.Fprintf(w, " mqgate %.0f msgs/s %.1fµs/msg p99 %.0fµs", rd.Mqgate.PerSecond, rd.Mqgate.CPUusPerMsg, rd.Mqgate.P99us)
			if rd.Echo != nil {
				fmt.Fprintf(w, ", ratio %.2f", rd.Ratio)
			}
			if (r.Mode == "produce" || r.Mode == "consume") && rd.Mqgate.CPUusPerCall > 0 {
				fmt.Fprintf(w, "; srv CPU/call")
				if rd.Echo != nil {
					fmt.Fprintf(w, " echo %.1fµs,", rd.Echo.CPUusPerCall)
				}
				fmt.Fprintf(w, " mqgate %.1fµs", rd.Mqgate.CPUusPerCall)
			}
			if rd.CPURatio > 0 {
				fmt.Fprintf(w, "; CPU ratio to echo %.2f", rd.CPURatio)
			}
			if rd.PlainCPURatio > 0 {
				fmt.Fprintf(w, ", to plain-echo %.2f", rd.PlainCPURatio)
			}
			fmt.Fprintln(w)
		}
	}
}

// printCalls prints the per-call figures of produce and consume.
func printCalls(w io.Writer, r Result) {
	what := fmt.Sprintf("%d message(s) per SendMessage", r.Mqgate.Batch)
	if r.Mode == "consume" {
		what = fmt.Sprintf("receives of up to %d, acks of up to %d handle(s)", receiveBatchSize, r.Mqgate.AckBatch)
	}
	fmt.Fprintf(w, "calls: %s\n", what)
	fmt.Fprintf(w, "%-8s %12s %12s %10s %14s\n", "target", "calls/s", "ack calls/s", "msgs/call", "srv CPU/call")
	row := func(f Figures) {
		acks, perCall, cpu := "-", "-", "-"
		if f.AckCalls > 0 && f.Seconds > 0 {
			acks = fmt.Sprintf("%.0f", float64(f.AckCalls)/f.Seconds)
		}
		if f.Calls > 0 {
			perCall = fmt.Sprintf("%.2f", float64(f.Messages)/float64(f.Calls))
		}
		if f.CPUusPerCall > 0 {
			cpu = fmt.Sprintf("%.1fµs", f.CPUusPerCall)
		}
		fmt.Fprintf(w, "%-8s %12.0f %12s %10s %14s\n", f.Target, f.CallsPerSecond, acks, perCall, cpu)
	}
	if r.Echo != nil {
		row(*r.Echo)
	}
	if r.PlainEcho != nil {
		row(*r.PlainEcho)
	}
	row(r.Mqgate)
	if r.Echo != nil && r.Echo.CPUusPerCall > 0 && r.Mqgate.CPUusPerCall > 0 {
		fmt.Fprintf(w, "ratio mqgate/echo srv CPU/call: %.2f\n", r.Mqgate.CPUusPerCall/r.Echo.CPUusPerCall)
	}
	if r.PlainEcho != nil && r.PlainEcho.CPUusPerCall > 0 && r.Mqgate.CPUusPerCall > 0 {
		fmt.Fprintf(w, "ratio mqgate/plain-echo srv CPU/call: %.2f\n", r.Mqgate.CPUusPerCall/r.PlainEcho.CPUusPerCall)
	}
}

func randHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// child is a process bench started.
type child struct {
	cmd            *exec.Cmd
	addr           string
	http, remoting string
	dir            string
}

func (c *child) stop() {
	if c == nil || c.cmd.Process == nil {
		return
	}
	_ = c.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { _ = c.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(15 * time.Second):
		_ = c.cmd.Process.Kill()
		<-done
	}
	if c.dir != "" {
		_ = os.RemoveAll(c.dir)
	}
}

func startEcho(o benchOpts, plain bool) (*child, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	args := []string{"bench", "echo-server", "--size", strconv.Itoa(o.size)}
	if o.mode == "e2e" {
		args = append(args, "--relay")
	}
	if plain {
		args = append(args, "--plain", "--batch", strconv.Itoa(max(o.batch, 1)), "--ack-batch", strconv.Itoa(max(o.ackBatch, 1)))
	}
	cmd := exec.Command(self, args...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		_ = cmd.Process.Kill()
		return nil, fmt.Errorf("echo server did not start: %w", err)
	}
	return &child{cmd: cmd, addr: strings.TrimSpace(line)}, nil
}

func startMqgate(flush string, remoting bool) (*child, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "mqgate-bench-")
	if err != nil {
		return nil, err
	}
	remAddr := ""
	if remoting {
		remAddr = "127.0.0.1:0"
	}
	cmd := exec.Command(self, "serve", "--data-dir", filepath.Join(dir, "data"), "--grpc-addr", "127.0.0.1:0",
		"--http-addr", "127.0.0.1:0", "--metrics-addr", "", "--remoting-addr", remAddr, "--flush", flush, "--auto-create", "--log-level", "info",
		"--log-format", "json", "--segment-size", "256MiB")
	errp, err := cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	c := &child{cmd: cmd, dir: dir}
	sc := bufio.NewScanner(errp)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var m map[string]any
		if json.Unmarshal(sc.Bytes(), &m) != nil {
			continue
		}
		if m["msg"] == "mqgate ready" {
			c.addr, _ = m["grpc"].(string)
			c.http, _ = m["http"].(string)
			c.remoting, _ = m["remoting"].(string)
			go func() { _, _ = io.Copy(io.Discard, errp) }()
			return c, nil
		}
		if m["level"] == "ERROR" {
			c.stop()
			return nil, fmt.Errorf("mqgate failed to start: %s", sc.Text())
		}
	}
	c.stop()
	return nil, errors.New("mqgate exited before it was ready")
}

// cpuTicks reads a process's user+system CPU in clock ticks (1/100 s).
func cpuTicks(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	f := strings.Fields(s[i+2:])
	if len(f) < 13 {
		return 0, errors.New("short /proc stat")
	}
	u, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return u + st, nil
}

func rssAnonMiB(pid int) float64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, "RssAnon:") {
			f := strings.Fields(line)
			kb, _ := strconv.ParseFloat(f[1], 64)
			return kb / 1024
		}
	}
	return 0
}

func runBench(ctx context.Context, o benchOpts, log io.Writer) (Result, error) {
	res := Result{Mode: o.mode}
	if o.mode == "http" || o.mode == "remoting" {
		if o.server != "" {
			return res, fmt.Errorf("%s mode starts its own mqgate (it needs its HTTP and remoting addresses); drop --server", o.mode)
		}
		srv, err := startMqgate(o.flush, o.mode == "remoting")
		if err != nil {
			return res, err
		}
		defer srv.stop()
		fmt.Fprintf(log, "bench: mqgate gRPC at %s\n", srv.addr)
		return benchOtherProtocol(ctx, o, srv, log)
	}
	// The v2 echo unless only the plain one is asked for; the plain one
	// where it can answer the workload's calls (not e2e's relay, not the
	// SDK's batches of any size).
	var echo, plain *child
	plainFits := (o.mode == "produce" || o.mode == "consume") && o.sdkLinger == 0
	if o.echo != "plain" || !plainFits {
		e, err := startEcho(o, false)
		if err != nil {
			return res, err
		}
		defer e.stop()
		echo = e
	}
	if o.echo != "v2" && plainFits {
		e, err := startEcho(o, true)
		if err != nil {
			return res, err
		}
		defer e.stop()
		plain = e
	}
	target, pid := o.server, o.serverPID
	if target == "" {
		srv, err := startMqgate(o.flush, false)
		if err != nil {
			return res, err
		}
		defer srv.stop()
		target, pid = srv.addr, srv.cmd.Process.Pid
		res.Flush = o.flush
	}
	for i := range o.rounds {
		ro := o
		if i > 0 && o.mode == "consume" && o.ownNames {
			// Each consume round on its own topic and group, so from its
			// own backlog. Named ones are kept (they may have to exist
			// already): their rounds preload onto what is left.
			ro.topic = fmt.Sprintf("%s-r%d", o.topic, i+1)
			ro.group = fmt.Sprintf("%s-r%d", o.group, i+1)
		}
		rd, err := benchOneRound(ctx, ro, echo, plain, target, pid, log)
		if err != nil {
			return res, err
		}
		res.Rounds = append(res.Rounds, rd)
	}
	m := medianRound(res.Rounds)
	res.Round = m
	if len(res.Rounds) == 1 {
		res.Rounds = nil
	}
	return res, nil
}

// benchOneRound runs the workload against the echo (when there is one),
// then against mqgate.
func benchOneRound(ctx context.Context, o benchOpts, echo, plain *child, target string, pid int, log io.Writer) (Round, error) {
	var rd Round
	if echo != nil {
		fmt.Fprintf(log, "bench: echo server at %s\n", echo.addr)
		f, err := runWorkload(ctx, o, "echo", echo.addr, echo.cmd.Process.Pid, log)
		if err != nil {
			return rd, fmt.Errorf("echo run: %w", err)
		}
		rd.Echo = &f
	}
	if plain != nil {
		fmt.Fprintf(log, "bench: plain echo server at %s\n", plain.addr)
		f, err := runWorkload(ctx, o, "plain", plain.addr, plain.cmd.Process.Pid, log)
		if err != nil {
			return rd, fmt.Errorf("plain echo run: %w", err)
		}
		rd.PlainEcho = &f
	}
	fmt.Fprintf(log, "bench: mqgate at %s\n", target)
	f, err := runWorkload(ctx, o, "mqgate", target, pid, log)
	if err != nil {
		return rd, fmt.Errorf("mqgate run: %w", err)
	}
	if pid > 0 {
		f.RSSAnonMiB = rssAnonMiB(pid)
	}
	rd.Mqgate = f
	rd.CPURatio, rd.PlainCPURatio = cpuRatio(f, rd.Echo), cpuRatio(f, rd.PlainEcho)
	if rd.PlainEcho != nil && rd.PlainEcho.PerSecond > 0 {
		rd.PlainRatio = f.PerSecond / rd.PlainEcho.PerSecond
	}
	if rd.Echo == nil && rd.PlainEcho != nil {
		// --echo plain: the plain echo is the ratio's base.
		rd.Ratio = rd.PlainRatio
	}
	switch {
	case rd.Echo == nil:
	case o.mode == "e2e":
		// Both run at the same rate: the figure is latency, the echo's
		// p99 over mqgate's (1 = as fast as relaying through memory).
		if f.P99us > 0 {
			rd.Ratio = rd.Echo.P99us / f.P99us
		}
	case rd.Echo.PerSecond > 0:
		rd.Ratio = f.PerSecond / rd.Echo.PerSecond
	}
	return rd, nil
}

// medianRound is the round with the median ratio to the echo (the lower
// middle one of an even count).
func medianRound(rounds []Round) Round {
	sorted := slices.Clone(rounds)
	slices.SortStableFunc(sorted, func(a, b Round) int { return cmp.Compare(a.Ratio, b.Ratio) })
	return sorted[(len(sorted)-1)/2]
}

// benchConn is one client connection with mqgate's required headers.
type benchConn struct {
	cc  *grpc.ClientConn
	cli v2.MessagingServiceClient
	md  metadata.MD
}

// benchSigner, when set (--access-key), signs every gRPC bench call; the
// echo gets the same headers, so both sides pay for them. (The http and
// remoting modes start their own mqgate, without auth.)
var benchSigner credentials.PerRPCCredentials

func dialBench(addr string, i int) (*benchConn, error) {
	opts := []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(64 << 20))}
	if benchSigner != nil {
		opts = append(opts, grpc.WithPerRPCCredentials(benchSigner))
	}
	cc, err := grpc.NewClient(addr, opts...)
	if err != nil {
		return nil, err
	}
	return &benchConn{cc: cc, cli: v2.NewMessagingServiceClient(cc),
		md: metadata.Pairs("x-mq-client-id", fmt.Sprintf("bench@%d@%d", os.Getpid(), i), "x-mq-language", "GO", "x-mq-protocol", "v2")}, nil
}

func (c *benchConn) ctx(parent context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithTimeout(parent, d)
	return metadata.NewOutgoingContext(ctx, c.md), cancel
}

// dialAll dials n connections with client ids first, first+1, ...;
// closeAll closes them.
func dialAll(addr string, first, n int) (conns []*benchConn, closeAll func(), err error) {
	closeAll = func() {
		for _, c := range conns {
			_ = c.cc.Close()
		}
	}
	for i := range n {
		c, err := dialBench(addr, first+i)
		if err != nil {
			closeAll()
			return nil, nil, err
		}
		conns = append(conns, c)
	}
	return conns, closeAll, nil
}

// payloadErr is a call's error, or its payload status when that is not OK.
func payloadErr(st *v2.Status, err error) error {
	if err == nil && st.GetCode() != v2.Code_OK {
		err = fmt.Errorf("status %v", st)
	}
	return err
}

func runWorkload(ctx context.Context, o benchOpts, name, addr string, pid int, log io.Writer) (Figures, error) {
	switch o.mode {
	case "produce":
		if o.sdkLinger > 0 {
			return benchProduceSDK(ctx, o, name, addr, pid)
		}
		return benchProduce(ctx, o, name, addr, pid)
	case "consume":
		return benchConsume(ctx, o, name, addr, pid, log)
	default:
		return benchE2E(ctx, o, name, addr, pid)
	}
}

func newMessage(topic string, body []byte, seq int64, props map[string]string) *v2.Message {
	return &v2.Message{
		Topic:          &v2.Resource{Name: topic},
		UserProperties: props,
		SystemProperties: &v2.SystemProperties{
			MessageId:    fmt.Sprintf("01BENC%028X", seq),
			MessageType:  v2.MessageType_NORMAL,
			BodyEncoding: v2.Encoding_IDENTITY,
			BornHost:     "bench",
		},
		Body: body,
	}
}

var benchSeq atomic.Int64

// sampler collects a run's counts and latencies; it records only while
// on (after the warm-up, until the end of the measured window).
type sampler struct {
	mu    sync.Mutex
	lat   []time.Duration
	count atomic.Int64
	calls atomic.Int64
	acks  atomic.Int64
	errs  atomic.Int64
	on    atomic.Bool
	// own is the bench process's CPU ticks in the measured window (set
	// by window): the load generator shares the machine's cores.
	own int64
}

func (s *sampler) add(local []time.Duration) {
	s.mu.Lock()
	s.lat = append(s.lat, local...)
	s.mu.Unlock()
}

func (s *sampler) figures(name string, secs float64, cpu int64) Figures {
	sort.Slice(s.lat, func(i, j int) bool { return s.lat[i] < s.lat[j] })
	pct := func(p float64) float64 {
		if len(s.lat) == 0 {
			return 0
		}
		return float64(s.lat[min(int(float64(len(s.lat))*p), len(s.lat)-1)].Microseconds())
	}
	f := Figures{Target: name, Messages: s.count.Load(), Seconds: secs, Errors: s.errs.Load(),
		P50us: pct(0.50), P99us: pct(0.99), P999us: pct(0.999)}
	f.Calls, f.AckCalls = s.calls.Load(), s.acks.Load()
	if secs > 0 {
		f.PerSecond = float64(f.Messages) / secs
		f.CallsPerSecond = float64(f.Calls) / secs
	}
	if cpu > 0 && f.Messages > 0 {
		f.CPUusPerMsg = float64(cpu) * 10000 / float64(f.Messages) // ticks are 10 ms
	}
	if cpu > 0 && f.Calls > 0 {
		f.CPUusPerCall = float64(cpu) * 10000 / float64(f.Calls)
	}
	if s.own > 0 && f.Messages > 0 {
		f.BenchCPUusPerMsg = float64(s.own) * 10000 / float64(f.Messages)
	}
	return f
}

// window runs the measured part: it flips the sampler on after warm-up and
// returns the measured seconds and server CPU ticks. The window ends
// early when drained closes (a consumed backlog ran out): the figures
// then cover the time the backlog lasted, not idle polling after it.
func window(ctx context.Context, o benchOpts, s *sampler, pid int, drained <-chan struct{}) (float64, int64) {
	select {
	case <-time.After(o.warmup):
	case <-ctx.Done():
	case <-drained:
	}
	c0, _ := cpuTicks(pid)
	o0, _ := cpuTicks(os.Getpid())
	t0 := time.Now()
	s.on.Store(true)
	select {
	case <-time.After(o.duration):
	case <-ctx.Done():
	case <-drained:
	}
	s.on.Store(false)
	secs := time.Since(t0).Seconds()
	c1, _ := cpuTicks(pid)
	if o1, err := cpuTicks(os.Getpid()); err == nil && o0 > 0 {
		s.own = o1 - o0
	}
	if pid <= 0 {
		return secs, 0
	}
	return secs, c1 - c0
}

// opCount is what one operation of a closed loop did: the messages it
// moved, the RPCs it made and the AckMessage calls among them.
type opCount struct{ msgs, calls, acks int }

// loopOp is one operation of a closed loop.
type loopOp func(context.Context) (opCount, error)

// closedLoop runs every op on its own goroutine, one call after the
// other, for warm-up + duration. Operations that end inside the
// measured window are counted (opCount) with their latency, or as
// errors. drained (nil: never) ends the window early.
func closedLoop(ctx context.Context, o benchOpts, name string, pid int, ops []loopOp, drained <-chan struct{}) Figures {
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	var wg sync.WaitGroup
	s := &sampler{}
	for _, op := range ops {
		wg.Add(1)
		go func() {
			defer wg.Done()
			local := make([]time.Duration, 0, 1<<15)
			for runCtx.Err() == nil {
				t0 := time.Now()
				n, err := op(runCtx)
				d := time.Since(t0)
				if !s.on.Load() {
					continue
				}
				if err != nil {
					if runCtx.Err() == nil {
						s.errs.Add(1)
					}
					continue
				}
				s.count.Add(int64(n.msgs))
				s.calls.Add(int64(n.calls))
				s.acks.Add(int64(n.acks))
				local = append(local, d)
			}
			s.add(local)
		}()
	}
	secs, cpu := window(ctx, o, s, pid, drained)
	stop()
	wg.Wait()
	return s.figures(name, secs, cpu)
}

func benchProduce(ctx context.Context, o benchOpts, name, addr string, pid int) (Figures, error) {
	conns, closeAll, err := dialAll(addr, 0, o.producers)
	if err != nil {
		return Figures{}, err
	}
	defer closeAll()
	body := make([]byte, o.size)
	batch := max(o.batch, 1)
	ops := make([]loopOp, len(conns))
	for i, c := range conns {
		ops[i] = func(ctx context.Context) (opCount, error) {
			msgs := make([]*v2.Message, batch)
			for j := range msgs {
				msgs[j] = newMessage(o.topic, body, benchSeq.Add(1), nil)
			}
			cctx, cancel := c.ctx(ctx, 5*time.Second)
			defer cancel()
			resp, err := c.cli.SendMessage(cctx, &v2.SendMessageRequest{Messages: msgs})
			if err = payloadErr(resp.GetStatus(), err); err == nil && len(resp.GetEntries()) != batch {
				err = fmt.Errorf("%d send results for %d messages", len(resp.GetEntries()), batch)
			}
			return opCount{msgs: batch, calls: 1}, err
		}
	}
	f := closedLoop(ctx, o, name, pid, ops, nil)
	f.Batch = batch
	return f, nil
}

// preload fills the topic with n messages (batches of 32 from 8 senders).
func preload(ctx context.Context, o benchOpts, addr string, n int, log io.Writer) error {
	body := make([]byte, o.size)
	var next atomic.Int64
	var wg sync.WaitGroup
	errc := make(chan error, 8)
	t0 := time.Now()
	conns, closeAll, err := dialAll(addr, 100, 8)
	if err != nil {
		return err
	}
	defer closeAll()
	for _, c := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				start := next.Add(32) - 32
				if start >= int64(n) {
					return
				}
				cnt := min(int64(32), int64(n)-start)
				msgs := make([]*v2.Message, cnt)
				for i := range msgs {
					msgs[i] = newMessage(o.topic, body, benchSeq.Add(1), nil)
				}
				cctx, cancel := c.ctx(ctx, 30*time.Second)
				resp, err := c.cli.SendMessage(cctx, &v2.SendMessageRequest{Messages: msgs})
				cancel()
				if err := payloadErr(resp.GetStatus(), err); err != nil {
					errc <- fmt.Errorf("preload send: %w", err)
					return
				}
			}
		}()
	}
	wg.Wait()
	select {
	case err := <-errc:
		return err
	default:
	}
	fmt.Fprintf(log, "bench: preloaded %d messages in %s\n", n, time.Since(t0).Round(time.Millisecond))
	return nil
}

// receiveBatch does one ReceiveMessage call and returns the messages.
func receiveBatch(ctx context.Context, c *benchConn, o benchOpts, wait time.Duration) ([]*v2.Message, error) {
	cctx, cancel := c.ctx(ctx, wait+5*time.Second)
	defer cancel()
	st, err := c.cli.ReceiveMessage(cctx, &v2.ReceiveMessageRequest{
		Group:              &v2.Resource{Name: o.group},
		MessageQueue:       &v2.MessageQueue{Topic: &v2.Resource{Name: o.topic}, Id: -1},
		FilterExpression:   &v2.FilterExpression{Type: v2.FilterType_TAG, Expression: "*"},
		BatchSize:          receiveBatchSize,
		InvisibleDuration:  durationpb.New(30 * time.Second),
		LongPollingTimeout: durationpb.New(wait),
	})
	if err != nil {
		return nil, err
	}
	var out []*v2.Message
	for {
		r, err := st.Recv()
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		if m := r.GetMessage(); m != nil {
			out = append(out, m)
		}
	}
}

func ackBatch(ctx context.Context, c *benchConn, o benchOpts, msgs []*v2.Message) error {
	entries := make([]*v2.AckMessageEntry, len(msgs))
	for i, m := range msgs {
		entries[i] = &v2.AckMessageEntry{MessageId: m.GetSystemProperties().GetMessageId(), ReceiptHandle: m.GetSystemProperties().GetReceiptHandle()}
	}
	cctx, cancel := c.ctx(ctx, 5*time.Second)
	defer cancel()
	resp, err := c.cli.AckMessage(cctx, &v2.AckMessageRequest{Group: &v2.Resource{Name: o.group}, Topic: &v2.Resource{Name: o.topic}, Entries: entries})
	if err := payloadErr(resp.GetStatus(), err); err != nil {
		return fmt.Errorf("ack: %w", err)
	}
	return nil
}

// ackAll acknowledges msgs in AckMessage calls of at most o.ackBatch
// handles, each awaited before the next.
func ackAll(ctx context.Context, c *benchConn, o benchOpts, msgs []*v2.Message) error {
	for n := ackCalls(o, len(msgs)); n > 0; n-- {
		k := min(len(msgs), max(o.ackBatch, 1))
		if err := ackBatch(ctx, c, o, msgs[:k]); err != nil {
			return err
		}
		msgs = msgs[k:]
	}
	return nil
}

// ackCalls is the number of AckMessage calls ackAll makes for n messages.
func ackCalls(o benchOpts, n int) int {
	b := max(o.ackBatch, 1)
	return (n + b - 1) / b
}

func benchConsume(ctx context.Context, o benchOpts, name, addr string, pid int, log io.Writer) (Figures, error) {
	if name == "mqgate" {
		if err := preload(ctx, o, addr, o.backlog, log); err != nil {
			return Figures{}, err
		}
	}
	conns, closeAll, err := dialAll(addr, 200, o.consumers)
	if err != nil {
		return Figures{}, err
	}
	defer closeAll()
	// The window ends when the last preloaded message has been received
	// (or a receive comes back empty), so the rate is the backlog's drain
	// rate, not diluted by long polls on an empty topic (with a
	// long-polling timeout of 0 mqgate waits up to the call's deadline).
	drained := make(chan struct{})
	var drainOnce sync.Once
	var received atomic.Int64
	ops := make([]loopOp, len(conns))
	acks := make([]chan error, len(conns))
	for i, c := range conns {
		// With pipelined acks a consumer acknowledges batch n while it
		// receives batch n+1 (at most one ack in flight per consumer); an
		// ack's error is reported by the consumer's next operation.
		acked := make(chan error, 1)
		acked <- nil
		acks[i] = acked
		ops[i] = func(ctx context.Context) (opCount, error) {
			msgs, err := receiveBatch(ctx, c, o, 0)
			n := opCount{msgs: len(msgs), calls: 1}
			if o.pipelineAcks {
				if aerr := <-acked; err == nil {
					err = aerr
				}
				if len(msgs) > 0 {
					// Counted when started; an error shows in the next
					// operation.
					n.acks = ackCalls(o, len(msgs))
					go func() { acked <- ackAll(ctx, c, o, msgs) }()
				} else {
					acked <- nil
				}
			} else if err == nil && len(msgs) > 0 {
				n.acks = ackCalls(o, len(msgs))
				err = ackAll(ctx, c, o, msgs)
			}
			n.calls += n.acks
			if name == "mqgate" && (received.Add(int64(len(msgs))) >= int64(o.backlog) || len(msgs) == 0 && err == nil) {
				drainOnce.Do(func() { close(drained) })
			}
			return n, err
		}
	}
	f := closedLoop(ctx, o, name, pid, ops, drained)
	f.AckBatch = max(o.ackBatch, 1)
	for _, a := range acks {
		<-a // the last pipelined ack, before the connections close
	}
	select {
	case <-drained:
		if f.Messages == 0 {
			return f, fmt.Errorf("the backlog of %d messages ran out during the warm-up; raise --backlog or lower --warmup", o.backlog)
		}
		fmt.Fprintf(log, "bench: the backlog ran out after %.1f s of the measured window; the figures cover that time\n", f.Seconds)
	default:
	}
	return f, nil
}

func benchE2E(ctx context.Context, o benchOpts, name, addr string, pid int) (Figures, error) {
	prod, err := dialBench(addr, 300)
	if err != nil {
		return Figures{}, err
	}
	defer prod.cc.Close()
	body := make([]byte, o.size)
	// Create topic and group (auto-create) and let consumers park first.
	warm := newMessage(o.topic, body, benchSeq.Add(1), map[string]string{"bench_sent_ns": "0"})
	cctx, cancel := prod.ctx(ctx, 10*time.Second)
	if _, err := prod.cli.SendMessage(cctx, &v2.SendMessageRequest{Messages: []*v2.Message{warm}}); err != nil {
		cancel()
		return Figures{}, err
	}
	cancel()
	consumers, closeConsumers, err := dialAll(addr, 310, max(o.consumers, 1))
	if err != nil {
		return Figures{}, err
	}
	defer closeConsumers()
	senders, closeSenders, err := dialAll(addr, 301, 3)
	if err != nil {
		return Figures{}, err
	}
	defer closeSenders()
	senders = append(senders, prod)
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	var wg sync.WaitGroup
	s := &sampler{}
	for _, c := range consumers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var local []time.Duration
			for runCtx.Err() == nil {
				msgs, err := receiveBatch(runCtx, c, o, 2*time.Second)
				now := time.Now()
				if err != nil || len(msgs) == 0 {
					continue
				}
				for _, m := range msgs {
					ns, _ := strconv.ParseInt(m.UserProperties["bench_sent_ns"], 10, 64)
					if ns > 0 && s.on.Load() {
						local = append(local, now.Sub(time.Unix(0, ns)))
						s.count.Add(1)
					}
				}
				_ = ackBatch(runCtx, c, o, msgs)
			}
			s.add(local)
		}()
	}
	// Paced sender: one message every 1/rate seconds, from enough
	// goroutines (over 4 connections) that the rate does not depend on
	// one call's latency.
	interval := time.Second / time.Duration(max(o.rate, 1))
	start := time.Now()
	var sent atomic.Int64
	sends := &sampler{}
	for w := 0; w < 32; w++ {
		prod := senders[w%len(senders)]
		wg.Add(1)
		go func() {
			defer wg.Done()
			var local []time.Duration
			defer func() { sends.add(local) }()
			for runCtx.Err() == nil {
				k := sent.Add(1)
				due := start.Add(time.Duration(k) * interval)
				if d := time.Until(due); d > 0 {
					time.Sleep(d)
				}
				m := newMessage(o.topic, body, benchSeq.Add(1), map[string]string{"bench_sent_ns": strconv.FormatInt(time.Now().UnixNano(), 10)})
				cctx, cancel := prod.ctx(runCtx, 5*time.Second)
				t0 := time.Now()
				resp, err := prod.cli.SendMessage(cctx, &v2.SendMessageRequest{Messages: []*v2.Message{m}})
				d := time.Since(t0)
				cancel()
				if payloadErr(resp.GetStatus(), err) != nil {
					if runCtx.Err() == nil && s.on.Load() {
						s.errs.Add(1)
					}
				} else if s.on.Load() {
					local = append(local, d)
				}
			}
		}()
	}
	secs, cpu := window(ctx, o, s, pid, nil)
	stop()
	wg.Wait()
	f := s.figures(name, secs, cpu)
	sf := sends.figures(name, secs, 0)
	f.SendP50us, f.SendP99us = sf.P50us, sf.P99us
	return f, nil
}
