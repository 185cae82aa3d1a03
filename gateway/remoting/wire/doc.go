// Package wire holds the classic RocketMQ message layouts that travel in
// remoting bodies: the stored-message record of pull, query, view and
// transaction-check bodies (Encode/DecodeRecords), the batch-inner record
// of SEND_BATCH_MESSAGE (DecodeBatch), the property string (k\x01v\x02…)
// and message ids (offset ids and minted unique ids).
//
// # Stored-message record (big-endian, IPv4 hosts)
//
//	 0 TOTALSIZE i32     4 MAGICCODE i32 (0xDAA320A7 V1 / 0xDAA320AB V2)
//	 8 BODYCRC i32      12 QUEUEID i32     16 FLAG i32
//	20 QUEUEOFFSET i64  28 PHYSICALOFFSET i64
//	36 SYSFLAG i32      40 BORNTIMESTAMP i64
//	48 BORNHOST 4+4     56 STORETIMESTAMP i64   64 STOREHOST 4+4
//	72 RECONSUMETIMES i32   76 PREPAREDTRANSACTIONOFFSET i64
//	84 BODYLENGTH i32, body | TOPICLENGTH u8 (V1) or i16 (V2), topic |
//	   PROPERTIESLENGTH i16, properties
//
// IPv6 hosts (SYSFLAG 0x10 born, 0x20 store) take 16+4 bytes instead of
// 4+4. V1 is written whenever the topic fits 127 bytes: Go v2.1.2 always
// reads a one-byte topic length.
//
// # Batch-inner record (SEND_BATCH_MESSAGE body, repeated)
//
//	TOTALSIZE i32 | MAGICCODE i32 | BODYCRC i32 | FLAG i32 |
//	BODYLEN i32, body | PROPLEN i16, properties
//
// Every length read from the network is checked before use; decoders
// return errors wrapping ErrMalformed and never panic.
//
// Files: record.go holds the stored-message record classic consumers read
// and its encoding.
//
// wire imports only the standard library.
package wire
