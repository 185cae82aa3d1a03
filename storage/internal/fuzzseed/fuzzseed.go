package fuzzseed

import (
	"crypto/sha256"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Enabled reports whether seeds should be (re)written.
func Enabled() bool { return os.Getenv("MQGATE_WRITE_SEEDS") == "1" }

// Write stores one corpus entry for target; values are []byte, string,
// or integer types.
func Write(t testing.TB, target string, values ...any) {
	var sb strings.Builder
	sb.WriteString("go test fuzz v1\n")
	for _, v := range values {
		switch x := v.(type) {
		case []byte:
			fmt.Fprintf(&sb, "[]byte(%q)\n", x)
		case string:
			fmt.Fprintf(&sb, "string(%q)\n", x)
		case uint16:
			fmt.Fprintf(&sb, "uint16(%d)\n", x)
		case int:
			fmt.Fprintf(&sb, "int(%d)\n", x)
		default:
			t.Fatalf("fuzzseed: unsupported %T", v)
		}
	}
	dir := filepath.Join("testdata", "fuzz", target)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256([]byte(sb.String()))
	if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("seed-%x", sum[:8])), []byte(sb.String()), 0o644); err != nil {
		t.Fatal(err)
	}
}
