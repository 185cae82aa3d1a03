package broker

import (
	"github.com/mqgate/mqgate/broker/deferred"
	"github.com/mqgate/mqgate/broker/lite"
	"github.com/mqgate/mqgate/broker/pop"
)

// What names a request's data group in a cluster of several (see
// broker/placement): a listener reads it from the tokens a client sends
// back, without authenticating them (the group's broker does).

// HandleQueue is the queue a receipt handle (a POP delivery's or a lite
// one's) names; ok is false for what is not a handle.
func HandleQueue(handle string) (q int32, ok bool) {
	if lite.IsHandle(handle) {
		return lite.HandleQueue(handle)
	}
	return pop.HandleQueue(handle)
}

// TokenGroup is the data group a transaction id or recall handle was
// minted by (0 for one without a group's mark).
func TokenGroup(token string) int { return deferred.TokenGroup(token) }
