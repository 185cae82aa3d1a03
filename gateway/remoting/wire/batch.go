package wire

import "encoding/binary"

// BatchMessage is one message of a SEND_BATCH_MESSAGE body.
type BatchMessage struct {
	Flag       int32
	Body       []byte
	Properties string
}

const batchFixed = 4 + 4 + 4 + 4 + 4 + 2

// DecodeBatch parses a batch body; max bounds the number of messages.
// Bodies alias b.
func DecodeBatch(b []byte, max int) ([]BatchMessage, error) {
	var out []BatchMessage
	be := binary.BigEndian
	for p := 0; p < len(b); {
		if len(out) == max {
			return nil, malformed("batch has more than %d messages", max)
		}
		if len(b)-p < batchFixed {
			return nil, malformed("batch message at %d: %d bytes left, %d needed", p, len(b)-p, batchFixed)
		}
		size := int(int32(be.Uint32(b[p:])))
		if size < batchFixed || size > len(b)-p {
			return nil, malformed("batch message at %d: size %d, %d bytes left", p, size, len(b)-p)
		}
		m := b[p : p+size]
		bl := int(int32(be.Uint32(m[16:])))
		if bl < 0 || bl > size-batchFixed {
			return nil, malformed("batch message at %d: body length %d in a %d-byte message", p, bl, size)
		}
		pl := int(int16(be.Uint16(m[20+bl:])))
		if pl < 0 || 22+bl+pl != size {
			return nil, malformed("batch message at %d: size %d but body %d and properties %d", p, size, bl, pl)
		}
		out = append(out, BatchMessage{Flag: int32(be.Uint32(m[12:])), Body: m[20 : 20+bl], Properties: string(m[22+bl : 22+bl+pl])})
		p += size
	}
	if len(out) == 0 {
		return nil, malformed("empty batch")
	}
	return out, nil
}

// AppendBatch appends the batch body of msgs (as producers write it:
// magic and CRC zero).
func AppendBatch(dst []byte, msgs []BatchMessage) ([]byte, error) {
	be := binary.BigEndian
	for _, m := range msgs {
		if len(m.Properties) > MaxPropertiesLen {
			return dst, malformed("property string of %d bytes", len(m.Properties))
		}
		dst = be.AppendUint32(dst, uint32(batchFixed+len(m.Body)+len(m.Properties)))
		dst = be.AppendUint32(dst, 0)
		dst = be.AppendUint32(dst, 0)
		dst = be.AppendUint32(dst, uint32(m.Flag))
		dst = be.AppendUint32(dst, uint32(len(m.Body)))
		dst = append(dst, m.Body...)
		dst = be.AppendUint16(dst, uint16(len(m.Properties)))
		dst = append(dst, m.Properties...)
	}
	return dst, nil
}
