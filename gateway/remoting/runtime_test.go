package remoting

import (
	"encoding/json"
	"fmt"
	goruntime "runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/metric/noop"

	"github.com/mqgate/mqgate/broker"
)

// Rates over 10 s, 1 min and 10 min come from the samples inside each
// window (the span there is when none is old enough); the first sample
// after a local midnight becomes "today morning", the one before it
// "yesterday morning".
func TestRuntimeRatesAndMornings(t *testing.T) {
	var r runtime
	t0 := time.Date(2026, 12, 1, 23, 58, 0, 0, time.Local)
	if p, g := r.rates(t0, 0, 0); p != "0.00 0.00 0.00" || g != "0.00 0.00 0.00" {
		t.Fatalf("no samples: %q %q", p, g)
	}
	// 100 messages stored and 50 delivered every 10 s, for 2 minutes.
	for i := range 13 {
		r.add(t0.Add(time.Duration(i)*rateEvery), int64(100*i), int64(50*i), nil)
	}
	now := t0.Add(12 * rateEvery)
	if p, g := r.rates(now, 1200, 600); p != "10.00 10.00 10.00" || g != "5.00 5.00 5.00" {
		t.Fatalf("steady rates: %q %q", p, g)
	}
	// A burst of 300 in the last 10 s shows in the short window first.
	if p, _ := r.rates(now.Add(rateEvery), 1500, 600); p != "30.00 13.33 11.54" {
		t.Fatalf("after a burst: %q", p)
	}
	// 23:58 + 12 × 10 s = 00:00: the last sample is the new day's first.
	if r.today != [2]int64{1200, 600} || r.yest != [2]int64{} {
		t.Fatalf("mornings: today %v, yesterday %v", r.today, r.yest)
	}
	next := now.Add(24 * time.Hour)
	r.add(next, 9000, 4000, nil)
	if r.today != [2]int64{9000, 4000} || r.yest != [2]int64{1200, 600} {
		t.Fatalf("a day later: today %v, yesterday %v", r.today, r.yest)
	}
	if len(r.samples) != 1 {
		t.Fatalf("%d samples kept after a day, want 1", len(r.samples))
	}
}

// consumeTps: a group's deliveries over the last minute, from one topic or
// from all; samples older than the minute keep no per-group counts.
func TestConsumeTps(t *testing.T) {
	var r runtime
	t0 := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	a, b, other := broker.GroupTopic{Group: "CG", Topic: "A"}, broker.GroupTopic{Group: "CG", Topic: "B"}, broker.GroupTopic{Group: "OG", Topic: "A"}
	counts := func(i int) map[broker.GroupTopic]int64 {
		// CG takes 30 a second from A and 10 from B; OG 1000 from A.
		s := int64(i) * int64(rateEvery/time.Second)
		return map[broker.GroupTopic]int64{a: 30 * s, b: 10 * s, other: 1000 * s}
	}
	if got := r.consumeTps(t0, counts(0), "CG", ""); got != 0 {
		t.Fatalf("no sample: %v", got)
	}
	for i := range 13 {
		r.add(t0.Add(time.Duration(i)*rateEvery), 0, 0, counts(i))
	}
	now := t0.Add(13 * rateEvery)
	for _, c := range []struct {
		group, topic string
		want         float64
	}{{"CG", "", 40}, {"CG", "A", 30}, {"CG", "B", 10}, {"OG", "", 1000}, {"NOPE", "", 0}} {
		if got := r.consumeTps(now, counts(13), c.group, c.topic); got != c.want {
			t.Errorf("%s/%q: %v, want %v", c.group, c.topic, got, c.want)
		}
	}
	// A group that stopped consuming is at 0 again a minute later.
	for i := 14; i <= 26; i++ {
		r.add(t0.Add(time.Duration(i)*rateEvery), 0, 0, counts(13))
	}
	if got := r.consumeTps(t0.Add(26*rateEvery), counts(13), "CG", ""); got != 0 {
		t.Errorf("idle: %v", got)
	}
	now = t0.Add(26 * rateEvery)
	for i, s := range r.samples {
		if old := now.Sub(s.at) > tpsWindow+2*rateEvery; old && s.delivered != nil {
			t.Fatalf("sample %d (%v old) keeps its per-group counts", i, now.Sub(s.at))
		}
	}
	for f, want := range map[float64]string{0: "0.0", 12: "12.0", 12.5: "12.5", 1.0 / 3: "0.3333333333333333"} {
		if got := jsonDouble(f); got != want {
			t.Errorf("jsonDouble(%v) = %s, want %s", f, got, want)
		}
	}
}

