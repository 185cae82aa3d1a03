package admin

import (
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	adminv1 "github.com/mqgate/mqgate/gen/mqgate/admin/v1"
)

// TestMergeDescriptionsOverGroups: each group's broker describes every
// queue, those of other groups empty; merged, each queue is its group's
// entry, counts add up, and a group's oldest in-flight message is the
// oldest of the groups'.
func TestMergeDescriptionsOverGroups(t *testing.T) {
	q := func(id int32, lo, hi int64) *adminv1.QueueOffsets {
		return &adminv1.QueueOffsets{QueueId: id, MinOffset: lo, MaxOffset: hi}
	}
	gq := func(id int32, consumed, hi int64) *adminv1.GroupQueueProgress {
		return &adminv1.GroupQueueProgress{QueueId: id, ConsumedOffset: consumed, MaxOffset: hi, Ready: hi - consumed}
	}
	inFlight := func(at int64) *adminv1.InFlightMessage {
		return &adminv1.InFlightMessage{Message: &adminv1.StoredMessage{StoreTime: timestamppb.New(time.UnixMilli(at))}}
	}
	// Group 0 holds queues 0 and 2, group 1 queues 1 and 3.
	a := &adminv1.DescribeTopicResponse{Messages: 7, Queues: []*adminv1.QueueOffsets{q(0, 0, 5), q(1, 0, 0), q(2, 1, 3), q(3, 0, 0)},
		Groups: []*adminv1.GroupTopicProgress{{Group: "cg", Ready: 3, InFlight: 1, Backlog: 4,
			Queues: []*adminv1.GroupQueueProgress{gq(0, 4, 5), gq(1, 0, 0), gq(2, 1, 3), gq(3, 0, 0)}, OldestInFlight: inFlight(200)}}}
	b := &adminv1.DescribeTopicResponse{Messages: 4, Queues: []*adminv1.QueueOffsets{q(0, 0, 0), q(1, 0, 4), q(2, 0, 0), q(3, 0, 0)},
		Groups: []*adminv1.GroupTopicProgress{
			{Group: "cg", Ready: 1, Held: 2, Backlog: 3, Queues: []*adminv1.GroupQueueProgress{gq(0, 0, 0), gq(1, 3, 4), gq(2, 0, 0), gq(3, 0, 0)}, OldestInFlight: inFlight(100)},
			{Group: "another", Ready: 4, Backlog: 4, Queues: []*adminv1.GroupQueueProgress{gq(1, 0, 4)}}}}
	m := mergeTopicDescriptions([]*adminv1.DescribeTopicResponse{a, b})
	if m.GetMessages() != 11 || len(m.GetQueues()) != 4 {
		t.Fatalf("merged: %d messages, %d queues", m.GetMessages(), len(m.GetQueues()))
	}
	for i, want := range [][2]int64{{0, 5}, {0, 4}, {1, 3}, {0, 0}} {
		if got := m.GetQueues()[i]; got.GetQueueId() != int32(i) || got.GetMinOffset() != want[0] || got.GetMaxOffset() != want[1] {
			t.Fatalf("merged queue %d: %v, want %v", i, got, want)
		}
	}
	if len(m.GetGroups()) != 2 || m.GetGroups()[0].GetGroup() != "another" || m.GetGroups()[1].GetGroup() != "cg" {
		t.Fatalf("merged groups: %v", m.GetGroups())
	}
	cg := m.GetGroups()[1]
	if cg.GetReady() != 4 || cg.GetInFlight() != 1 || cg.GetHeld() != 2 || cg.GetBacklog() != 7 || len(cg.GetQueues()) != 4 ||
		cg.GetQueues()[1].GetConsumedOffset() != 3 || cg.GetQueues()[0].GetConsumedOffset() != 4 {
		t.Fatalf("merged progress of cg: %v", cg)
	}
	if cg.GetOldestInFlight().GetMessage().GetStoreTime().AsTime().UnixMilli() != 100 {
		t.Fatalf("merged oldest in flight: %v", cg.GetOldestInFlight())
	}
	if a.GetMessages() != 7 || a.GetGroups()[0].GetReady() != 3 {
		t.Fatal("merging changed a part")
	}

	g := mergeGroupDescriptions([]*adminv1.DescribeGroupResponse{
		{Topics: []*adminv1.GroupTopicProgress{{Topic: "t", Ready: 2, Backlog: 2}}, DeadLetterQueue: &adminv1.DeadLetterQueue{Topic: "%DLQ%cg", Messages: 1, Exists: true}},
		{Topics: []*adminv1.GroupTopicProgress{{Topic: "t", Ready: 3, Backlog: 3}, {Topic: "u", Backlog: 1}}, DeadLetterQueue: &adminv1.DeadLetterQueue{Topic: "%DLQ%cg", Messages: 2}},
	})
	if len(g.GetTopics()) != 2 || g.GetTopics()[0].GetBacklog() != 5 || g.GetDeadLetterQueue().GetMessages() != 3 || !g.GetDeadLetterQueue().GetExists() {
		t.Fatalf("merged group description: %v", g)
	}
}
