package remoting

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/mqgate/mqgate/broker"
	"github.com/mqgate/mqgate/gateway/remoting/codec"
)

// reqGetBrokerRuntimeInfo is GET_BROKER_RUNTIME_INFO (mqadmin clusterList
// and brokerStatus, the dashboard's cluster page).
const reqGetBrokerRuntimeInfo = 28

// rateEvery is how often runtime samples the broker's message counters;
// rates are given over 10 s, 1 min and 10 min, as upstream's brokers give
// them.
const rateEvery = 10 * time.Second

var rateWindows = []time.Duration{10 * time.Second, time.Minute, 10 * time.Minute}

// runtime keeps what GET_BROKER_RUNTIME_INFO reports that the broker does
// not: recent samples of the stored and delivered totals (for rates), and
// the totals at the last two local midnights (upstream's "morning"
// figures; 0 for a midnight before the process started, when the totals
// were 0 anyway).
type runtime struct {
	mu      sync.Mutex
	samples []sample // oldest first, at most 10 min + one
	day     string   // local date of the last sample
	today   [2]int64 // put, get at the last midnight passed
	yest    [2]int64 // at the one before
}

type sample struct {
	at       time.Time
	put, get int64
	// delivered: each group's deliveries from each topic, kept for the
	// samples inside tpsWindow (GET_CONSUME_STATS's consumeTps).
	delivered map[broker.GroupTopic]int64
}

// tpsWindow is the window of a group's consumeTps, upstream's per-minute
// figure.
const tpsWindow = time.Minute

// add records the totals at now.
func (r *runtime) add(now time.Time, put, get int64, delivered map[broker.GroupTopic]int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	day := now.Format(time.DateOnly)
	if r.day != "" && day != r.day {
		// The first sample after a midnight stands for it (10 s late
		// at most).
		r.yest, r.today = r.today, [2]int64{put, get}
	}
	r.day = day
	r.samples = append(r.samples, sample{now, put, get, delivered})
	keep := rateWindows[len(rateWindows)-1] + rateEvery
	for len(r.samples) > 1 && now.Sub(r.samples[0].at) > keep {
		r.samples = r.samples[1:]
	}
	for i := range r.samples {
		if now.Sub(r.samples[i].at) <= tpsWindow+rateEvery {
			break
		}
		r.samples[i].delivered = nil
	}
}

// consumeTps is the rate (messages/s) at which group was given messages
// from topic (from every topic when topic is ""), over tpsWindow: from
// the oldest sample inside it to now's counts; 0 with no such sample.
func (r *runtime) consumeTps(now time.Time, delivered map[broker.GroupTopic]int64, group, topic string) float64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, s := range r.samples {
		d := now.Sub(s.at)
		if d > tpsWindow+rateEvery/2 || d <= 0 || s.delivered == nil {
			continue
		}
		var n int64
		for k, v := range delivered {
			if k.Group == group && (topic == "" || k.Topic == topic) {
				n += v - s.delivered[k]
			}
		}
		return float64(n) / d.Seconds()
	}
	return 0
}

// rates formats the put and get rates (messages/s) over each window,
// measured from the oldest sample inside it to now's totals; with no
// sample old enough, over the span there is.
func (r *runtime) rates(now time.Time, put, get int64) (string, string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var ps, gs string
	for i, w := range rateWindows {
		var p, g float64
		for _, s := range r.samples {
			if d := now.Sub(s.at); d <= w+rateEvery/2 && d > 0 {
				p, g = float64(put-s.put)/d.Seconds(), float64(get-s.get)/d.Seconds()
				break
			}
		}
		if i > 0 {
			ps, gs = ps+" ", gs+" "
		}
		ps += strconv.FormatFloat(p, 'f', 2, 64)
		gs += strconv.FormatFloat(g, 'f', 2, 64)
	}
	return ps, gs
}

func (s *Server) runtimeLoop(ctx context.Context) {
	for {
		put, get := s.b.MessageTotals()
		s.rt.add(s.cfg.Clock.Now(), put, get, s.b.DeliveredCounts())
		t := s.cfg.Clock.NewTimer(rateEvery)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C():
		}
	}
}

// runtimeInfo answers GET_BROKER_RUNTIME_INFO with a KVTable of the
// figures mqgate keeps. Keys upstream fills from parts mqgate does not
// have (thread-pool queues, page-cache lock time, timer wheel) are left
// out rather than made up; the tools print them as absent.
func (s *Server) runtimeInfo(ctx context.Context, c *conn, req *codec.Command) *codec.Command {
	now := s.cfg.Clock.Now()
	st := s.b.RuntimeStats()
	putTps, getTps := s.rt.rates(now, st.Put, st.Get)
	s.rt.mu.Lock()
	today, yest := s.rt.today, s.rt.yest
	s.rt.mu.Unlock()
	i := strconv.FormatInt
	table := map[string]string{
		"brokerVersion":               strconv.Itoa(Version),
		"brokerVersionDesc":           "V5_3_3",
		"bootTimestamp":               i(st.Started.UnixMilli(), 10),
		"runtime":                     runtimeSince(now.Sub(st.Started)),
		"msgPutTotalTodayNow":         i(st.Put, 10),
		"msgGetTotalTodayNow":         i(st.Get, 10),
		"msgPutTotalTodayMorning":     i(today[0], 10),
		"msgGetTotalTodayMorning":     i(today[1], 10),
		"msgPutTotalYesterdayMorning": i(yest[0], 10),
		"msgGetTotalYesterdayMorning": i(yest[1], 10),
		"putTps":                      putTps,
		"getTransferedTps":            getTps,
		"commitLogMinOffset":          i(st.LogMin, 10),
		"commitLogMaxOffset":          i(st.Written, 10),
		"remainHowManyDataToFlush":    humanBytes(st.FlushLag),
		"earliestMessageTimeStamp":    i(st.EarliestStoreTime, 10),
	}
	if st.DiskTotal > 0 {
		table["commitLogDiskRatio"] = strconv.FormatFloat(float64(st.DiskTotal-st.DiskFree)/float64(st.DiskTotal), 'f', 4, 64)
		table["commitLogDirCapacity"] = fmt.Sprintf("Total : %s, Free : %s.", humanBytes(int64(st.DiskTotal)), humanBytes(int64(st.DiskFree)))
	}
	body, err := json.Marshal(struct {
		Table map[string]string `json:"table"`
	}{table})
	if err != nil {
		return s.fail(ctx, err)
	}
	return &codec.Command{Code: codeSuccess, Body: body}
}

// humanBytes writes n as upstream's brokers do (1023 B, 1.0 KiB, 3.5 GiB).
func humanBytes(n int64) string {
	if n < 1024 {
		return strconv.FormatInt(n, 10) + " B"
	}
	v, unit := float64(n), ""
	for _, u := range []string{"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"} {
		v /= 1024
		unit = u
		if v < 1024 {
			break
		}
	}
	return strconv.FormatFloat(v, 'f', 1, 64) + " " + unit
}

// runtimeSince writes an uptime as upstream's brokers do.
func runtimeSince(d time.Duration) string {
	d = max(d, 0)
	days := int64(d / (24 * time.Hour))
	d -= time.Duration(days) * 24 * time.Hour
	h, m, sec := int64(d/time.Hour), int64(d/time.Minute)%60, int64(d/time.Second)%60
	return fmt.Sprintf("[ %d days, %d hours, %d minutes, %d seconds ]", days, h, m, sec)
}
