package mesh

import (
	"errors"
	"io"
	"regexp"
	"strconv"
	"syscall"
	"testing"
	"time"

	pb "github.com/apache/rocketmq-clients/golang/v5/protocol/v2"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/mqgate/mqgate/internal/testutil"
)

var (
	parkedRE   = regexp.MustCompile(`(?m)^mqgate_polls_parked\{[^}]*\} (\d+)`)
	rejectedRE = regexp.MustCompile(`(?m)^mqgate_admission_rejections_total\{mqgate_reason="draining"[^}]*\} (\d+)`)
)

// parked reads the parked-polls gauge from /metrics.
func parked(t *testing.T, p *testutil.Proc) int {
	t.Helper()
	_, body := httpDo(t, "GET", "http://"+p.Metrics+"/metrics", "")
	m := parkedRE.FindStringSubmatch(body)
	if m == nil {
		return -1
	}
	n, _ := strconv.Atoi(m[1])
	return n
}

// SIGTERM drains: a parked long poll returns MESSAGE_NOT_FOUND at once;
// during the drain notice health says NOT_SERVING, /readyz 503 and a new
// send gets UNAVAILABLE (nothing happened: retry elsewhere) while the
// ports are still open; then the process exits 0 within its deadline.
func TestDrainOnSIGTERM(t *testing.T) {
	e2e(t)
	const deadline, notice = 10 * time.Second, 3 * time.Second
	p := start(t, testutil.StartOptions{Args: []string{"--shutdown-timeout", deadline.String(), "--drain-notice", notice.String()}})
	topic, group := uniq("drain-topic"), uniq("drain-group")
	cli(t, p.GRPC, "topic", "create", topic)
	cli(t, p.GRPC, "group", "create", group)
	raw := dialRaw(t, p.GRPC, false)
	health := healthpb.NewHealthClient(raw.conn)
	hc, err := health.Check(raw.ctx(t, 5*time.Second), &healthpb.HealthCheckRequest{Service: "apache.rocketmq.v2.MessagingService"})
	if err != nil || hc.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("health before the drain: %v %v", hc, err)
	}

	// A receive that would wait 15 s for a message.
	type result struct {
		st  *pb.Status
		n   int
		err error
		at  time.Time
	}
	got := make(chan result, 1)
	go func() {
		stream, err := raw.ReceiveMessage(raw.ctx(t, 30*time.Second), &pb.ReceiveMessageRequest{
			Group: res(group), MessageQueue: &pb.MessageQueue{Topic: res(topic), Broker: &pb.Broker{Name: "mqgate-0"}},
			FilterExpression: &pb.FilterExpression{Type: pb.FilterType_TAG, Expression: "*"}, BatchSize: 1,
			InvisibleDuration: durationpb.New(30 * time.Second), LongPollingTimeout: durationpb.New(15 * time.Second)})
		r := result{err: err}
		for err == nil {
			var f *pb.ReceiveMessageResponse
			if f, err = stream.Recv(); err == nil {
				if f.GetStatus() != nil {
					r.st = f.GetStatus()
				}
				if f.GetMessage() != nil {
					r.n++
				}
			}
		}
		if !errors.Is(err, io.EOF) {
			r.err = err
		}
		r.at = time.Now()
		got <- r
	}()
	waitFor(t, 10*time.Second, "the receive to park", func() bool { return parked(t, p) == 1 })

	sigterm := time.Now()
	p.Signal(syscall.SIGTERM)
	select {
	case r := <-got:
		if r.err != nil || r.st.GetCode() != pb.Code_MESSAGE_NOT_FOUND || r.n != 0 {
			t.Fatalf("parked receive after SIGTERM: status %v, %d messages, err %v; want MESSAGE_NOT_FOUND and gRPC OK", r.st, r.n, r.err)
		}
		if took := r.at.Sub(sigterm); took > 2*time.Second {
			t.Fatalf("the parked receive returned %s after SIGTERM; it would have waited 15 s", took)
		} else {
			t.Logf("parked receive answered MESSAGE_NOT_FOUND %s after SIGTERM", took)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a parked receive did not return promptly after SIGTERM")
	}

	// During the notice: listeners open, but nothing new is taken.
	if _, ok := p.WaitLog(notice, func(m map[string]any) bool {
		s, _ := m["msg"].(string)
		return len(s) > 9 && s[:9] == "draining:"
	}); !ok {
		t.Fatal("no drain-notice log line")
	}
	hc, err = health.Check(raw.ctx(t, 2*time.Second), &healthpb.HealthCheckRequest{Service: "apache.rocketmq.v2.MessagingService"})
	if err != nil || hc.GetStatus() != healthpb.HealthCheckResponse_NOT_SERVING {
		t.Fatalf("health during the drain notice: %v %v, want NOT_SERVING", hc, err)
	}
	_, err = raw.SendMessage(raw.ctx(t, 2*time.Second), &pb.SendMessageRequest{Messages: []*pb.Message{{
		Topic: res(topic), Body: []byte("too late"),
		SystemProperties: &pb.SystemProperties{MessageId: uniq("late"), MessageType: pb.MessageType_NORMAL, BodyEncoding: pb.Encoding_IDENTITY},
	}}})
	if status.Code(err) != codes.Unavailable {
		t.Fatalf("send during the drain notice: %v, want gRPC UNAVAILABLE", err)
	}
	if code, body := httpDo(t, "GET", "http://"+p.HTTP+"/readyz", ""); code != 503 {
		t.Fatalf("/readyz during the drain notice: %d %s, want 503", code, body)
	}
	_, metrics := httpDo(t, "GET", "http://"+p.Metrics+"/metrics", "")
	if m := rejectedRE.FindStringSubmatch(metrics); m == nil || m[1] == "0" {
		t.Fatalf("the refused send is not counted as a draining admission rejection:\n%s", rejectedRE.FindString(metrics))
	}
	if time.Since(sigterm) >= notice {
		t.Fatalf("the checks above took longer than the %s notice; they prove nothing", notice)
	}

	code := p.Wait(deadline + 2*time.Second)
	elapsed := time.Since(sigterm)
	if code != 0 {
		t.Fatalf("exit status %d after SIGTERM, want 0:\n%s", code, p.Log())
	}
	if elapsed < notice || elapsed > deadline {
		t.Fatalf("exited %s after SIGTERM: want after the %s notice and within the %s deadline", elapsed, notice, deadline)
	}
	t.Logf("exited 0 %s after SIGTERM", elapsed)
}
