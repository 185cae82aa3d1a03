// Package relay is the client-facing side of a replica-group member: it
// owns a bound listener and decides, connection by connection, where
// each goes. While this member leads, connections are handed to the
// local server (Relay.Local is the net.Listener it serves); while another
// member leads, each connection is piped byte for byte to that member's
// same listener, so clients may dial any member and TLS, auth and the
// protocol stay end to end with the leader. With no leader known, a new
// connection waits up to Options.LeaderWait for one, and is closed if
// none comes. A route may ask for a greeting (Options.Greeting, e.g. the
// address the client dialled) to be written to the leader ahead of each
// piped connection's bytes; the node asks for it only from a leader that
// says its listener reads one.
//
// Every route change closes the connections accepted under the previous
// route (local or piped): clients reconnect and reach the new leader.
//
// Files: relay.go holds the Relay: its Route, accepting, and piping to the
// leader.
//
// relay must not import broker/, storage/ or other gateway packages: the
// node tells it the route.
package relay
