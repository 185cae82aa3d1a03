package message

import (
	"bytes"
	"errors"
	"math/rand"
	"reflect"
	"testing"
)

func sample() *Message {
	m := &Message{Topic: "TopicA", QueueID: 3, Flags: 7, BornTime: 1700000000000, BornHost: "10.0.0.1:5000", StoreHost: "broker-a", Body: []byte("hello world")}
	m.Set(PropUniqKey, "ID-1")
	m.Set(PropTags, "tagA")
	m.Set(PropKeys, "k1 k2")
	return m
}

func seal(t testing.TB, m *Message, phys, qo, st int64) []byte {
	b, crc, err := Encode(nil, m)
	if err != nil {
		t.Fatal(err)
	}
	Seal(b, crc, phys, qo, st)
	return b
}

func TestRoundTrip(t *testing.T) {
	m := sample()
	b := seal(t, m, 4096, 12, 1700000000123)
	got, err := Decode(b, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	want := *m
	want.PhysOffset, want.QueueOffset, want.StoreTime, want.Size = 4096, 12, 1700000000123, int32(len(b))
	if !reflect.DeepEqual(*got, want) {
		t.Fatalf("got %+v\nwant %+v", *got, want)
	}
	if got.Tag() != "tagA" || got.UniqKey() != "ID-1" || !reflect.DeepEqual(got.Keys(), []string{"k1", "k2"}) {
		t.Fatal("property helpers")
	}
	v, err := ParseView(b)
	if err != nil || string(v.Topic) != "TopicA" || string(v.Prop(PropTags)) != "tagA" || v.Prop("nope") != nil || v.QueueOffset != 12 {
		t.Fatalf("view %+v %v", v, err)
	}
	if TagHashBytes(v.Prop(PropTags)) != TagHash("tagA") || TagHash("") != 0 {
		t.Fatal("tag hash")
	}
}

func TestEveryByteIsProtected(t *testing.T) {
	b := seal(t, sample(), 1, 2, 3)
	for i := range b {
		for _, bit := range []byte{1, 0x80} {
			c := bytes.Clone(b)
			c[i] ^= bit
			if _, err := Decode(c, 1<<20); err == nil {
				t.Fatalf("flip of byte %d bit %#x not detected", i, bit)
			}
		}
	}
	for n := 0; n < len(b); n++ {
		if _, err := Decode(b[:n], 1<<20); err == nil {
			t.Fatalf("truncation to %d not detected", n)
		}
	}
}

func TestEncodeRejects(t *testing.T) {
	m := sample()
	m.Properties = append(m.Properties, Property{"AAA", "x"}) // unsorted
	if _, _, err := Encode(nil, m); !errors.Is(err, ErrInvalid) {
		t.Fatalf("unsorted: %v", err)
	}
	if _, _, err := Encode(nil, &Message{}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("empty topic: %v", err)
	}
	if _, err := Decode(seal(t, sample(), 0, 0, 0), 20); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("max size: %v", err)
	}
}

func TestSetDelKeepsOrder(t *testing.T) {
	var m Message
	r := rand.New(rand.NewSource(1))
	keys := map[string]string{}
	for i := 0; i < 200; i++ {
		k := string(rune('a' + r.Intn(26)))
		if r.Intn(3) == 0 {
			m.Del(k)
			delete(keys, k)
		} else {
			m.Set(k, k+"v")
			keys[k] = k + "v"
		}
	}
	if len(m.Properties) != len(keys) {
		t.Fatal("len")
	}
	for i, p := range m.Properties {
		if keys[p.Key] != p.Value || (i > 0 && m.Properties[i-1].Key >= p.Key) {
			t.Fatal("order")
		}
	}
}

func BenchmarkDecode1K(b *testing.B) {
	m := sample()
	m.Body = make([]byte, 1024)
	rec := seal(b, m, 1, 2, 3)
	b.SetBytes(int64(len(rec)))
	for i := 0; i < b.N; i++ {
		buf := bytes.Clone(rec)
		if _, err := Decode(buf, 1<<20); err != nil {
			b.Fatal(err)
		}
	}
}
