package commitlog

import (
	"testing"

	"github.com/mqgate/mqgate/storage/internal/fuzzseed"
)

func TestWriteFuzzSeeds(t *testing.T) {
	if !fuzzseed.Enabled() {
		t.Skip("MQGATE_WRITE_SEEDS=1 regenerates testdata/fuzz")
	}
	data := logBytes(t, 6)
	fuzzseed.Write(t, "FuzzScanValid", data, uint16(4096))
	fuzzseed.Write(t, "FuzzScanValid", data[:len(data)-5], uint16(150))
	c := append([]byte(nil), data...)
	c[len(c)/2] ^= 0x40
	fuzzseed.Write(t, "FuzzScanValid", c, uint16(64))
	fuzzseed.Write(t, "FuzzScanValid", append(append([]byte(nil), data...), make([]byte, 100)...), uint16(300))
}
