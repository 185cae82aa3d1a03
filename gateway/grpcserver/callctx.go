package grpcserver

import "context"

// WithCallIDs returns ctx carrying the client id and request id that
// ClientID and RequestID report. The interceptor chain sets both for every
// call it serves; this is for calling a service's handlers directly,
// outside the chain (tests, in-process callers).
func WithCallIDs(ctx context.Context, clientID, requestID string) context.Context {
	return context.WithValue(ctx, callInfoKey{}, &callInfo{clientID: clientID, requestID: requestID})
}
