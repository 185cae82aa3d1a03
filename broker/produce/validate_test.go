package produce

import (
	"strings"
	"testing"
	"time"

	"github.com/mqgate/mqgate/broker/model"
	"github.com/mqgate/mqgate/broker/mqerr"
	"github.com/mqgate/mqgate/broker/record"
)

// Each rule of ValidateMessage, one row each: a valid message changed in
// one way, and the kind the change must be refused with (none: accepted).
func TestValidateMessageRules(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	lim := DefaultLimits()
	reserved := record.ReservedNames()[0]
	const ok = mqerr.Kind(-1)
	for _, c := range []struct {
		name string
		edit func(m *model.Message)
		want mqerr.Kind
	}{
		{"a plain message", func(*model.Message) {}, ok},
		{"empty body", func(m *model.Message) { m.Body = nil }, mqerr.KindBodyEmpty},
		{"body at the limit", func(m *model.Message) { m.Body = make([]byte, lim.MaxBodySize) }, ok},
		{"body over the limit", func(m *model.Message) { m.Body = make([]byte, lim.MaxBodySize+1) }, mqerr.KindBodyTooLarge},
		{"too many properties", func(m *model.Message) {
			m.Properties = map[string]string{}
			for i := range lim.MaxProperties + 1 {
				m.Properties[strings.Repeat("k", i+1)] = "v"
			}
		}, mqerr.KindPropertiesTooLarge},
		{"blank property name", func(m *model.Message) { m.Properties = map[string]string{" ": "v"} }, mqerr.KindIllegalPropertyKey},
		{"reserved property name", func(m *model.Message) { m.Properties = map[string]string{reserved: "v"} }, mqerr.KindIllegalPropertyKey},
		{"control character in a property value", func(m *model.Message) { m.Properties = map[string]string{"k": "a\nb"} }, mqerr.KindIllegalPropertyKey},
		{"C1 control character in a property name", func(m *model.Message) { m.Properties = map[string]string{"k\u0085": "v"} }, mqerr.KindIllegalPropertyKey},
		{"invalid UTF-8 in a property", func(m *model.Message) { m.Properties = map[string]string{"k": "\xff"} }, mqerr.KindIllegalPropertyKey},
		{"whitespace tag", func(m *model.Message) { m.Tag = "  " }, mqerr.KindIllegalTag},
		{"tag with the filter separator", func(m *model.Message) { m.Tag = "a|b" }, mqerr.KindIllegalTag},
		{"tag with a control character", func(m *model.Message) { m.Tag = "a\tb" }, mqerr.KindIllegalTag},
		{"blank key", func(m *model.Message) { m.Keys = []string{"k1", ""} }, mqerr.KindIllegalKey},
		{"key with a control character", func(m *model.Message) { m.Keys = []string{"k\x00"} }, mqerr.KindIllegalKey},
		{"properties, tag and keys over the size limit together", func(m *model.Message) {
			m.Properties = map[string]string{"k": strings.Repeat("v", lim.MaxPropertiesSize-2)}
			m.Tag = "t"
			m.Keys = []string{"x"}
		}, mqerr.KindPropertiesTooLarge},
		{"properties, tag and keys at the size limit", func(m *model.Message) {
			m.Properties = map[string]string{"k": strings.Repeat("v", lim.MaxPropertiesSize-2)}
			m.Tag = "t"
		}, ok},
		{"blank message id", func(m *model.Message) { m.ID = " " }, mqerr.KindIllegalMessageID},
		{"transaction recovery over the limit", func(m *model.Message) { m.Transactional, m.TxRecovery = true, lim.MaxTxRecovery+time.Second }, mqerr.KindBadRequest},
		{"transaction recovery at the limit", func(m *model.Message) { m.Transactional, m.TxRecovery = true, lim.MaxTxRecovery }, ok},
		{"delivery time past the maximum delay", func(m *model.Message) { m.DeliveryTime = now.Add(lim.MaxDelay + time.Millisecond) }, mqerr.KindIllegalDeliveryTime},
		{"delivery time at the maximum delay", func(m *model.Message) { m.DeliveryTime = now.Add(lim.MaxDelay) }, ok},
		{"delivery time in the past", func(m *model.Message) { m.DeliveryTime = now.Add(-time.Hour) }, ok},
		{"whitespace message group", func(m *model.Message) { m.MessageGroup = " " }, mqerr.KindIllegalMessageGroup},
		{"message group at its limit (exclusive)", func(m *model.Message) { m.MessageGroup = strings.Repeat("g", lim.MaxMessageGroup) }, mqerr.KindIllegalMessageGroup},
		{"message group under its limit", func(m *model.Message) { m.MessageGroup = strings.Repeat("g", lim.MaxMessageGroup-1) }, ok},
		{"message group with a control character", func(m *model.Message) { m.MessageGroup = "g\x7f" }, mqerr.KindIllegalMessageGroup},
		{"lite topic at its limit (inclusive)", func(m *model.Message) { m.LiteTopic = strings.Repeat("l", lim.MaxLiteTopic) }, ok},
		{"lite topic over its limit", func(m *model.Message) { m.LiteTopic = strings.Repeat("l", lim.MaxLiteTopic+1) }, mqerr.KindIllegalLiteTopic},
		{"lite topic with a character outside its set", func(m *model.Message) { m.LiteTopic = "a/b" }, mqerr.KindIllegalLiteTopic},
		{"lite message with a message group", func(m *model.Message) { m.LiteTopic, m.MessageGroup = "l", "g" }, mqerr.KindMessageTypeConflict},
		{"lite message with a delivery time", func(m *model.Message) { m.LiteTopic, m.DeliveryTime = "l", now.Add(time.Minute) }, mqerr.KindMessageTypeConflict},
		{"lite message in a transaction", func(m *model.Message) { m.LiteTopic, m.Transactional = "l", true }, mqerr.KindMessageTypeConflict},
		{"declared LITE without a lite topic", func(m *model.Message) { m.Type = model.MessageLite }, mqerr.KindIllegalLiteTopic},
		{"transaction with a message group", func(m *model.Message) { m.Transactional, m.MessageGroup = true, "g" }, mqerr.KindMessageTypeConflict},
		{"transaction with a delivery time", func(m *model.Message) { m.Transactional, m.DeliveryTime = true, now.Add(time.Minute) }, mqerr.KindMessageTypeConflict},
		{"declared FIFO without a message group", func(m *model.Message) { m.Type = model.MessageFIFO }, mqerr.KindMessageTypeConflict},
		{"declared NORMAL with a delivery time", func(m *model.Message) { m.Type, m.DeliveryTime = model.MessageNormal, now.Add(time.Minute) }, mqerr.KindMessageTypeConflict},
		{"declared FIFO with a group and a delivery time (the Go client's delayed FIFO)", func(m *model.Message) {
			m.Type, m.MessageGroup, m.DeliveryTime = model.MessageFIFO, "g", now.Add(time.Minute)
		}, ok},
		{"declared DELAY with a delivery time", func(m *model.Message) { m.Type, m.DeliveryTime = model.MessageDelay, now.Add(time.Minute) }, ok},
		// Upstream's order: the first problem wins.
		{"empty body before a bad tag", func(m *model.Message) { m.Body, m.Tag = nil, "a|b" }, mqerr.KindBodyEmpty},
		{"bad tag before a blank id", func(m *model.Message) { m.Tag, m.ID = "a|b", "" }, mqerr.KindIllegalTag},
	} {
		t.Run(c.name, func(t *testing.T) {
			m := &model.Message{Topic: "orders", ID: "id-1", Body: []byte("hello")}
			c.edit(m)
			err := ValidateMessage(m, now, Limits{})
			switch {
			case c.want == ok && err != nil:
				t.Fatalf("refused: %v", err)
			case c.want != ok && err == nil:
				t.Fatalf("accepted, want %v", c.want)
			case c.want != ok && mqerr.KindOf(err) != c.want:
				t.Fatalf("refused as %v (%v), want %v", mqerr.KindOf(err), err, c.want)
			}
		})
	}
}

