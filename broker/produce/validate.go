package produce

import (
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/mqgate/mqgate/broker/lite"
	"github.com/mqgate/mqgate/broker/model"
	"github.com/mqgate/mqgate/broker/mqerr"
	"github.com/mqgate/mqgate/broker/record"
)

// Limits of a message.
type Limits struct {
	MaxBodySize       int           // default 4 MiB
	MaxProperties     int           // user properties; default 128
	MaxPropertiesSize int           // user props + tag + keys, bytes; default 16384
	MaxMessageGroup   int           // bytes (exclusive); default 64
	MaxLiteTopic      int           // bytes (inclusive); default 64
	MaxDelay          time.Duration // default 24 h
	MaxTxRecovery     time.Duration // default 1 h
}

// DefaultLimits are upstream's.
func DefaultLimits() Limits {
	return Limits{MaxBodySize: 4 << 20, MaxProperties: 128, MaxPropertiesSize: 16384, MaxMessageGroup: 64, MaxLiteTopic: 64,
		MaxDelay: 24 * time.Hour, MaxTxRecovery: time.Hour}
}

// WithDefaults fills the zero limits with the defaults.
func (l Limits) WithDefaults() Limits {
	d := DefaultLimits()
	if l.MaxBodySize <= 0 {
		l.MaxBodySize = d.MaxBodySize
	}
	if l.MaxProperties <= 0 {
		l.MaxProperties = d.MaxProperties
	}
	if l.MaxPropertiesSize <= 0 {
		l.MaxPropertiesSize = d.MaxPropertiesSize
	}
	if l.MaxMessageGroup <= 0 {
		l.MaxMessageGroup = d.MaxMessageGroup
	}
	if l.MaxLiteTopic <= 0 {
		l.MaxLiteTopic = d.MaxLiteTopic
	}
	if l.MaxDelay <= 0 {
		l.MaxDelay = d.MaxDelay
	}
	if l.MaxTxRecovery <= 0 {
		l.MaxTxRecovery = d.MaxTxRecovery
	}
	return l
}

func hasControl(s string) bool {
	for _, r := range s {
		if r <= 0x1f || (r >= 0x7f && r <= 0x9f) {
			return true
		}
	}
	return false
}

func blank(s string) bool { return strings.TrimFunc(s, unicode.IsSpace) == "" }

// Validate checks one message against its resolved topic: ValidateMessage
// then CheckType, in upstream's order.
func Validate(m *model.Message, topic model.Topic, now time.Time, l Limits) error {
	if err := ValidateMessage(m, now, l); err != nil {
		return err
	}
	return CheckType(m, topic)
}

