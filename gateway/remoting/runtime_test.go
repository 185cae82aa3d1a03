package remoting

import (
	"encoding/json"
	"fmt"
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
		r.add(t0.Add(time.Duration(i)*rateEvery), int64(100*i), int64(50*i))
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
	r.add(next, 9000, 4000)
	if r.today != [2]int64{9000, 4000} || r.yest != [2]int64{1200, 600} {
		t.Fatalf("a day later: today %v, yesterday %v", r.today, r.yest)
	}
	if len(r.samples) != 1 {
		t.Fatalf("%d samples kept after a day, want 1", len(r.samples))
	}
}

// GET_BROKER_RUNTIME_INFO: the KVTable mqadmin clusterList parses, with
// the totals counting classic sends and pulls.
func TestBrokerRuntimeInfo(t *testing.T) {
	e := newEnv(t, func(_ *Config, b *broker.Config) { b.Meters = noop.NewMeterProvider() })
	c := e.dial()
	e.createTopic(c, "T", 1, "")
	for i := range 3 {
		e.must(e.send(c, "T", 0, fmt.Sprint("m", i), ""), codeSuccess)
	}
	e.must(e.pull(c, "CG", "T", 0, 0), codeSuccess)
	r := e.must(e.call(c, reqGetBrokerRuntimeInfo, nil, nil), codeSuccess)
	var kv struct{ Table map[string]string }
	if err := json.Unmarshal(r.Body, &kv); err != nil {
		t.Fatalf("%v: %s", err, r.Body)
	}
	tb := kv.Table
	for k, want := range map[string]string{"msgPutTotalTodayNow": "3", "msgGetTotalTodayNow": "3", "brokerVersionDesc": "V5_3_3",
		"bootTimestamp": strconv.FormatInt(e.clk.Now().UnixMilli(), 10), "earliestMessageTimeStamp": strconv.FormatInt(e.clk.Now().UnixMilli(), 10),
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
