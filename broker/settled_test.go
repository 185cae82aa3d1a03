package broker

import (
	"context"
	"errors"
	"testing"

	"github.com/mqgate/mqgate/storage"
	"github.com/mqgate/mqgate/storage/message"
)

// blockingStore's Append waits for release, or gives up when its
// context ends (as the store does: "the records may still be written").
type blockingStore struct {
	storeWriter
	started, release chan struct{}
}

func (b blockingStore) Append(ctx context.Context, msgs ...*message.Message) (storage.AppendResult, error) {
	close(b.started)
	select {
	case <-b.release:
	case <-ctx.Done():
	}
	if ctx.Err() != nil {
		return storage.AppendResult{}, errors.New("gave up: the records may still be written")
	}
	return storage.AppendResult{Status: storage.StatusOK}, nil
}

// An append the services make runs to its outcome when the caller's
// context ends meanwhile: the service learns whether the record was
// written before it changes its memory.
func TestSettledAppendOutlivesItsCaller(t *testing.T) {
	b := blockingStore{started: make(chan struct{}), release: make(chan struct{})}
	s := settledStore{b}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := s.Append(ctx, &message.Message{Topic: "t"})
		done <- err
	}()
	<-b.started
	cancel()
	close(b.release)
	if err := <-done; err != nil {
		t.Fatalf("append whose caller went away: %v, want its outcome (written)", err)
	}
}
