package pop

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
)

// Why a parked receive woke up (the "mqgate.reason" of the pop.wake span
// event): a message arrived for the subscription, the poll's deadline
// passed, the caller went away, or the broker is draining for shutdown.
const (
	WakeArrival   = "arrival"
	WakeDeadline  = "deadline"
	WakeCancelled = "cancelled"
	WakeShutdown  = "shutdown"
)

var keyWakeReason = attribute.Key("mqgate.reason")

// noteWake records the wake reason on the receive's span (the broker's
// pop.Receive) when one is recording; otherwise it costs a context lookup.
func noteWake(ctx context.Context, why string) {
	sp := trace.SpanFromContext(ctx)
	if !sp.IsRecording() {
		return
	}
	sp.AddEvent("pop.wake", trace.WithAttributes(keyWakeReason.String(why)))
	sp.SetAttributes(attribute.String("mqgate.pop.wake_reason", why))
}
