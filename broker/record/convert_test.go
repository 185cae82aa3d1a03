package record

import (
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/mqgate/mqgate/broker/model"
	"github.com/mqgate/mqgate/storage/message"
)

func prop(r *message.Message, key string) (string, bool) {
	for _, p := range r.Properties {
		if p.Key == key {
			return p.Value, true
		}
	}
	return "", false
}

// What each field of a message becomes in its record, and that the
// record reads back as the same message.
func TestToRecordRules(t *testing.T) {
	born := time.UnixMilli(1767323045123)
	deliver := time.UnixMilli(1767323105123)
	for _, c := range []struct {
		name  string
		msg   model.Message
		topic string // the record's topic ("" : the message's)
		props map[string]string
		flags uint32
	}{
		{"a plain message", model.Message{ID: "id-1"}, "", map[string]string{PropUniqKey: "id-1"}, 0},
		{"tag and keys", model.Message{ID: "id-1", Tag: "TagA", Keys: []string{"k1", "k2"}}, "",
			map[string]string{PropUniqKey: "id-1", PropTags: "TagA", PropKeys: "k1 k2"}, 0},
		{"a key with a space keeps the list intact", model.Message{ID: "id-1", Keys: []string{"order 7", "k2"}}, "",
			map[string]string{PropUniqKey: "id-1", PropKeys: "order 7 k2", PropKeysList: "order 7\x1fk2"}, 0},
		{"a FIFO message", model.Message{ID: "id-1", MessageGroup: "g"}, "", map[string]string{PropUniqKey: "id-1", PropShardingKey: "g"}, 0},
		{"a lite message", model.Message{ID: "id-1", LiteTopic: "chat-9"}, "", map[string]string{PropUniqKey: "id-1", PropLiteTopic: "chat-9"}, 0},
		{"a delayed message", model.Message{ID: "id-1", DeliveryTime: deliver}, "",
			map[string]string{PropUniqKey: "id-1", PropDeliverMS: "1767323105123"}, 0},
		{"a transactional message with its recovery time", model.Message{ID: "id-1", Transactional: true, TxRecovery: 90 * time.Second}, "",
			map[string]string{PropUniqKey: "id-1", PropTranMsg: "true", PropCheckImmunity: "90"}, 0},
		{"trace context and reconsume times", model.Message{ID: "id-1", TraceContext: "00-abc-01", ReconsumeTimes: 3}, "",
			map[string]string{PropUniqKey: "id-1", PropTraceContext: "00-abc-01", PropReconsumeTime: "3"}, 0},
		{"stored in a system topic, it names its real topic", model.Message{ID: "id-1"}, "rmq_sys_wheel",
			map[string]string{PropUniqKey: "id-1", PropRealTopic: "orders"}, 0},
		{"a gzip body is flagged", model.Message{ID: "id-1", BodyGzip: true}, "", map[string]string{PropUniqKey: "id-1"}, FlagGzip},
		{"user properties, sorted with the system ones", model.Message{ID: "id-1", Properties: map[string]string{"zeta": "1", "alpha": "2"}}, "",
			map[string]string{PropUniqKey: "id-1", "zeta": "1", "alpha": "2"}, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			m := c.msg
			m.Topic, m.Body, m.BornTime, m.BornHost = "orders", []byte("body"), born, "10.0.0.1:5000"
			topic := c.topic
			if topic == "" {
				topic = m.Topic
			}
			r := ToRecord(&m, topic, 3)
			if r.Topic != topic || r.QueueID != 3 || r.BornTime != born.UnixMilli() || r.BornHost != m.BornHost || string(r.Body) != "body" || r.Flags != c.flags {
				t.Fatalf("record %+v", r)
			}
			got := map[string]string{}
			for _, p := range r.Properties {
				got[p.Key] = p.Value
			}
			if !reflect.DeepEqual(got, c.props) {
				t.Fatalf("properties %q, want %q", got, c.props)
			}
			if !slices.IsSortedFunc(r.Properties, func(a, b message.Property) int { return cmpStr(a.Key, b.Key) }) {
				t.Fatalf("properties not sorted by key: %v", r.Properties)
			}
			back := FromRecord(r).Message
			want := m
			want.Type = m.ActualType()
			if !reflect.DeepEqual(back, want) {
				t.Fatalf("read back\n %+v\nwant\n %+v", back, want)
			}
		})
	}
}

