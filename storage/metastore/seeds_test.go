package metastore

import (
	"testing"

	"github.com/mqgate/mqgate/storage/internal/fuzzseed"
)

func TestWriteFuzzSeeds(t *testing.T) {
	if !fuzzseed.Enabled() {
		t.Skip("MQGATE_WRITE_SEEDS=1 regenerates testdata/fuzz")
	}
	fuzzseed.Write(t, "FuzzDecodeSnapshot", EncodeSnapshot([]byte(`[{"name":"T","type":1,"queue_count":8}]`)))
	fuzzseed.Write(t, "FuzzDecodeSnapshot", EncodeSnapshot(nil))
	fuzzseed.Write(t, "FuzzDecodeSnapshot", []byte("MQGS\x01\x00\x00\x00"))
}
