package node

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/mqgate/mqgate/broker/metadata"
	"github.com/mqgate/mqgate/storage"
)

// StoreReport is what VerifyStore found (storage.VerifyReport).
type StoreReport = storage.VerifyReport

// StoreRepairReport is what RepairStore found and did
// (storage.RepairReport).
type StoreRepairReport = storage.RepairReport

// StoreDir returns the store directory of a gateway data directory:
// dataDir/store, where Open puts it, or dataDir itself when it is a store
// directory (as the store's own errors name it).
func StoreDir(dataDir string) (string, error) {
	if fi, err := os.Stat(filepath.Join(dataDir, "store")); err == nil && fi.IsDir() {
		return filepath.Join(dataDir, "store"), nil
	}
	for _, n := range []string{"commitlog", "FORMAT", "checkpoint"} {
		if _, err := os.Stat(filepath.Join(dataDir, n)); err == nil {
			return dataDir, nil
		}
	}
	return "", fmt.Errorf("no mqgate store in %s (neither %s nor a store directory)", dataDir, filepath.Join(dataDir, "store"))
}

// VerifyStore checks the store of a stopped gateway without changing it
// (storage.Verify).
func VerifyStore(dataDir string) (*StoreReport, error) {
	dir, err := StoreDir(dataDir)
	if err != nil {
		return nil, err
	}
	return storage.Verify(dir, storeCheckOptions())
}

// RepairStore repairs the store of a stopped gateway and opens it once
// (storage.Repair).
func RepairStore(ctx context.Context, dataDir string) (*StoreRepairReport, error) {
	dir, err := StoreDir(dataDir)
	if err != nil {
		return nil, err
	}
	return storage.Repair(ctx, dir, storeCheckOptions())
}

// SalvageStore repairs the store of a stopped gateway as RepairStore does
// and appends again the messages the cut would drop (storage.Salvage);
// it also finishes a salvage a crash interrupted.
func SalvageStore(ctx context.Context, dataDir string) (*StoreRepairReport, error) {
	dir, err := StoreDir(dataDir)
	if err != nil {
		return nil, err
	}
	return storage.Salvage(ctx, dir, storeCheckOptions())
}

// storeCheckOptions are the store options of verify, repair and salvage:
// a salvage copies the messages of clients' topics, retry and
// dead-letter topics included, and leaves out the broker's own
// bookkeeping (POP journal, staged delayed and transactional records),
// whose references to positions and queue offsets a copy would not keep.
func storeCheckOptions() storage.Options {
	return storage.Options{SalvageTopic: func(t string) bool { return !metadata.IsSystemTopic(t) }}
}
