package remoting

import (
	"bytes"
	"compress/gzip"
	"compress/zlib"
	"io"
	"testing"

	"github.com/mqgate/mqgate/broker/model"
	"github.com/mqgate/mqgate/gateway/remoting/codec"
)

// Decoders of request bodies and header strings: none may panic. FuzzHeartbeat's corpus holds heartbeats captured
// from the classic Go client (internal/e2e/classic TestCaptureSeedFrames).

func FuzzHeartbeat(f *testing.F) {
	f.Add(heartbeatBody("192.0.2.2@16152", []string{"PG"}, map[string][]string{"CG": {"%RETRY%CG", "T1:a || b"}}))
	f.Add([]byte(`{"clientID":"x","consumerDataSet":[{"groupName":"g","subscriptionDataSet":[{"topic":"t","codeSet":[97]}]}]}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		hb, err := decodeHeartbeat(body)
		if err != nil {
			return
		}
		if hb.ClientID == "" && len(hb.ProducerDataSet)+len(hb.ConsumerDataSet) > 0 {
			t.Fatal("accepted a heartbeat without client id")
		}
		for _, cd := range hb.ConsumerDataSet {
			for _, sd := range cd.SubscriptionDataSet {
				_, _ = model.ParseTagFilter(sd.SubString)
			}
		}
	})
}

func FuzzTopicAttributes(f *testing.F) {
	for _, s := range []string{"+message.type=FIFO", "+message.type=FIFO,-queue.type", "", "+a=b,+a=c", "-x"} {
		f.Add(s, true)
	}
	f.Fuzz(func(t *testing.T, s string, create bool) {
		typ, err := parseAttributes(s, create, model.TopicNormal)
		if err == nil && typ.String() == "" {
			t.Fatal("no type")
		}
	})
}

func FuzzPopExtraInfo(f *testing.F) {
	f.Add(popCK(0, 1700000000000, 60000, 0, "broker-a", 3, 42))
	f.Add("0 1 2")
	f.Fuzz(func(t *testing.T, s string) {
		if pt, ok := parseCK(s); ok && popCK(0, pt, 0, 0, "b", 0, 0) == "" {
			t.Fatal("unreachable")
		}
	})
}

func FuzzLockBody(f *testing.F) {
	f.Add([]byte(`{"consumerGroup":"CG","clientId":"c","mqSet":[{"topic":"T","brokerName":"broker-a","queueId":0}]}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		b, bad := decodeLockBody(&codec.Command{Body: body})
		if bad == nil && (b.ConsumerGroup == "" || len(b.MQSet) > maxLocksPerRequest) {
			t.Fatal("accepted an invalid lock body")
		}
	})
}

func FuzzBatchAck(f *testing.F) {
	f.Add([]byte(`{"brokerName":"broker-a","acks":[{"c":"PG","t":"T","r":"0","so":0,"q":0,"rq":0,"pt":1700000000000,"it":60000,"b":"BA=="}]}`))
	f.Add([]byte(`{"acks":[{"consumerGroup":"PG","topic":"T","startOffset":5,"queueId":1,"popTime":1,"bitSet":"AQ=="}]}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		acks, err := decodeBatchAck(body)
		if err != nil {
			return
		}
		for _, a := range acks {
			if len(a.Bits) > maxBatchAckBits {
				t.Fatal("bit set over the limit accepted")
			}
		}
	})
}

// FuzzParseHost: parseHost (a stored record's born host) never panics
// and always yields a valid, unmapped address that it reads back from
// its own rendering.
func FuzzParseHost(f *testing.F) {
	for _, s := range []string{"10.0.0.1:5000", "[::ffff:10.0.0.1]:80", "::ffff:1.2.3.4", "[fe80::1%eth0]:9", "[2001:db8::1]", "broker-a", "", "1.2.3.4:99999"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		ap := parseHost(s)
		if !ap.Addr().IsValid() || ap.Addr().Is4In6() {
			t.Fatalf("%q → %v", s, ap)
		}
		if again := parseHost(ap.String()); again != ap {
			t.Fatalf("%q → %v → %v", s, ap, again)
		}
	})
}

// FuzzInflate: inflate (zlib bodies from classic producers, gzip bodies
// from the store) never panics, never returns more than maxBody bytes,
// and gives back what was compressed. (A body of maxBody+1 bytes is
// checked once, not seeded: every mutation of it would inflate 4 MiB.)
func FuzzInflate(f *testing.F) {
	if _, err := inflate(zlibReader, compress(f, false, make([]byte, maxBody+1))); err == nil {
		f.Fatal("a body over maxBody inflated")
	}
	f.Add(compress(f, true, []byte("hello")), true)
	f.Add(compress(f, false, bytes.Repeat([]byte("compressible "), 400)), false)
	f.Add([]byte("not zlib"), true)
	f.Fuzz(func(t *testing.T, b []byte, gz bool) {
		open := zlibReader
		if gz {
			open = gzipReader
		}
		if out, err := inflate(open, b); err == nil && len(out) > maxBody {
			t.Fatalf("inflated to %d bytes", len(out))
		}
		if out, err := inflate(open, compress(t, gz, b)); err != nil || !bytes.Equal(out, b) {
			t.Fatalf("round trip: %v", err)
		}
	})
}

func compress(t testing.TB, gz bool, b []byte) []byte {
	var buf bytes.Buffer
	var w io.WriteCloser = zlib.NewWriter(&buf)
	if gz {
		w = gzip.NewWriter(&buf)
	}
	if _, err := w.Write(b); err != nil || w.Close() != nil {
		t.Fatal("compressing failed")
	}
	return buf.Bytes()
}
