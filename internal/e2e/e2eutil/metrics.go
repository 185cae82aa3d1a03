package e2eutil

import (
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/mqgate/mqgate/internal/testutil"
)

// ScrapeMetrics reads p's /metrics (Prometheus text).
func ScrapeMetrics(t testing.TB, p *testutil.Proc) string {
	t.Helper()
	resp, err := http.Get("http://" + p.Metrics + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(body)
}

// MetricValue is the value of the first series of name in a Prometheus
// text body whose labels include every one of labels (a series without
// labels matches none asked).
func MetricValue(body, name string, labels map[string]string) (float64, bool) {
	for _, line := range strings.Split(body, "\n") {
		rest, ok := strings.CutPrefix(line, name)
		if !ok {
			continue
		}
		set, value := "", ""
		switch {
		case strings.HasPrefix(rest, "{"):
			var found bool
			set, value, found = strings.Cut(rest[1:], "} ")
			if !found {
				continue
			}
		case strings.HasPrefix(rest, " "):
			value = rest[1:]
		default:
			continue // another metric whose name starts with name
		}
		match := true
		for k, v := range labels {
			if !strings.Contains(","+set+",", ","+k+"=\""+v+"\",") {
				match = false
				break
			}
		}
		if !match {
			continue
		}
		f, err := strconv.ParseFloat(strings.TrimSpace(value), 64)
		return f, err == nil
	}
	return 0, false
}