// A topic takes the types its own type accepts; retry and dead-letter
// topics take any.
func TestCheckTypeAgainstTopic(t *testing.T) {
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	msgs := map[string]*model.Message{
		"normal":      {},
		"fifo":        {MessageGroup: "g"},
		"delay":       {DeliveryTime: at},
		"transaction": {Transactional: true},
		"lite":        {LiteTopic: "l"},
	}
	for _, c := range []struct {
		topic   model.Topic
		accepts []string
	}{
		{model.Topic{Name: "n", Type: model.TopicNormal}, []string{"normal"}},
		{model.Topic{Name: "f", Type: model.TopicFIFO}, []string{"fifo"}},
		{model.Topic{Name: "d", Type: model.TopicDelay}, []string{"delay"}},
		{model.Topic{Name: "t", Type: model.TopicTransaction}, []string{"transaction"}},
		{model.Topic{Name: "m", Type: model.TopicMixed}, []string{"normal", "fifo", "delay", "transaction"}},
		{model.Topic{Name: "l", Type: model.TopicLite}, []string{"lite"}},
		{model.Topic{Name: "%RETRY%g", Type: model.TopicNormal}, []string{"normal", "fifo", "delay", "transaction", "lite"}},
		{model.Topic{Name: "%DLQ%g", Type: model.TopicNormal}, []string{"normal", "fifo", "delay", "transaction", "lite"}},
	} {
		for kind, m := range msgs {
			want := false
			for _, a := range c.accepts {
				want = want || a == kind
			}
			err := CheckType(m, c.topic)
			if want != (err == nil) || (err != nil && mqerr.KindOf(err) != mqerr.KindMessageTypeConflict) {
				t.Errorf("%s topic %q, %s message: err %v, want accepted %v", c.topic.Type, c.topic.Name, kind, err, want)
			}
		}
	}
}

func TestLimitsWithDefaults(t *testing.T) {
	if got := (Limits{}).WithDefaults(); got != DefaultLimits() {
		t.Fatalf("zero limits: %+v, want the defaults %+v", got, DefaultLimits())
	}
	set := Limits{MaxBodySize: 1, MaxProperties: 2, MaxPropertiesSize: 3, MaxMessageGroup: 4, MaxLiteTopic: 5, MaxDelay: 6, MaxTxRecovery: 7}
	if got := set.WithDefaults(); got != set {
		t.Fatalf("set limits changed: %+v", got)
	}
}
