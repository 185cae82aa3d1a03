package remoting

import (
	"context"
	"github.com/mqgate/mqgate/gateway/remoting/codec"
	"github.com/mqgate/mqgate/storage/message"
)

// maxQueryResults bounds QUERY_MESSAGE answers.
const maxQueryResults = 64

func (s *Server) queryMessage(ctx context.Context, c *conn, req *codec.Command) *codec.Command {
	f := fields{req: req}
	topic, key := f.str("topic", true), f.str("key", true)
	maxNum := f.int32("maxNum", false, 32)
	begin, end := f.int64("beginTimestamp", false, 0), f.int64("endTimestamp", false, 1<<62)
	if r := f.failed(); r != nil {
		return r
	}
	var ms []*message.Message
	var err error
	if f.bool("_UNIQUE_KEY_QUERY") {
		ms, err = s.cl.LookupByID(topic, key, maxQueryResults)
	} else {
		ms, err = s.cl.LookupByKey(topic, key, begin, end, int(max(1, min(maxNum, maxQueryResults))))
	}
	if err != nil {
		return s.fail(c.ctx, err)
	}
	if len(ms) == 0 {
		return &codec.Command{Code: codeQueryNotFound, Remark: "can not find message, maybe time range not correct"}
	}
	return &codec.Command{Code: codeSuccess, Body: s.appendRecords(nil, c, ms), Ext: map[string]string{
		"indexLastUpdateTimestamp": itoa(s.cfg.Clock.Now().UnixMilli()),
		"indexLastUpdatePhyoffset": itoa(s.cl.LogEnd()),
	}}
}

func (s *Server) viewMessage(ctx context.Context, c *conn, req *codec.Command) *codec.Command {
	f := fields{req: req}
	phys := f.int64("offset", true, 0)
	if r := f.failed(); r != nil {
		return r
	}
	m, err := s.cl.ReadAt(phys)
	if err != nil {
		return s.fail(c.ctx, err)
	}
	return &codec.Command{Code: codeSuccess, Body: s.appendRecords(nil, c, []*message.Message{m})}
}