// ValidateMessage checks what a message must satisfy whatever its topic,
// in upstream's order, returning the first problem with its kind (and a
// declared type that contradicts the content). It
// is the one copy of these rules for every listener.
func ValidateMessage(m *model.Message, now time.Time, l Limits) error {
	l = l.WithDefaults()
	if len(m.Body) == 0 {
		return mqerr.Errorf(mqerr.KindBodyEmpty, "message body is empty")
	}
	if len(m.Body) > l.MaxBodySize {
		return mqerr.Errorf(mqerr.KindBodyTooLarge, "message body is %d bytes, the limit is %d", len(m.Body), l.MaxBodySize)
	}
	if len(m.Properties) > l.MaxProperties {
		return mqerr.Errorf(mqerr.KindPropertiesTooLarge, "message has %d user properties, the limit is %d", len(m.Properties), l.MaxProperties)
	}
	size := 0
	for k, v := range m.Properties {
		switch {
		case blank(k):
			return mqerr.Errorf(mqerr.KindIllegalPropertyKey, "user property name is blank")
		case record.Reserved(k):
			return mqerr.Errorf(mqerr.KindIllegalPropertyKey, "user property %q is a reserved system property name", k)
		case hasControl(k) || hasControl(v):
			return mqerr.Errorf(mqerr.KindIllegalPropertyKey, "user property %q has a control character in its name or value", k)
		case !utf8.ValidString(k) || !utf8.ValidString(v):
			return mqerr.Errorf(mqerr.KindIllegalPropertyKey, "user property %q is not valid UTF-8", k)
		}
		size += len(k) + len(v)
	}
	if m.Tag != "" {
		switch {
		case blank(m.Tag):
			return mqerr.Errorf(mqerr.KindIllegalTag, "tag is only whitespace")
		case strings.Contains(m.Tag, "|"):
			return mqerr.Errorf(mqerr.KindIllegalTag, "tag %q contains '|', which filter expressions use as a separator", m.Tag)
		case hasControl(m.Tag):
			return mqerr.Errorf(mqerr.KindIllegalTag, "tag has a control character")
		}
		size += len(m.Tag)
	}
	for _, k := range m.Keys {
		switch {
		case blank(k):
			return mqerr.Errorf(mqerr.KindIllegalKey, "a message key is blank")
		case hasControl(k):
			return mqerr.Errorf(mqerr.KindIllegalKey, "message key %q has a control character", k)
		}
		size += len(k)
	}
	if size > l.MaxPropertiesSize {
		return mqerr.Errorf(mqerr.KindPropertiesTooLarge, "user properties, tag and keys total %d bytes, the limit is %d", size, l.MaxPropertiesSize)
	}
	if blank(m.ID) {
		return mqerr.Errorf(mqerr.KindIllegalMessageID, "message id is blank")
	}
	if m.Transactional && m.TxRecovery > l.MaxTxRecovery {
		return mqerr.Errorf(mqerr.KindBadRequest, "orphaned transaction recovery duration %s exceeds %s", m.TxRecovery, l.MaxTxRecovery)
	}
	if !m.DeliveryTime.IsZero() && m.DeliveryTime.Sub(now) > l.MaxDelay {
		return mqerr.Errorf(mqerr.KindIllegalDeliveryTime, "delivery time %s is more than %s ahead (the maximum delay)",
			m.DeliveryTime.UTC().Format(time.RFC3339Nano), l.MaxDelay)
	}
	if m.MessageGroup != "" {
		switch {
		case blank(m.MessageGroup):
			return mqerr.Errorf(mqerr.KindIllegalMessageGroup, "message group is only whitespace")
		case len(m.MessageGroup) >= l.MaxMessageGroup:
			return mqerr.Errorf(mqerr.KindIllegalMessageGroup, "message group is %d bytes, it must be under %d", len(m.MessageGroup), l.MaxMessageGroup)
		case hasControl(m.MessageGroup):
			return mqerr.Errorf(mqerr.KindIllegalMessageGroup, "message group has a control character")
		}
	}
	if m.LiteTopic != "" {
		if err := lite.ValidateName(m.LiteTopic, l.MaxLiteTopic); err != nil {
			return err
		}
		if m.MessageGroup != "" || !m.DeliveryTime.IsZero() || m.Transactional {
			return mqerr.Errorf(mqerr.KindMessageTypeConflict, "a LITE message cannot have a message group, a delivery time or a transaction")
		}
	} else if m.Type == model.MessageLite {
		return mqerr.Errorf(mqerr.KindIllegalLiteTopic, "a LITE message must name its lite topic")
	}
	actual := m.ActualType()
	if m.Transactional && (m.MessageGroup != "" || !m.DeliveryTime.IsZero()) {
		return mqerr.Errorf(mqerr.KindMessageTypeConflict, "a TRANSACTION message cannot have a message group or a delivery time")
	}
	// The client declared one type but the content says another. (A FIFO
	// message with a delivery time is what the Go client builds for
	// "delayed FIFO": it is judged as DELAY against the topic.)
	if m.Type != model.MessageUnspecified && m.Type != actual &&
		!(m.Type == model.MessageFIFO && actual == model.MessageDelay && m.MessageGroup != "") {
		return mqerr.Errorf(mqerr.KindMessageTypeConflict, "message declared %s but its properties make it %s", m.Type, actual)
	}
	return nil
}

// CheckType checks the message's actual type against its topic's; retry and dead-letter topics take any type.
func CheckType(m *model.Message, topic model.Topic) error {
	if isSystemDerived(topic.Name) {
		return nil
	}
	if actual := m.ActualType(); !topic.Type.Accepts(actual) {
		return mqerr.Errorf(mqerr.KindMessageTypeConflict, "topic %q accepts %s messages, this one is %s", topic.Name, topic.Type, actual)
	}
	return nil
}

func isSystemDerived(name string) bool {
	return strings.HasPrefix(name, "%RETRY%") || strings.HasPrefix(name, "%DLQ%")
}
