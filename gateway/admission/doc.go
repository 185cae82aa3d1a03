// Package admission owns the gateway's drain state: Accepting, then
// Draining once shutdown begins. Listeners ask it whether to take new work;
// long-running calls watch Draining() to end promptly.
//
// It also holds what listeners use to stay up under bad or excessive
// input: Budget, the bytes of requests a listener holds at once; Shares,
// a budget of which each key (a user, a client address) may hold only a
// share; and LogLimiter, which keeps a flood of bad requests from
// flooding the log.
//
// It must not import gen/, broker/ or any listener package.
package admission
