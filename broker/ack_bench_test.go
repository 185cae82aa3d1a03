package broker

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	"github.com/mqgate/mqgate/broker/model"
	"github.com/mqgate/mqgate/storage"
)

// BenchmarkAck measures Broker.Ack of one handle at a time (the shape of
// a consumer that acknowledges each message on its own), with metrics
// on as mqgate runs: the handle's check, the journal record appended to
// the store (async flush, on disk, with the staging ring where mqgate
// puts it by default) and the bookkeeping around it. Receives of 32
// refill the handles outside the timer.
func BenchmarkAck(b *testing.B) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	dir := b.TempDir()
	st, err := storage.Open(dir+"/data", storage.Options{SegmentSize: 256 << 20, Logger: log})
	if err != nil {
		b.Fatal(err)
	}
	br, err := Open(context.Background(), Config{PopSnapshotInterval: time.Hour, Logger: log,
		Meters: sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))}, st)
	if err != nil {
		b.Fatal(err)
	}
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = br.Close(ctx)
		_ = st.Close(ctx)
	}()
	ctx := context.Background()
	const topic, group = "bench", "bench-group"
	if _, err := br.CreateTopic(ctx, model.Topic{Name: topic, Type: model.TopicNormal}); err != nil {
		b.Fatal(err)
	}
	if _, err := br.CreateGroup(ctx, model.Group{Name: group}); err != nil {
		b.Fatal(err)
	}
	body := make([]byte, 1024)
	for sent := 0; sent < b.N; {
		msgs := make([]*model.Message, min(32, b.N-sent))
		for i := range msgs {
			msgs[i] = &model.Message{Topic: topic, ID: fmt.Sprint(sent + i), Body: body}
		}
		res, err := br.Send(ctx, topic, msgs, model.Producer{})
		if err != nil || res[0].Err != nil {
			b.Fatal(err, res[0].Err)
		}
		sent += len(msgs)
	}
	if err := st.WaitDispatched(ctx, st.Answered()); err != nil {
		b.Fatal(err)
	}
	var handles []string
	one := make([]string, 1)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if len(handles) == 0 {
			b.StopTimer()
			ds, err := br.Receive(ctx, ReceiveRequest{Group: group, Topic: topic, Max: 32, Invisible: time.Minute, QueueID: -1})
			if err != nil {
				b.Fatal(err)
			}
			for _, d := range ds {
				handles = append(handles, d.ReceiptHandle)
			}
			b.StartTimer()
		}
		one[0], handles = handles[0], handles[1:]
		if errs := br.Ack(ctx, group, topic, one); errs[0] != nil {
			b.Fatal(errs[0])
		}
	}
}
