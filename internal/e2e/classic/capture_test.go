package classic

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/producer"

	"github.com/mqgate/mqgate/gateway/remoting/codec"
	"github.com/mqgate/mqgate/gateway/remoting/wire"
	"github.com/mqgate/mqgate/internal/testutil"
)

// recorder is a TCP proxy that keeps every frame in both directions.
type recorder struct {
	mu       sync.Mutex
	requests [][]byte // client → server frames (after the length)
	replies  [][]byte // server → client frames
}

func (r *recorder) pipe(dst io.Writer, src io.Reader, keep *[][]byte) {
	br := bufio.NewReader(src)
	for {
		f, err := codec.ReadFrame(br, 64<<20)
		if err != nil {
			return
		}
		r.mu.Lock()
		*keep = append(*keep, f)
		r.mu.Unlock()
		if _, err := dst.Write(append(binary.BigEndian.AppendUint32(nil, uint32(len(f))), f...)); err != nil {
			return
		}
	}
}

func (r *recorder) serve(t *testing.T, lis net.Listener, target string) {
	for {
		in, err := lis.Accept()
		if err != nil {
			return
		}
		out, err := net.Dial("tcp", target)
		if err != nil {
			in.Close()
			continue
		}
		t.Cleanup(func() { in.Close(); out.Close() })
		go r.pipe(out, in, &r.requests)
		go r.pipe(in, out, &r.replies)
	}
}

// TestCaptureSeedFrames runs the classic Go client through a recording
// proxy: admin CreateTopic, single, tagged, batch and compressed sends, a
// push consumer with a failed consumption (send-back) and offset commits.
// Every frame it sent must decode, every batch body and pull body must
// parse. With MQGATE_UPDATE_SEEDS=1 it writes them as the fuzz corpora of
// gateway/remoting/codec and gateway/remoting/wire.
//
// All traffic passes the proxy because routes advertise it: mqgate binds
// 127.0.0.1:P, is told to advertise host 127.0.0.2, and the proxy listens
// on 127.0.0.2:P (Linux routes all of 127/8 to loopback).
func TestCaptureSeedFrames(t *testing.T) {
	e2e(t)
	probe, err := net.Listen("tcp", "127.0.0.2:0")
	if err != nil {
		t.Skipf("127.0.0.2 is not a local address here: %v", err)
	}
	probe.Close()
	p := start(t, "--advertise-addr", "127.0.0.2:1")
	_, port, _ := net.SplitHostPort(p.Remoting)
	lis, err := net.Listen("tcp", "127.0.0.2:"+port)
	if err != nil {
		t.Skipf("cannot listen on 127.0.0.2:%s: %v", port, err)
	}
	t.Cleanup(func() { lis.Close() })
	rec := &recorder{}
	go rec.serve(t, lis, p.Remoting)
	proxied := &testutil.Proc{Remoting: lis.Addr().String()}

	topic, group := uniq("T"), uniq("CG")
	createTopic(t, proxied, topic, 2)
	pr := newProducer(t, proxied, producer.WithCompressMsgBodyOverHowmuch(64))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	msgs := [][]*primitive.Message{
		{primitive.NewMessage(topic, []byte("plain"))},
		{primitive.NewMessage(topic, []byte("tagged")).WithTag("tagA").WithKeys([]string{"k1", "k 2"}).WithDelayTimeLevel(1)},
		{primitive.NewMessage(topic, []byte("b1")), primitive.NewMessage(topic, []byte("b2"))},
		{primitive.NewMessage(topic, []byte("a body long enough to be zlib-compressed by the client, a body long enough"))},
	}
	for _, m := range msgs {
		if r, err := pr.SendSync(ctx, m...); err != nil || r.Status != primitive.SendOK {
			t.Fatalf("send: %v %v", r, err)
		}
	}
	col := newCollector()
	failed := false
	var mu sync.Mutex
	newPushConsumer(t, proxied, group, topic, func(ctx context.Context, ms ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
		col.add("c", ms...)
		mu.Lock()
		defer mu.Unlock()
		for _, m := range ms {
			if string(m.Body) == "plain" && !failed {
				failed = true
				if cc, ok := primitive.GetConcurrentlyCtx(ctx); ok {
					cc.DelayLevelWhenNextConsume = 1
				}
				return consumer.ConsumeRetryLater, nil
			}
		}
		return consumer.ConsumeSuccess, nil
	})
	col.wait(t, 45*time.Second, "every message and the retry", func() bool {
		return len(col.seen) >= 5 && len(col.seen["plain"]) >= 2
	})

	rec.mu.Lock()
	defer rec.mu.Unlock()
	byCode := map[int32][][]byte{}
	var batches, pulls [][]byte
	for _, f := range rec.requests {
		c, err := codec.Decode(f)
		if err != nil {
			t.Fatalf("a frame the Go client sent does not decode: %v\n%q", err, f)
		}
		byCode[c.Code] = append(byCode[c.Code], f)
		if c.Code == 320 {
			if _, err := wire.DecodeBatch(c.Body, 1024); err != nil {
				t.Fatalf("Go batch body: %v", err)
			}
			batches = append(batches, c.Body)
		}
	}
	for _, f := range rec.replies {
		c, err := codec.Decode(f)
		if err != nil {
			t.Fatalf("a frame mqgate sent does not decode: %v", err)
		}
		if c.IsResponse() && len(c.Body) > 0 && c.Ext["nextBeginOffset"] != "" {
			if _, err := wire.DecodeRecords(c.Body); err != nil {
				t.Fatalf("pull body: %v", err)
			}
			pulls = append(pulls, c.Body)
		}
	}
	for _, code := range []int32{105, 34, 17, 10, 320, 38, 14, 11, 36} {
		if len(byCode[code]) == 0 {
			t.Errorf("the Go client never sent request code %d through the proxy", code)
		}
	}
	if len(pulls) == 0 {
		t.Error("no pull body was captured")
	}
	if os.Getenv("MQGATE_UPDATE_SEEDS") == "" {
		return
	}
	root := testutil.RepoRoot()
	var frames [][]byte
	codes := make([]int, 0, len(byCode))
	for c := range byCode {
		codes = append(codes, int(c))
	}
	sort.Ints(codes)
	for _, c := range codes {
		fs := byCode[int32(c)]
		frames = append(frames, fs[0], fs[len(fs)-1])
	}
	writeCorpus(t, filepath.Join(root, "gateway/remoting/codec/testdata/fuzz/FuzzDecode"), frames)
	writeCorpus(t, filepath.Join(root, "gateway/remoting/wire/testdata/fuzz/FuzzDecodeBatch"), batches)
	writeCorpus(t, filepath.Join(root, "gateway/remoting/wire/testdata/fuzz/FuzzDecodeRecords"), pulls[:min(len(pulls), 4)])
	var hbs [][]byte
	for _, f := range byCode[34][:min(len(byCode[34]), 2)] {
		c, _ := codec.Decode(f)
		hbs = append(hbs, c.Body)
	}
	writeCorpus(t, filepath.Join(root, "gateway/remoting/testdata/fuzz/FuzzHeartbeat"), hbs)
}

// writeCorpus writes inputs in the go test fuzz v1 format, named by hash.
func writeCorpus(t *testing.T, dir string, inputs [][]byte) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, in := range inputs {
		sum := sha256.Sum256(in)
		name := filepath.Join(dir, "captured-"+hex.EncodeToString(sum[:8]))
		data := fmt.Sprintf("go test fuzz v1\n[]byte(%s)\n", strconv.Quote(string(in)))
		if err := os.WriteFile(name, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("wrote %d seeds to %s", len(inputs), dir)
}
