package broker

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/mqgate/mqgate/broker/model"
	"github.com/mqgate/mqgate/storage"
	"github.com/mqgate/mqgate/storage/vfs"
)

// BenchmarkSendObserved measures Broker.Send (1 KiB, in-memory store)
// bare, with metrics only (mqgate's default: Prometheus, no exporter), and
// with spans recorded, so the ratios show what observability costs.
func BenchmarkSendObserved(b *testing.B) {
	for _, v := range []struct {
		name   string
		meters bool
		tracer string
	}{{"bare", false, ""}, {"metrics", true, ""}, {"metrics+noop-tracer", true, "noop"}, {"metrics+spans", true, "sdk"}} {
		b.Run(v.name, func(b *testing.B) {
			st, err := storage.Open("/data", storage.Options{FS: vfs.NewMem(), SegmentSize: 256 << 20, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
			if err != nil {
				b.Fatal(err)
			}
			cfg := Config{PopSnapshotInterval: time.Hour, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
			if v.meters {
				cfg.Meters = sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
			}
			switch v.tracer {
			case "noop":
				cfg.Tracers = noop.NewTracerProvider()
			case "sdk":
				cfg.Tracers = sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(tracetest.NewSpanRecorder()))
			}
			br, err := Open(context.Background(), cfg, st)
			if err != nil {
				b.Fatal(err)
			}
			defer func() {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				_ = br.Close(ctx)
				_ = st.Close(ctx)
			}()
			if _, err := br.CreateTopic(context.Background(), model.Topic{Name: "bench", Type: model.TopicNormal}); err != nil {
				b.Fatal(err)
			}
			body := make([]byte, 1024)
			ctx := context.Background()
			b.SetBytes(1024)
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				res, err := br.Send(ctx, "bench", []*model.Message{{Topic: "bench", ID: fmt.Sprint(i), Body: body}}, model.Producer{})
				if err != nil || res[0].Err != nil {
					b.Fatal(err, res)
				}
			}
		})
	}
}
