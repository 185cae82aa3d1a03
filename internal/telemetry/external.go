package telemetry

import (
	"context"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/instrumentation"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
)

// Histogram is a cumulative histogram aggregated elsewhere (the store
// keeps its own latency histograms without importing OpenTelemetry).
// Counts has one more element than Bounds: Counts[i] counts values up to
// Bounds[i], the last one everything above.
type Histogram struct {
	Bounds []float64
	Counts []uint64
	Count  uint64
	Sum    float64
	// Min and Max are exported when HasMinMax.
	Min, Max  float64
	HasMinMax bool
}

// HistogramSource describes one externally aggregated histogram. Snapshot
// (or Points) is called at every collection (a /metrics scrape, an OTLP
// export) and must be cheap and safe for concurrent use.
type HistogramSource struct {
	// Scope is the instrumentation scope (usually the package path), and
	// SchemaURL its schema (optional).
	Scope       string
	SchemaURL   string
	Name        string
	Unit        string
	Description string
	Attributes  []attribute.KeyValue
	Snapshot    func() Histogram
	// Points, used when Snapshot is nil, returns one histogram per
	// attribute set (a metric with several series); Attributes is then
	// unused.
	Points func() []HistogramPoint
}

// HistogramPoint is one series of a HistogramSource's Points.
type HistogramPoint struct {
	Attributes attribute.Set
	Histogram
}

// External is a set of externally aggregated histograms and an
// sdk/metric Producer: both readers of a Telemetry (Prometheus and OTLP)
// pull its histograms beside the SDK's own instruments. NewExternal makes
// one for a reader of one's own (tests).
type External = externalMetrics

// NewExternal returns an empty set.
func NewExternal() *External { return newExternalMetrics() }

// externalMetrics is External.
type externalMetrics struct {
	mu      sync.Mutex
	sources []*registeredSource
}

type registeredSource struct {
	HistogramSource
	start time.Time
	attrs attribute.Set
}

func newExternalMetrics() *externalMetrics { return &externalMetrics{} }

// AddHistogram exports src until the returned function is called.
func (t *Telemetry) AddHistogram(src HistogramSource) (remove func()) { return t.external.Add(src) }

// Add exports src until the returned function is called.
func (m *externalMetrics) Add(src HistogramSource) (remove func()) {
	rs := &registeredSource{HistogramSource: src, start: time.Now(), attrs: attribute.NewSet(src.Attributes...)}
	m.mu.Lock()
	m.sources = append(m.sources, rs)
	m.mu.Unlock()
	return func() {
		m.mu.Lock()
		defer m.mu.Unlock()
		for i, s := range m.sources {
			if s == rs {
				m.sources = append(m.sources[:i:i], m.sources[i+1:]...)
				return
			}
		}
	}
}

// Produce implements sdk/metric.Producer.
func (m *externalMetrics) Produce(context.Context) ([]metricdata.ScopeMetrics, error) {
	m.mu.Lock()
	sources := append([]*registeredSource(nil), m.sources...)
	m.mu.Unlock()
	if len(sources) == 0 {
		return nil, nil
	}
	now := time.Now()
	byScope := map[instrumentation.Scope]int{}
	var out []metricdata.ScopeMetrics
	for _, s := range sources {
		var points []HistogramPoint
		if s.Snapshot != nil {
			points = []HistogramPoint{{Attributes: s.attrs, Histogram: s.Snapshot()}}
		} else if s.Points != nil {
			points = s.Points()
		}
		var dps []metricdata.HistogramDataPoint[float64]
		for _, p := range points {
			h := p.Histogram
			if len(h.Counts) != len(h.Bounds)+1 {
				continue // malformed: never export a lie
			}
			// The source's counters are read one by one while writers go
			// on: make the total agree with the buckets.
			h.Count = 0
			for _, c := range h.Counts {
				h.Count += c
			}
			dp := metricdata.HistogramDataPoint[float64]{
				Attributes: p.Attributes, StartTime: s.start, Time: now,
				Count: h.Count, Bounds: h.Bounds, BucketCounts: h.Counts, Sum: h.Sum,
			}
			if h.HasMinMax {
				dp.Min, dp.Max = metricdata.NewExtrema(h.Min), metricdata.NewExtrema(h.Max)
			}
			dps = append(dps, dp)
		}
		if len(dps) == 0 {
			continue
		}
		scope := instrumentation.Scope{Name: s.Scope, SchemaURL: s.SchemaURL}
		i, ok := byScope[scope]
		if !ok {
			i = len(out)
			byScope[scope] = i
			out = append(out, metricdata.ScopeMetrics{Scope: scope})
		}
		out[i].Metrics = append(out[i].Metrics, metricdata.Metrics{
			Name: s.Name, Description: s.Description, Unit: s.Unit,
			Data: metricdata.Histogram[float64]{Temporality: metricdata.CumulativeTemporality, DataPoints: dps},
		})
	}
	return out, nil
}
