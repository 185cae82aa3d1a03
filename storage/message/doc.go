// Package message owns the stored record: the Message type and its
// versioned, CRC32C-protected binary codec. The commit log stores nothing
// else, so this record alone can rebuild every other view of the store.
//
// # Record layout (version 1, little-endian)
//
//	offset  size  field
//	     0     4  total size of the record in bytes, this field included
//	     4     4  magic: 'M' 'Q' 'G' <version=1>
//	     8     4  CRC32C (Castagnoli), see below
//	    12     8  physical offset   ┐ assigned by the store's writer
//	    20     8  queue offset      │ (hashed last, see below)
//	    28     8  store time (ms)   ┘
//	    36     4  queue id (int32)
//	    40     4  flags (uint32; bit 31 reserved for store control records)
//	    44     8  born time (unix ms)
//	    52     2  topic length T      then T bytes of topic
//	     .     2  born host length H  then H bytes
//	     .     2  store host length S then S bytes
//	     .     2  property count P    then P × (2 key len, key, 2 value len, value),
//	                                  keys strictly ascending (canonical, deterministic)
//	     .     4  body length B       then B bytes of body
//
// The CRC covers every byte of the record except itself, in this order:
//
//	CRC32C( bytes[0:8] ‖ bytes[36:size] ‖ bytes[12:36] )
//
// The store-assigned fields are hashed last so that appenders checksum the
// payload concurrently (Encode) and the single writer goroutine only folds
// in 24 bytes (Seal) once it knows the offsets.
//
// A record is valid only if its size is within [MinSize, limit], its
// magic is known, its CRC matches and every length inside it agrees with
// its size. Decode and the recovery scan never return a record that fails
// any of these checks.
//
// Decode makes no copies: the returned Message's strings and Body alias the
// buffer it was given (the store hands it a fresh copy of the record, so a
// read copies the body exactly once). Encode/Seal never retain the input.
//
// Files: codec.go holds the record format: encoding, sealing and decoding.
//
// message imports only the standard library.
package message
