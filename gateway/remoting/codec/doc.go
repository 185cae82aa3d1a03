// Package codec reads and writes classic RocketMQ remoting frames: the
// length-prefixed frame, its JSON header (serialize type 0) and its
// ROCKETMQ binary header (serialize type 1), into and out of Command.
//
// # Frame
//
//	0       4       5         8            8+H
//	┌───────┬───────┬─────────┬────────────┬──────────┐
//	│ len   │ type  │ hdrLen  │ header     │ body     │
//	│ u32 BE│ u8    │ u24 BE  │ hdrLen B   │ rest     │
//	└───────┴───────┴─────────┴────────────┴──────────┘
//	len = 4 + hdrLen + len(body); body length is derived, never sent.
//
// # Binary header (type 1)
//
//	code i16 | language u8 | version i16 | opaque i32 | flag i32 |
//	remarkLen i32, remark | extLen i32, ext block
//	ext block = repeated (keyLen i16, key, valLen i32, value)
//
// Every length read from the network is checked against what is left
// before it is used: Decode returns an error wrapping ErrMalformed and
// never panics or allocates more than the frame it was given. ReadFrame
// refuses a frame longer than the caller's maximum before reading its
// bytes, so one connection holds at most one maximum frame while reading.
//
// Files: codec.go holds Command, frame encoding and decoding in both header
// serializations, and the limits.
//
// codec imports only the standard library.
package codec