func cmpStr(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// A user property may not take a system property's place: the system's
// value wins, and reading back hides reserved names.
func TestToRecordSystemPropertyWins(t *testing.T) {
	m := &model.Message{Topic: "orders", ID: "real-id", Body: []byte("b"), Properties: map[string]string{PropUniqKey: "forged", "color": "red"}}
	r := ToRecord(m, "orders", 0)
	if v, _ := prop(r, PropUniqKey); v != "real-id" {
		t.Fatalf("UNIQ_KEY %q, want the message id", v)
	}
	n := 0
	for _, p := range r.Properties {
		if p.Key == PropUniqKey {
			n++
		}
	}
	if n != 1 {
		t.Fatalf("%d UNIQ_KEY properties", n)
	}
	r.Properties = append(r.Properties, message.Property{Key: PropDueMS, Value: "1"}, message.Property{Key: PropTxID, Value: "tx"})
	back := FromRecord(r).Message
	if back.ID != "real-id" || !reflect.DeepEqual(back.Properties, map[string]string{"color": "red"}) {
		t.Fatalf("read back id %q, properties %v", back.ID, back.Properties)
	}
}

// Records of retries and dead letters present their origin.
func TestFromRecordOrigins(t *testing.T) {
	r := &message.Message{Topic: "%RETRY%billing", Body: []byte("b"), Properties: []message.Property{
		{Key: PropRetryTopic, Value: "orders"}, {Key: PropUniqKey, Value: "id-1"}}}
	if d := FromRecord(r); d.Message.Topic != "orders" {
		t.Fatalf("retry record presented as topic %q, want orders", d.Message.Topic)
	}
	r = &message.Message{Topic: "%DLQ%billing", Body: []byte("b"), Properties: []message.Property{
		{Key: PropDLQOriginTopic, Value: "orders"}, {Key: PropDLQOriginID, Value: "id-0"}, {Key: PropUniqKey, Value: "id-1"}}}
	d := FromRecord(r)
	if d.Message.Topic != "%DLQ%billing" || d.DLQOriginTopic != "orders" || d.DLQOriginID != "id-0" {
		t.Fatalf("dead letter %+v", d)
	}
	// Unparsable numbers are left out rather than guessed.
	r = &message.Message{Topic: "orders", Properties: []message.Property{{Key: PropDeliverMS, Value: "soon"}, {Key: PropReconsumeTime, Value: "x"}}}
	if m := FromRecord(r).Message; !m.DeliveryTime.IsZero() || m.ReconsumeTimes != 0 {
		t.Fatalf("unparsable properties read as %v, %d", m.DeliveryTime, m.ReconsumeTimes)
	}
}

// A batch's records are each message's ToRecord, whatever the batch's
// size and however many properties each has, and no record's
// properties share room with another's.
func TestToRecordsIsToRecordOfEach(t *testing.T) {
	many := map[string]string{}
	for i := range 20 {
		many[string(rune('a'+i))] = "v"
	}
	all := []*model.Message{
		{Topic: "t", ID: "id-1", Tag: "TagA", Keys: []string{"k1", "k2"}, Body: []byte("b1")},
		{Topic: "t", ID: "id-2", Properties: many, MessageGroup: "g", BodyGzip: true},
		{Topic: "t", ID: "id-3", Properties: map[string]string{"x": "1"}, TraceContext: "00-ab-cd-01"},
		{Topic: "t"},
	}
	for n := 1; n <= len(all); n++ {
		msgs := all[:n]
		got := ToRecords(msgs, "t", 3)
		if len(got) != n {
			t.Fatalf("%d records for %d messages", len(got), n)
		}
		for i, m := range msgs {
			if want := ToRecord(m, "t", 3); !reflect.DeepEqual(got[i], want) {
				t.Fatalf("batch of %d, record %d:\n got %+v\nwant %+v", n, i, got[i], want)
			}
		}
		for i := range got[:n-1] {
			before := slices.Clone(got[i+1].Properties)
			got[i].Set("zzz-added", "x")
			if !slices.Equal(got[i+1].Properties, before) {
				t.Fatalf("batch of %d: a property set on record %d changed record %d", n, i, i+1)
			}
		}
	}
	// The single message alone, with more properties than its room.
	one := ToRecords(all[1:2], "t", 3)
	if want := ToRecord(all[1], "t", 3); !reflect.DeepEqual(one[0], want) {
		t.Fatalf("one message with %d properties:\n got %+v\nwant %+v", len(all[1].Properties), one[0], want)
	}
}
