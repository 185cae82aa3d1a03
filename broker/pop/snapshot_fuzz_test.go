package pop

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
)

// describeSnapshot prints a decoded snapshot in a canonical order (maps
// iterate in any order, so encodings of one state differ byte-wise).
func describeSnapshot(st snapshotState) string {
	var w strings.Builder
	fmt.Fprintf(&w, "log %d journal %d\n", st.logPos, st.journalOffset)
	for _, sb := range st.subs {
		fmt.Fprintf(&w, "sub %q %q rr %d\n", sb.group, sb.topic, sb.rr)
		for _, id := range slices.Sorted(maps.Keys(sb.queues)) {
			q := sb.queues[id]
			fmt.Fprintf(&w, " queue %d next %d\n", id, q.next)
			for _, o := range slices.Sorted(maps.Keys(q.flights)) {
				f := q.flights[o]
				fmt.Fprintf(&w, "  flight %d %d %d e%d g%d v%d f%d %q %q %d %d\n", f.offset, f.phys, f.size,
					f.epoch, f.gen, f.visibleAt, f.flags, f.msgGroup, f.client, f.renewFrom, f.renewN)
			}
		}
	}
	return w.String()
}

func sampleSnapshotSubs() []*sub {
	a := newSub("G", "T")
	a.rr = 3
	a.q(0).next = 10
	a.add(&flight{queue: 0, offset: 7, phys: 700, size: 120, epoch: 2, gen: 5, visibleAt: 1_800_000_000_000, hidx: -1})
	a.add(&flight{queue: 0, offset: 8, phys: 820, size: 99, epoch: 1, gen: 1, visibleAt: 1_800_000_001_000, client: "c1", renewFrom: 1_799_999_999_000, renewN: 2, hidx: -1})
	a.q(3).next = 0
	b := newSub("FG", "FT")
	b.q(1).next = 4
	b.add(&flight{queue: 1, offset: 2, phys: 50, size: 10, epoch: 1, gen: 2, visibleAt: 5, flags: flagFIFO, msgGroup: "order-1", hidx: -1})
	b.add(&flight{queue: 1, offset: 3, phys: 60, size: 10, epoch: 0, gen: 0, visibleAt: 5, flags: flagFIFO | flagHeld, msgGroup: "order-1", hidx: -1})
	return []*sub{a, b}
}

func TestSnapshotRoundTrip(t *testing.T) {
	b := encodeSnapshot(1234, 56, sampleSnapshotSubs())
	st, err := decodeSnapshot(b)
	if err != nil {
		t.Fatal(err)
	}
	want := describeSnapshot(snapshotState{logPos: 1234, journalOffset: 56, subs: sampleSnapshotSubs()})
	if got := describeSnapshot(st); got != want {
		t.Fatalf("decoded\n%s\nwant\n%s", got, want)
	}
	for i := range b {
		if _, err := decodeSnapshot(b[:i]); err == nil {
			t.Fatalf("snapshot cut at %d of %d bytes accepted", i, len(b))
		}
	}
}

// FuzzSnapshotDecode: the POP snapshot blob is read from the disk. Any
// bytes either fail to decode or decode to a state that re-encodes to the
// same state.
func FuzzSnapshotDecode(f *testing.F) {
	f.Add(encodeSnapshot(1234, 56, sampleSnapshotSubs()))
	f.Add(encodeSnapshot(0, 0, nil))
	f.Fuzz(func(t *testing.T, b []byte) {
		st, err := decodeSnapshot(b)
		if err != nil {
			return
		}
		again, err := decodeSnapshot(encodeSnapshot(st.logPos, st.journalOffset, st.subs))
		if err != nil {
			t.Fatalf("re-encoded snapshot does not decode: %v", err)
		}
		if a, b := describeSnapshot(st), describeSnapshot(again); a != b {
			t.Fatalf("unstable snapshot:\n%s\nvs\n%s", a, b)
		}
	})
}
