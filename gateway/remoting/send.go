package remoting

import (
	"context"
	"strings"

	"github.com/mqgate/mqgate/broker"
	"github.com/mqgate/mqgate/broker/metadata"
	"github.com/mqgate/mqgate/broker/model"
	"github.com/mqgate/mqgate/broker/record"
	"github.com/mqgate/mqgate/gateway/auth"
	"github.com/mqgate/mqgate/gateway/remoting/codec"
	"github.com/mqgate/mqgate/gateway/remoting/wire"
	"github.com/mqgate/mqgate/storage/message"
)

// sendShort maps SEND_MESSAGE_V2's one-letter names (also the header of
// SEND_BATCH_MESSAGE) to SEND_MESSAGE's: 10, 310 and
// 320 decode into one header.
var sendShort = map[string]string{
	"a": "producerGroup", "b": "topic", "c": "defaultTopic", "d": "defaultTopicQueueNums", "e": "queueId",
	"f": "sysFlag", "g": "bornTimestamp", "h": "flag", "i": "properties", "j": "reconsumeTimes", "k": "unitMode",
	"l": "maxReconsumeTimes", "m": "batch", "n": "brokerName",
}

// maxBatch bounds the messages of one SEND_BATCH_MESSAGE.
const maxBatch = 1024

// sendHeader returns a send's header fields under SEND_MESSAGE's names.
// For 310 and 320 a one-letter name wins over the long name given too, so
// the handler and the access check (auth.go) always read the same topic.
func sendHeader(req *codec.Command) map[string]string {
	if req.Code == reqSendMessage {
		return req.Ext
	}
	long := make(map[string]string, len(req.Ext))
	for k, v := range req.Ext {
		if _, short := sendShort[k]; !short {
			long[k] = v
		}
	}
	for k, v := range req.Ext {
		if n, short := sendShort[k]; short {
			long[n] = v
		}
	}
	return long
}

func (s *Server) send(ctx context.Context, c *conn, req *codec.Command) *codec.Command {
	if req.Code != reqSendMessage {
		req = &codec.Command{Code: req.Code, Opaque: req.Opaque, Flag: req.Flag, Ext: sendHeader(req), Body: req.Body}
	}
	f := fields{req: req}
	group := f.str("producerGroup", false)
	topic := f.str("topic", true)
	queue := f.int32("queueId", false, -1)
	sysFlag := f.int32("sysFlag", false, 0)
	born := f.int64("bornTimestamp", false, 0)
	flag := f.int32("flag", false, 0)
	props := f.str("properties", false)
	reconsume := f.int32("reconsumeTimes", false, 0)
	maxRe := f.int32("maxReconsumeTimes", false, -1)
	if r := f.failed(); r != nil {
		return r
	}
	if metadata.IsSystemTopic(topic) {
		return &codec.Command{Code: codeNoPermission, Remark: "topic " + topic + " is a system topic; sending to it is not allowed"}
	}
	if len(props) > wire.MaxPropertiesLen {
		return &codec.Command{Code: codeMessageIllegal, Remark: "the property string exceeds 32767 bytes"}
	}
	var cms []classicMessage
	if req.Code == reqSendBatchMessage {
		if strings.HasPrefix(topic, metadata.RetryPrefix) {
			return &codec.Command{Code: codeMessageIllegal, Remark: "batch messages cannot be sent to a retry topic"}
		}
		bms, err := wire.DecodeBatch(req.Body, maxBatch)
		if err != nil {
			return &codec.Command{Code: codeMessageIllegal, Remark: "batch body: " + err.Error()}
		}
		common := wire.ParseProperties(props)
		for _, bm := range bms {
			p := append(append([]wire.Property(nil), common...), wire.ParseProperties(bm.Properties)...)
			cms = append(cms, classicMessage{props: p, body: bm.Body, sysFlag: sysFlag, flag: bm.Flag, born: born})
		}
	} else {
		cms = []classicMessage{{props: wire.ParseProperties(props), body: req.Body, sysFlag: sysFlag, flag: flag, born: born}}
	}
	ctx, cancel := s.requestContext(ctx)
	defer cancel()
	recs := make([]*message.Message, len(cms))
	for i, cm := range cms {
		r, err := s.toRecord(c, group, cm)
		if err != nil {
			return s.fail(ctx, err)
		}
		recs[i] = r
	}
	sent, err := s.cl.SendRecords(ctx, broker.ClassicSend{Topic: topic, QueueID: queue, Records: recs,
		Producer: model.Producer{ClientID: group, Host: c.clientAddr()}, ReconsumeTimes: reconsume, MaxReconsumeTimes: maxRe})
	if err != nil {
		return s.fail(ctx, err)
	}
	store := s.storeHost(c)
	offIDs := make([]string, len(sent.Entries))
	for i, e := range sent.Entries {
		offIDs[i] = wire.OffsetMsgID(store, e.PhysOffset)
	}
	resp := &codec.Command{Code: codeSuccess, Ext: map[string]string{
		"msgId":       strings.Join(offIDs, ","),
		"queueId":     itoa(int64(sent.QueueID)),
		"queueOffset": itoa(sent.Entries[0].QueueOffset),
		"MSG_REGION":  "DefaultRegion",
		"TRACE_ON":    "true",
	}}
	if to, _ := recs[0].Get(propReplyToClient); to != "" {
		s.reg.sentRequest(c, to, s.cfg.Clock.Now())
	}
	if sent.TransactionID != "" {
		pg, _ := recs[0].Get(record.PropProducerGroup)
		s.reg.sentHalf(c, pg, auth.FromContext(ctx), s.cfg.Clock.Now())
		resp.Ext["transactionId"] = sent.TransactionID
	} else {
		resp.Ext["transactionId"] = recs[0].UniqKey()
	}
	if sent.FlushTimeout {
		resp.Code, resp.Remark = codeFlushDiskTimeout, "stored, but the disk flush did not finish in time"
	}
	return resp
}
