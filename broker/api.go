package broker

import (
	"time"

	"github.com/mqgate/mqgate/broker/model"
)

// ReceiveRequest is one POP receive.
type ReceiveRequest struct {
	Group, Topic string
	Filter       model.Filter
	// Max messages to return (capped at MaxReceiveBatch; ≤ 0 means 1).
	Max int
	// Invisible is how long delivered messages stay invisible. Ignored
	// when AutoRenew is set (the server renews, starting from 60 s).
	Invisible time.Duration
	// AutoRenew asks the server to extend invisibility while ClientID is
	// alive (push consumers).
	AutoRenew bool
	ClientID  string
	// Wait is how long to long-poll when nothing is visible; the edge
	// computes it so the answer leaves before the client's deadline.
	Wait time.Duration
	// AttemptID lets a FIFO consumer repeat a receive whose answer it lost.
	AttemptID string
	// QueueID restricts the receive to one queue; -1 means any queue.
	QueueID int32
}

// MaxReceiveBatch caps one receive.
const MaxReceiveBatch = 32

// Limits of invisibility.
const (
	MinReceiveInvisible = 10 * time.Second
	MaxInvisible        = 12 * time.Hour
	AutoRenewInvisible  = 60 * time.Second
)
