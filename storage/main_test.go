package storage

import (
	"context"
	"os"
	"testing"
)

func TestMain(m *testing.M) {
	code := m.Run()
	if fx := &scanFixture; fx.s != nil {
		fx.s.Close(context.Background())
		os.RemoveAll(fx.dir)
	}
	os.Exit(code)
}
