package bench

import (
	"context"
	"fmt"
	"sync"
	"time"

	"google.golang.org/grpc"

	"github.com/mqgate/mqgate/sdk"
)

// benchProduceSDK is produce --sdk-linger: o.producers producers of
// mqgate's Go SDK, each on its own connection, batching on their own
// (ProducerConfig.Linger) and keeping up to o.sdkWindow messages in
// flight with SendAsync. A message counts when its outcome comes back OK
// inside the measured window; its latency is from SendAsync to its
// outcome.
func benchProduceSDK(ctx context.Context, o benchOpts, name, addr string, pid int) (Figures, error) {
	type producer struct {
		c *sdk.Client
		p *sdk.Producer
	}
	var ps []producer
	closeAll := func() {
		cctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		for _, p := range ps {
			_ = p.c.Close(cctx)
		}
	}
	defer closeAll()
	var opts []sdk.Option
	if benchSigner != nil {
		opts = append(opts, sdk.WithDialOptions(grpc.WithPerRPCCredentials(benchSigner)))
	}
	for i := range o.producers {
		dctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		c, err := sdk.Dial(dctx, addr, append(opts, sdk.WithClientID(fmt.Sprintf("bench-sdk-%d", i)))...)
		if err != nil {
			cancel()
			return Figures{}, err
		}
		p, err := c.NewProducer(dctx, sdk.ProducerConfig{Topics: []string{o.topic}, Linger: o.sdkLinger,
			BatchMessages: o.sdkBatch, MaxBuffered: o.sdkWindow})
		cancel()
		if err != nil {
			_ = c.Close(context.Background())
			return Figures{}, err
		}
		ps = append(ps, producer{c, p})
	}
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	s := &sampler{}
	body := make([]byte, o.size)
	var wg sync.WaitGroup
	for _, p := range ps {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var mu sync.Mutex
			local := make([]time.Duration, 0, 1<<16)
			for runCtx.Err() == nil {
				t0 := time.Now()
				p.p.SendAsync(runCtx, &sdk.Message{Topic: o.topic, Body: body}, func(_ sdk.SendReceipt, err error) {
					if !s.on.Load() {
						return
					}
					if err != nil {
						if runCtx.Err() == nil {
							s.errs.Add(1)
						}
						return
					}
					d := time.Since(t0)
					s.count.Add(1)
					mu.Lock()
					local = append(local, d)
					mu.Unlock()
				})
			}
			fctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
			_ = p.p.Flush(fctx)
			cancel()
			mu.Lock()
			s.add(local)
			mu.Unlock()
		}()
	}
	secs, cpu := window(ctx, o, s, pid, nil)
	stop()
	wg.Wait()
	return s.figures(name, secs, cpu), nil
}
