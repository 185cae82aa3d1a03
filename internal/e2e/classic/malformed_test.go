package classic

import (
	"bufio"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/mqgate/mqgate/gateway/remoting/client"
	"github.com/mqgate/mqgate/gateway/remoting/codec"
)

// TestMalformedFramesCloseOnlyTheirConnection: an oversized, a truncated
// length, an unknown serialize type and an undecodable header each get one
// error response and a closed connection; a client connected meanwhile is
// served throughout, the message it sent before stays readable, unknown
// codes are answered (never silence) and /readyz stays 200.
func TestMalformedFramesCloseOnlyTheirConnection(t *testing.T) {
	e2e(t)
	p := start(t)
	topic := uniq("T")
	createTopic(t, p, topic, 1)
	ctx := ctxT(t, 60*time.Second)
	good, err := client.Dial(ctx, p.Remoting, codec.JSON)
	if err != nil {
		t.Fatal(err)
	}
	defer good.Close()
	send := func(body string) *codec.Command {
		resp, err := good.Invoke(ctx, &codec.Command{Code: 10, Body: []byte(body), Ext: map[string]string{
			"producerGroup": "PG", "topic": topic, "queueId": "0", "sysFlag": "0", "bornTimestamp": "1", "flag": "0",
			"properties": "UNIQ_KEY\x01ID-" + body + "\x02"}})
		if err != nil {
			t.Fatalf("send on the good connection: %v", err)
		}
		return resp
	}
	if r := send("before"); r.Code != 0 {
		t.Fatalf("send: code %d %s", r.Code, r.Remark)
	}

	frame := func(typ byte, hdr []byte) []byte {
		b := binary.BigEndian.AppendUint32(nil, uint32(4+len(hdr)))
		b = binary.BigEndian.AppendUint32(b, uint32(typ)<<24|uint32(len(hdr)))
		return append(b, hdr...)
	}
	cases := map[string][]byte{
		"oversized":                    {0x7f, 0xff, 0xff, 0xff, 0, 0, 0, 0},
		"length below 4":               {0, 0, 0, 2, 0, 0},
		"header longer than the frame": append(binary.BigEndian.AppendUint32(nil, 8), 0, 0, 0, 100, '{', '}', ' ', ' '),
		"unknown serialize type":       frame(7, []byte(`{"code":105}`)),
		"bad JSON header":              frame(0, []byte(`{"code":105,"opaque":`)),
		"binary ext overrun":           frame(1, []byte{0, 105, 9, 1, 61, 0, 0, 0, 5, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 50, 0}),
	}
	for name, raw := range cases {
		nc, err := net.Dial("tcp", p.Remoting)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := nc.Write(raw); err != nil {
			t.Fatalf("%s: write: %v", name, err)
		}
		_ = nc.SetReadDeadline(time.Now().Add(10 * time.Second))
		br := bufio.NewReader(nc)
		f, err := codec.ReadFrame(br, 1<<20)
		if err != nil {
			t.Fatalf("%s: no error response before the close: %v", name, err)
		}
		resp, err := codec.Decode(f)
		if err != nil || !resp.IsResponse() || resp.Code != 29 || resp.Remark == "" {
			t.Fatalf("%s: answer %+v (%v), want a response with code 29 and a remark", name, resp, err)
		}
		if _, err := br.ReadByte(); !errors.Is(err, io.EOF) {
			t.Fatalf("%s: connection not closed after the error response: %v", name, err)
		}
		nc.Close()
		// The other connection is still served.
		if r := send("after-" + name); r.Code != 0 {
			t.Fatalf("after %s: send code %d %s", name, r.Code, r.Remark)
		}
	}
	// Unknown request codes are answered, never ignored.
	resp, err := good.Invoke(ctx, &codec.Command{Code: 9999})
	if err != nil || resp.Code != 3 {
		t.Fatalf("unknown code: %+v %v, want REQUEST_CODE_NOT_SUPPORTED", resp, err)
	}
	// Nothing accepted is lost.
	resp, err = good.Invoke(ctx, &codec.Command{Code: 11, Ext: map[string]string{"consumerGroup": "CG", "topic": topic,
		"queueId": "0", "queueOffset": "0", "maxMsgNums": "32", "sysFlag": "0", "commitOffset": "-1", "suspendTimeoutMillis": "0"}})
	if err != nil || resp.Code != 0 || len(resp.Body) == 0 {
		t.Fatalf("pull after the malformed frames: %+v %v", resp, err)
	}
	hr, err := http.Get("http://" + p.HTTP + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	hr.Body.Close()
	if hr.StatusCode != http.StatusOK {
		t.Fatalf("/readyz %d after malformed frames", hr.StatusCode)
	}
}
