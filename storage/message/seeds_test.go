package message

import (
	"testing"

	"github.com/mqgate/mqgate/storage/internal/fuzzseed"
)

func TestWriteFuzzSeeds(t *testing.T) {
	if !fuzzseed.Enabled() {
		t.Skip("MQGATE_WRITE_SEEDS=1 regenerates testdata/fuzz")
	}
	full := seal(t, sample(), 1<<40, 7, 1700000000000)
	fuzzseed.Write(t, "FuzzDecode", full)
	fuzzseed.Write(t, "FuzzDecode", seal(t, &Message{Topic: "t"}, 0, 0, 0))
	fuzzseed.Write(t, "FuzzDecode", full[:len(full)-1])
	bad := append([]byte(nil), full...)
	bad[len(bad)-1] ^= 1
	fuzzseed.Write(t, "FuzzDecode", bad)
	fuzzseed.Write(t, "FuzzDecode", []byte{})
}
