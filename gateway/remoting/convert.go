package remoting

import (
	"bytes"
	"compress/gzip"
	"compress/zlib"
	"io"
	"net/netip"
	"strconv"
	"strings"

	"github.com/mqgate/mqgate/broker/mqerr"
	"github.com/mqgate/mqgate/broker/record"
	"github.com/mqgate/mqgate/gateway/remoting/wire"
	"github.com/mqgate/mqgate/storage/message"
)

// This file is where classic wire messages and stored records meet.

// Properties of the classic wire that mqgate keeps in its own records.
const (
	propFlag    = record.PropClassicFlag // non-zero user FLAG of a classic message
	propPopCK   = "POP_CK"
	propCluster = "CLUSTER"
	mqgPrefix   = "__MQG_"
)

// maxBody bounds an inflated message body (the store's default limit).
const maxBody = 4 << 20

// parseHost reads a record's host ("ip:port", "ip" or anything else).
func parseHost(s string) netip.AddrPort {
	if ap, err := netip.ParseAddrPort(s); err == nil {
		return netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())
	}
	if a, err := netip.ParseAddr(strings.Trim(s, "[]")); err == nil {
		return netip.AddrPortFrom(a.Unmap(), 0)
	}
	return netip.AddrPortFrom(netip.IPv4Unspecified(), 0)
}

// wireProperties renders a record's properties for classic clients:
// mqgate's own bookkeeping (__MQG_*) stays home. A property string that
// would not fit its 16-bit length keeps only the system properties.
func wireProperties(m *message.Message) string {
	build := func(systemOnly bool) string {
		var b strings.Builder
		for _, p := range m.Properties {
			if strings.HasPrefix(p.Key, mqgPrefix) || !wire.ValidProperty(p.Key, p.Value) {
				continue
			}
			if systemOnly && !record.Reserved(p.Key) {
				continue
			}
			b.WriteString(p.Key)
			b.WriteByte(wire.NameValueSep)
			b.WriteString(p.Value)
			b.WriteByte(wire.PropertySep)
		}
		return b.String()
	}
	s := build(false)
	if len(s) > wire.MaxPropertiesLen {
		s = build(true)
	}
	return s
}

// wireRecord converts a stored record for c. topic and queue override the
// record's own (check-backs name the real topic of a half message).
func (s *Server) wireRecord(c *conn, m *message.Message, topic string, queue int32) wire.Record {
	r := wire.Record{
		QueueID:     queue,
		QueueOffset: m.QueueOffset,
		PhysOffset:  m.PhysOffset,
		BornTime:    m.BornTime,
		BornHost:    parseHost(m.BornHost),
		StoreTime:   m.StoreTime,
		StoreHost:   s.storeHost(c),
		Body:        m.Body,
		Topic:       topic,
		Properties:  wireProperties(m),
	}
	if v, ok := m.Get(propFlag); ok {
		n, _ := strconv.ParseInt(v, 10, 32)
		r.Flag = int32(n)
	}
	if v, ok := m.Get(record.PropReconsumeTime); ok {
		n, _ := strconv.ParseInt(v, 10, 32)
		r.ReconsumeTimes = int32(max(n, 0))
	}
	if m.Flags&record.FlagTransactionPrepared != 0 {
		r.SysFlag |= wire.SysTxPrepared
	}
	if m.Flags&record.FlagGzip != 0 {
		// A gRPC producer's gzip body: classic consumers inflate zlib
		// only, so hand them the plain bytes.
		if plain, err := inflate(gzipReader, m.Body); err == nil {
			r.Body = plain
		}
	}
	return r
}

// appendRecords encodes records for c after dst.
func (s *Server) appendRecords(dst []byte, c *conn, ms []*message.Message) []byte {
	for _, m := range ms {
		r := s.wireRecord(c, m, m.Topic, m.QueueID)
		var err error
		if dst, err = wire.AppendRecord(dst, &r); err != nil {
			s.log.Warn("remoting: a stored message cannot be encoded for classic clients; skipped", "topic", m.Topic, "offset", m.QueueOffset, "err", err)
		}
	}
	return dst
}

func gzipReader(r io.Reader) (io.Reader, error) { return gzip.NewReader(r) }
func zlibReader(r io.Reader) (io.Reader, error) { return zlib.NewReader(r) }

// inflate decompresses b, refusing outputs over maxBody.
func inflate(open func(io.Reader) (io.Reader, error), b []byte) ([]byte, error) {
	zr, err := open(bytes.NewReader(b))
	if err != nil {
		return nil, err
	}
	out, err := io.ReadAll(io.LimitReader(zr, maxBody+1))
	if err != nil {
		return nil, err
	}
	if len(out) > maxBody {
		return nil, mqerr.Errorf(mqerr.KindBodyTooLarge, "the inflated body exceeds %d bytes", maxBody)
	}
	return out, nil
}

// classicMessage is one message as a classic producer sent it.
type classicMessage struct {
	props   []wire.Property
	body    []byte
	sysFlag int32
	flag    int32
	born    int64
}

// toRecord builds the stored record of a classic message: the body is
// stored inflated (gRPC consumers must get plain bytes), every property is
// kept except POP_CK and mqgate's own names, a missing UNIQ_KEY is minted
// (Go batches carry none) and CLUSTER is added.
func (s *Server) toRecord(c *conn, producerGroup string, cm classicMessage) (*message.Message, error) {
	body := cm.body
	if cm.sysFlag&wire.SysCompressed != 0 {
		switch (cm.sysFlag & wire.SysCompressionMask) >> 8 {
		case 0, 3:
			plain, err := inflate(zlibReader, body)
			if err != nil {
				if mqerr.KindOf(err) == mqerr.KindBodyTooLarge {
					return nil, err
				}
				return nil, mqerr.Errorf(mqerr.KindMessageCorrupted, "the body is flagged compressed but is not zlib data: %v", err)
			}
			body = plain
		default:
			return nil, mqerr.Errorf(mqerr.KindMessageCorrupted, "compression type %d (LZ4/ZSTD) is not supported; use zlib", (cm.sysFlag&wire.SysCompressionMask)>>8)
		}
	}
	m := &message.Message{BornTime: cm.born, BornHost: c.clientAddr(), Body: body}
	for _, p := range cm.props {
		if p.Key == propPopCK || strings.HasPrefix(p.Key, mqgPrefix) {
			continue
		}
		if len(p.Key) > message.MaxFieldLen || len(p.Value) > message.MaxFieldLen {
			return nil, mqerr.Errorf(mqerr.KindPropertiesTooLarge, "property %.40q is too long", p.Key)
		}
		m.Set(p.Key, p.Value)
	}
	if strings.TrimSpace(m.UniqKey()) == "" {
		m.Set(record.PropUniqKey, s.ids.Next())
	}
	if v, _ := m.Get(record.PropTranMsg); strings.EqualFold(v, "true") {
		m.Set(record.PropTranMsg, "true")
		if pg, _ := m.Get(record.PropProducerGroup); pg == "" && producerGroup != "" {
			m.Set(record.PropProducerGroup, producerGroup)
		}
	} else {
		m.Del(record.PropTranMsg)
	}
	m.Set(propCluster, s.cfg.ClusterName)
	if cm.flag != 0 {
		m.Set(propFlag, strconv.Itoa(int(cm.flag)))
	}
	return m, nil
}
