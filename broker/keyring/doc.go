// Package keyring holds the keys that sign the tokens clients keep
// (receipt handles, transaction ids, recall handles): a ring, newest
// first. The newest key signs; every key in the ring still verifies, so
// a rotation keeps the tokens signed before it valid for as long as the
// key they were signed with stays in the ring.
//
// A ring is kept as a blob of the metadata store. Its encoding:
//
//	"MQKR" | version u8 (1) | count u8 | per key, newest first:
//	  id u32 | created unix ms i64 | length u8 | secret
//
// Rings are what a cluster replicates (broker/raftstore), so every member
// verifies what any leader signed; a single node keeps its own.
//
// keyring imports only the standard library.
package keyring
