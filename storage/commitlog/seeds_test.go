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
	hdr := encodeStagingHeader(stagingHeader{size: 16 << 20, id: [16]byte{9, 8, 7}})
	fuzzseed.Write(t, "FuzzStagingHeader", hdr, int(0))
	bad := append([]byte(nil), hdr...)
	bad[20] ^= 1
	fuzzseed.Write(t, "FuzzStagingHeader", bad, int(4096))
	fuzzseed.Write(t, "FuzzStagingHeader", hdr[:30], int(8192))
}
