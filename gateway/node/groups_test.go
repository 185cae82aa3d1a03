package node

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// A member hands over the groups it leads beyond ⌈G/N⌉, highest first,
// to the members leading fewer than that, fewest first; nothing moves
// when it leads its share or less, or when no member leads fewer.
func TestPlanTransfer(t *testing.T) {
	voters := []uint64{1, 2, 3}
	for _, c := range []struct {
		leaders []uint64
		self    uint64
		groups  []int    // nil: no plan
		to      []uint64 //
		share   int
	}{
		{leaders: []uint64{1, 2, 3}, self: 1},
		{leaders: []uint64{1, 2, 3}, self: 3},
		{leaders: []uint64{1, 1, 1}, self: 1, groups: []int{2, 1, 0}, to: []uint64{2, 3}, share: 1},
		{leaders: []uint64{1, 1, 2}, self: 1, groups: []int{1, 0}, to: []uint64{3}, share: 1},
		{leaders: []uint64{1, 1, 2}, self: 2},
		{leaders: []uint64{2, 1, 1}, self: 1, groups: []int{2, 1}, to: []uint64{3}, share: 1},
		// Four groups over three members: a share of two.
		{leaders: []uint64{1, 1, 1, 2}, self: 1, groups: []int{2, 1, 0}, to: []uint64{3, 2}, share: 2},
		{leaders: []uint64{1, 1, 2, 2}, self: 1},
		// Two groups over three: one each at most.
		{leaders: []uint64{3, 3}, self: 3, groups: []int{1, 0}, to: []uint64{1, 2}, share: 1},
		// One group: nothing to spread.
		{leaders: []uint64{2}, self: 2},
	} {
		p := planTransfer(c.leaders, voters, c.self)
		if c.groups == nil {
			if p != nil {
				t.Fatalf("leaders %v, self %d: plan %+v, want none", c.leaders, c.self, p)
			}
			continue
		}
		if p == nil || !slices.Equal(p.groups, c.groups) || !slices.Equal(p.to, c.to) || p.share != c.share {
			t.Fatalf("leaders %v, self %d: plan %+v, want groups %v to %v share %d", c.leaders, c.self, p, c.groups, c.to, c.share)
		}
	}
	if got := leaderShare(3, 3); got != 1 {
		t.Fatalf("share of 3 groups over 3: %d", got)
	}
	if got := leaderShare(4, 3); got != 2 {
		t.Fatalf("share of 4 groups over 3: %d", got)
	}
}

// The data groups a cluster was created with are recorded on its first
// start and a restart with another number is refused, naming the one to
// use; a data directory of a cluster of one group (a raft log, no
// record) opens with one group only and is left as it was.
func TestCheckDataGroups(t *testing.T) {
	dir := t.TempDir()
	if err := checkDataGroups(dir, 3); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(dir, dataGroupsFile)); err != nil || strings.TrimSpace(string(b)) != "3" {
		t.Fatalf("record %q, %v", b, err)
	}
	if err := checkDataGroups(dir, 3); err != nil {
		t.Fatalf("restart with the same number: %v", err)
	}
	for _, g := range []int{1, 2, 5} {
		err := checkDataGroups(dir, g)
		if err == nil || !strings.Contains(err.Error(), "--data-groups 3") {
			t.Fatalf("restart with %d groups: %v, want a refusal naming --data-groups 3", g, err)
		}
	}
	one := t.TempDir()
	if err := os.Mkdir(filepath.Join(one, "raft"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := checkDataGroups(one, 3); err == nil || !strings.Contains(err.Error(), "--data-groups 1") {
		t.Fatalf("a cluster of one group restarted with 3: %v", err)
	}
	if err := checkDataGroups(one, 1); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(one, dataGroupsFile)); !os.IsNotExist(err) {
		t.Fatalf("a cluster of one group got a record: %v", err)
	}
	if err := os.WriteFile(filepath.Join(dir, dataGroupsFile), []byte("x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := checkDataGroups(dir, 3); err == nil || !strings.Contains(err.Error(), "damaged") {
		t.Fatalf("a damaged record: %v", err)
	}
}
