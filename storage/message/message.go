package message

import (
	"sort"
	"strings"
)

// Property names the store understands.
const (
	// PropTags is the message tag; its hash goes into the consume queue.
	PropTags = "TAGS"
	// PropKeys holds space-separated business keys; each is indexed.
	PropKeys = "KEYS"
	// PropUniqKey is the client's message id; it is indexed.
	PropUniqKey = "UNIQ_KEY"
	// PropSalvaged marks a record a salvage re-appended (storage.Salvage)
	// with the position and CRC of the record it copies, so that a salvage
	// run again after a crash copies nothing twice.
	PropSalvaged = "__MQG_SALVAGED"
)

// FlagControl marks store-internal control records (such as a topic
// deletion marker). Appenders may not set it.
const FlagControl uint32 = 1 << 31

// Property is one message property.
type Property struct {
	Key, Value string
}

// Message is the stored record.
type Message struct {
	Topic     string
	QueueID   int32
	Flags     uint32
	BornTime  int64 // unix ms
	BornHost  string
	StoreTime int64 // unix ms, set by the store
	StoreHost string
	// Properties are kept sorted by key with unique keys; use Set/Get.
	Properties []Property
	Body       []byte

	// Set by the store when the message is read.
	QueueOffset int64
	PhysOffset  int64
	Size        int32
}

// Get returns the value of property key.
func (m *Message) Get(key string) (string, bool) {
	i := sort.Search(len(m.Properties), func(i int) bool { return m.Properties[i].Key >= key })
	if i < len(m.Properties) && m.Properties[i].Key == key {
		return m.Properties[i].Value, true
	}
	return "", false
}

// Set sets property key, keeping Properties sorted.
func (m *Message) Set(key, value string) {
	i := sort.Search(len(m.Properties), func(i int) bool { return m.Properties[i].Key >= key })
	if i < len(m.Properties) && m.Properties[i].Key == key {
		m.Properties[i].Value = value
		return
	}
	m.Properties = append(m.Properties, Property{})
	copy(m.Properties[i+1:], m.Properties[i:])
	m.Properties[i] = Property{key, value}
}

// Del removes property key.
func (m *Message) Del(key string) {
	i := sort.Search(len(m.Properties), func(i int) bool { return m.Properties[i].Key >= key })
	if i < len(m.Properties) && m.Properties[i].Key == key {
		m.Properties = append(m.Properties[:i], m.Properties[i+1:]...)
	}
}

// Tag returns the TAGS property.
func (m *Message) Tag() string { v, _ := m.Get(PropTags); return v }

// UniqKey returns the UNIQ_KEY property (the client message id).
func (m *Message) UniqKey() string { v, _ := m.Get(PropUniqKey); return v }

// Keys returns the space-separated KEYS property split into keys.
func (m *Message) Keys() []string { v, _ := m.Get(PropKeys); return strings.Fields(v) }

// TagHash is the stable 64-bit hash of a tag stored in consume queues
// (FNV-1a); 0 means "no tag".
func TagHash(tag string) int64 { return tagHash(tag) }

// TagHashBytes is TagHash for a byte slice.
func TagHashBytes(tag []byte) int64 { return tagHash(tag) }

func tagHash[T string | []byte](tag T) int64 {
	if len(tag) == 0 {
		return 0
	}
	return int64(FNV64a(FNVOffset, tag))
}

// FNVOffset is the FNV-1a 64-bit offset basis.
const FNVOffset uint64 = 14695981039346656037

const fnvPrime = 1099511628211

// FNV64a folds s (a string or byte slice) into the FNV-1a hash h.
func FNV64a[T string | []byte](h uint64, s T) uint64 {
	for i := 0; i < len(s); i++ {
		h ^= uint64(s[i])
		h *= fnvPrime
	}
	return h
}
