package mcpserver

import (
	"strings"
	"testing"
	"time"
)

func TestFindings(t *testing.T) {
	now := time.Unix(1_800_000_000, 0).UTC()
	has := func(t *testing.T, got []string, want ...string) {
		t.Helper()
		all := strings.Join(got, "\n")
		for _, w := range want {
			if !strings.Contains(all, w) {
				t.Errorf("findings %q lack %q", all, w)
			}
		}
	}
	// Nothing to do.
	has(t, findings(Diagnosis{Group: "g", Topics: []TopicDiagnosis{{Topic: "t"}}, Consumers: []Consumer{}}, now), "Nothing is stuck")
	has(t, findings(Diagnosis{Group: "g", Consumers: []Consumer{}}, now), "has not consumed any topic yet")
	// A poison message at its last delivery, dead letters, no consumer.
	d := Diagnosis{Group: "g", MaxDeliveryAttempts: 3, Consumers: []Consumer{},
		DeadLetters: DeadLetters{Topic: "%DLQ%g", Pending: 2, Oldest: []Message{{MessageID: "d1", DLQOriginTopic: "t", StoreTime: "2027-01-15T08:00:00Z"}}},
		Topics: []TopicDiagnosis{{Topic: "t", Ready: 4, InFlight: 1, Backlog: 5,
			OldestInFlight: &StuckMessage{Message: Message{MessageID: "m1"}, Deliveries: 3, MaxDeliveries: 3, VisibleAt: now.Add(time.Minute).Format(time.RFC3339Nano)}}}}
	has(t, findings(d, now), "No consumer of group g is connected", "m1 was delivered 3 times (of at most 3)", "goes to the dead-letter queue %DLQ%g when its deadline passes",
		"2 dead letters are pending in %DLQ%g (the oldest, d1 from t", "mqgate group redrive g")
	// Consumers connected but receiving nothing; a held FIFO message.
	d = Diagnosis{Group: "g", Consumers: []Consumer{{ClientID: "c"}},
		Topics: []TopicDiagnosis{{Topic: "t", Ready: 7, Backlog: 7}, {Topic: "f", Held: 2, InFlight: 1, Backlog: 3,
			OldestInFlight: &StuckMessage{Message: Message{MessageID: "h1", MessageGroup: "order-1"}, Held: true}}}}
	has(t, findings(d, now), "7 messages are ready and none is in flight although consumers are connected", `FIFO message h1 (message group "order-1") is held`)
	// A delivery whose deadline passed.
	d = Diagnosis{Group: "g", Consumers: []Consumer{{ClientID: "c"}}, Topics: []TopicDiagnosis{{Topic: "t", InFlight: 1, Backlog: 1,
		OldestInFlight: &StuckMessage{Message: Message{MessageID: "m2"}, Deliveries: 1, MaxDeliveries: 17, VisibleAt: now.Add(-time.Minute).Format(time.RFC3339Nano)}}}}
	has(t, findings(d, now), "its deadline passed")
}