// awaitSamples waits until the runtime sampler has taken n samples.
func (e *env) awaitSamples(n int) {
	for {
		e.s.rt.mu.Lock()
		k := len(e.s.rt.samples)
		e.s.rt.mu.Unlock()
		if k >= n {
			return
		}
		goruntime.Gosched()
	}
}

// GET_BROKER_RUNTIME_INFO: the KVTable mqadmin clusterList parses, with
// the totals counting classic sends and pulls; GET_CONSUME_STATS's
// consumeTps from the same sampler.
func TestBrokerRuntimeInfo(t *testing.T) {
	e := newEnv(t, func(_ *Config, b *broker.Config) { b.Meters = noop.NewMeterProvider() })
	boot := strconv.FormatInt(e.clk.Now().UnixMilli(), 10)
	c := e.dial()
	e.createTopic(c, "T", 1, "")
	for i := range 3 {
		e.must(e.send(c, "T", 0, fmt.Sprint("m", i), ""), codeSuccess)
	}
	e.awaitSamples(1)
	e.must(e.pull(c, "CG", "T", 0, 0), codeSuccess)
	e.clk.Advance(rateEvery)
	// The sampler's next sample, taken here: its timer may not be armed
	// yet (the loop arms it after each sample).
	put, get := e.b.MessageTotals()
	e.s.rt.add(e.clk.Now(), put, get, e.b.DeliveredCounts())
	r := e.must(e.call(c, reqGetConsumeStats, map[string]string{"consumerGroup": "CG", "topic": "T"}, nil), codeSuccess)
	if !strings.HasPrefix(string(r.Body), `{"consumeTps":0.3,`) {
		t.Fatalf("3 messages pulled in 10 s: %s", r.Body)
	}
	r = e.must(e.call(c, reqGetBrokerRuntimeInfo, nil, nil), codeSuccess)
	var kv struct{ Table map[string]string }
	if err := json.Unmarshal(r.Body, &kv); err != nil {
		t.Fatalf("%v: %s", err, r.Body)
	}
	tb := kv.Table
	for k, want := range map[string]string{"msgPutTotalTodayNow": "3", "msgGetTotalTodayNow": "3", "brokerVersionDesc": "V5_3_3",
		"bootTimestamp": boot, "earliestMessageTimeStamp": boot,
		"msgPutTotalTodayMorning": "0", "msgGetTotalYesterdayMorning": "0", "commitLogMinOffset": "0"} {
		if tb[k] != want {
			t.Errorf("%s = %q, want %q", k, tb[k], want)
		}
	}
	for _, k := range []string{"putTps", "getTransferedTps"} {
		f := strings.Fields(tb[k])
		if len(f) != 3 {
			t.Fatalf("%s = %q, want three rates", k, tb[k])
		}
		for _, v := range f {
			if _, err := strconv.ParseFloat(v, 64); err != nil {
				t.Fatalf("%s = %q: %v", k, tb[k], err)
			}
		}
	}
	if n, err := strconv.ParseInt(tb["commitLogMaxOffset"], 10, 64); err != nil || n <= 0 {
		t.Errorf("commitLogMaxOffset %q", tb["commitLogMaxOffset"])
	}
}

func TestHumanBytes(t *testing.T) {
	for n, want := range map[int64]string{0: "0 B", 1023: "1023 B", 1024: "1.0 KiB", 3 << 29: "1.5 GiB"} {
		if got := humanBytes(n); got != want {
			t.Errorf("humanBytes(%d) = %q, want %q", n, got, want)
		}
	}
}
