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
// Files: admission.go (the Gate and its drain state), budget.go (Budget and
// LogLimiter), shares.go (Shares: a budget divided among keys, each holding
// at most its share).
//
// It must not import gen/, broker/ or any listener package.
package admission
