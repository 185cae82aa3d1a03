package remoting

import (
	"context"
	"strconv"

	"github.com/mqgate/mqgate/gateway/remoting/codec"
	"github.com/mqgate/mqgate/gateway/remoting/wire"
)

// Request/reply: a requester sends an ordinary
// message carrying CORRELATION_ID, REPLY_TO_CLIENT (its client id) and
// TTL; the store adds CLUSTER. The responder consumes it and sends its
// answer to <cluster>_REPLY_TOPIC with SEND_REPLY_MESSAGE, which the
// broker pushes to the requester's connection (PUSH_REPLY_MESSAGE_TO_CLIENT)
// where it completes the waiting request.
const (
	reqSendReplyMessage         = 324
	reqSendReplyMessageV2       = 325
	reqPushReplyMessageToClient = 326

	replyTopicSuffix  = "_REPLY_TOPIC"
	propReplyToClient = "REPLY_TO_CLIENT"
	propCorrelationID = "CORRELATION_ID"
	propPushReplyTime = "PUSH_REPLY_TIME"
)

// replyTopic is the topic responders address: upstream's brokers create it
// at start; here it exists as a route only (replies are not stored).
func (s *Server) replyTopic() string { return s.cfg.ClusterName + replyTopicSuffix }

// sendReply answers SEND_REPLY_MESSAGE (324, SEND_MESSAGE's header) and
// SEND_REPLY_MESSAGE_V2 (325, short names): the reply is pushed to the
// requester's connection, and the answer says whether the requester took
// it (SUCCESS) or could not be reached (SYSTEM_ERROR, as upstream). The
// reply is not stored: upstream stores replies on the reply topic by
// default, where nothing reads them; a reply only matters to the request
// waiting for it, which times out on its own when the push fails.
func (s *Server) sendReply(ctx context.Context, c *conn, req *codec.Command) *codec.Command {
	ext := req.Ext
	if req.Code == reqSendReplyMessageV2 {
		ext = sendHeader(req)
	}
	f := fields{req: &codec.Command{Ext: ext}}
	topic := f.str("topic", true)
	props := f.str("properties", false)
	queue := f.int32("queueId", false, 0)
	f.int32("sysFlag", false, 0)
	f.int64("bornTimestamp", false, 0)
	f.int32("flag", false, 0)
	if r := f.failed(); r != nil {
		return r
	}
	if topic != s.replyTopic() {
		return &codec.Command{Code: codeMessageIllegal, Remark: "a reply goes to topic " + s.replyTopic() + ", not " + topic}
	}
	if len(props) > wire.MaxPropertiesLen {
		return &codec.Command{Code: codeMessageIllegal, Remark: "the property string exceeds 32767 bytes"}
	}
	var to, corr string
	ps := wire.ParseProperties(props)
	for _, p := range ps {
		switch p.Key {
		case propReplyToClient:
			to = p.Value
		case propCorrelationID:
			corr = p.Value
		}
	}
	if to == "" || corr == "" {
		return &codec.Command{Code: codeMessageIllegal, Remark: "a reply needs the properties " + propReplyToClient + " and " + propCorrelationID + " of its request"}
	}
	rc := s.reg.clientConn(to)
	if rc == nil {
		return &codec.Command{Code: codeSystemError, Remark: "push reply message fail, channel of <" + to + "> not found: the requester is not connected"}
	}
	now := s.cfg.Clock.Now().UnixMilli()
	push := map[string]string{
		"producerGroup":         ext["producerGroup"],
		"topic":                 topic,
		"defaultTopic":          ext["defaultTopic"],
		"defaultTopicQueueNums": ext["defaultTopicQueueNums"],
		"queueId":               strconv.Itoa(int(queue)),
		"sysFlag":               ext["sysFlag"],
		"bornTimestamp":         ext["bornTimestamp"],
		"flag":                  ext["flag"],
		"properties":            string(wire.AppendProperties(nil, append(ps, wire.Property{Key: propPushReplyTime, Value: strconv.FormatInt(now, 10)}))),
		"reconsumeTimes":        ext["reconsumeTimes"],
		"unitMode":              ext["unitMode"],
		"bornHost":              c.clientAddr(),
		"storeHost":             s.storeHost(c).String(),
		"storeTimestamp":        strconv.FormatInt(now, 10),
	}
	ctx, cancel := s.requestContext(ctx)
	defer cancel()
	resp, err := s.call(ctx, rc, reqPushReplyMessageToClient, push, req.Body)
	switch {
	case err != nil:
		s.log.Warn("remoting: pushing a reply to its requester failed", rc.logArgs("client", to, "err", err)...)
		return &codec.Command{Code: codeSystemError, Remark: "push reply message to " + to + " failed: " + err.Error()}
	case resp.Code != codeSuccess:
		return &codec.Command{Code: codeSystemError, Remark: "push reply message to " + to + " failed: the client answered " + strconv.Itoa(int(resp.Code)) + " " + resp.Remark}
	}
	// Upstream answers "0" for the ids of a reply it does not store.
	return &codec.Command{Code: codeSuccess, Ext: map[string]string{"msgId": "0", "queueId": strconv.Itoa(int(queue)), "queueOffset": "0",
		"MSG_REGION": "DefaultRegion", "TRACE_ON": "true"}}
}
