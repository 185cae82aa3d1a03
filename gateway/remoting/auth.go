package remoting

import (
	"context"
	"strconv"
	"strings"
	"time"

	"github.com/mqgate/mqgate/broker/metadata"
	"github.com/mqgate/mqgate/broker/mqerr"
	"github.com/mqgate/mqgate/broker/record"
	"github.com/mqgate/mqgate/broker/txn"
	"github.com/mqgate/mqgate/gateway/auth"
	"github.com/mqgate/mqgate/gateway/remoting/codec"
)

// With Config.Auth set, dispatch runs every request through authenticate
// (the classic ACL signature, NameServer and Broker codes alike), then,
// for a code it serves, authorize (what accessRules says the request
// touches). A refusal is answered as upstream's AuthenticationPipeline and
// AuthorizationPipeline answer one (broker/auth/pipeline): NO_PERMISSION
// with the reason as the remark, nothing executed; a oneway request gets
// no answer.

// uniqueKeyQuery is the QUERY_MESSAGE field Java clients up to 4.9.3 add
// after signing; upstream leaves it out of the signed content for them.
const (
	uniqueKeyQuery = "_UNIQUE_KEY_QUERY"
	versionV4_9_3  = 399 // MQVersion.Version.V4_9_3.ordinal()
)

// authenticate verifies req's signature over its extension fields exactly
// as decoded (nothing normalized) and its body, and returns ctx carrying
// the user, or the answer refusing req.
func (s *Server) authenticate(ctx context.Context, c *conn, req *codec.Command) (context.Context, *codec.Command) {
	u, err := s.cfg.Auth.Remoting(req.Ext, req.Body)
	if err != nil && req.Version <= versionV4_9_3 {
		if _, quirk := req.Ext[uniqueKeyQuery]; quirk {
			ext := make(map[string]string, len(req.Ext))
			for k, v := range req.Ext {
				if k != uniqueKeyQuery {
					ext[k] = v
				}
			}
			if u2, err2 := s.cfg.Auth.Remoting(ext, req.Body); err2 == nil {
				u, err = u2, nil
			}
		}
	}
	if err == nil {
		err = s.checkSendTime(req)
	}
	if err != nil {
		return ctx, s.refuse(ctx, c, req, false, err)
	}
	return auth.NewContext(ctx, u), nil
}

// checkSendTime bounds how long a signed send can be replayed
// (Config.SendWindow): the classic signature covers the request's fields
// and body but no time, except the bornTimestamp every send and reply
// carries, which clients set at each attempt. Other codes carry no signed
// time and are not bounded.
func (s *Server) checkSendTime(req *codec.Command) error {
	w := s.cfg.SendWindow
	switch {
	case w <= 0:
		return nil
	case req.Code != reqSendMessage && req.Code != reqSendMessageV2 && req.Code != reqSendBatchMessage &&
		req.Code != reqSendReplyMessage && req.Code != reqSendReplyMessageV2:
		return nil
	}
	v := sendHeader(req)["bornTimestamp"]
	born, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return mqerr.Errorf(mqerr.KindUnauthorized, "a signed send must carry its bornTimestamp (Unix ms) within %s of the server's clock; got %.30q", w, v)
	}
	if d := s.cfg.Clock.Now().Sub(time.UnixMilli(born)); d > w || d < -w {
		return mqerr.Errorf(mqerr.KindUnauthorized, "the signed bornTimestamp %d is %s from the server's clock, more than %s (--remoting-send-window): a replayed request, or a client clock that is off",
			born, d.Round(time.Millisecond), w)
	}
	return nil
}

// authorize checks what req touches against the user in ctx.
func (s *Server) authorize(ctx context.Context, c *conn, req *codec.Command) *codec.Command {
	rule, found := accessRules[req.Code]
	if !found {
		// A code served without a rule (a table out of step): admins only.
		rule = admin
	}
	accs, bad := rule(s, req)
	if bad != nil {
		return bad
	}
	for _, acc := range accs {
		if err := s.cfg.Auth.Allow(ctx, acc); err != nil {
			return s.refuse(ctx, c, req, true, err)
		}
	}
	return nil
}

// refuse answers an authentication or authorization failure through the
// one error table (KindUnauthorized: NO_PERMISSION, the reason as remark),
// and counts and logs it (auth.Refused).
func (s *Server) refuse(ctx context.Context, c *conn, req *codec.Command, authorization bool, err error) *codec.Command {
	s.cfg.Auth.Refused(ctx, s.log, auth.Refusal{Listener: "remoting", Peer: c.peer(),
		Call: "request code " + strconv.Itoa(int(req.Code)), Authorization: authorization, Err: err})
	return s.fail(ctx, err)
}

// accessRule lists what a request touches, read from the same fields its
// handler reads. An answer instead refuses the request (a body its handler
// could not read either). Empty names are not checked: the handlers
// refuse requests missing the names they need.
type accessRule func(s *Server, req *codec.Command) ([]auth.Access, *codec.Command)

// accessRules is THE table from served request codes to what they touch
// (TestEveryServedCodeHasAnAccessRule). Codes touching no topic or group
// need only a valid signature; admin codes need an admin.
var accessRules = map[int32]accessRule{
	// NameServer
	reqGetRouteInfoByTopic:   routeAccess,
	reqGetBrokerClusterInfo:  admin,
	reqGetAllTopicListFromNS: admin,
	reqDeleteTopicInNamesrv:  admin,
	reqPutKVConfig:           admin,
	reqGetKVConfig:           admin,
	reqDeleteKVConfig:        admin,
	// Clients
	reqHeartBeat:              heartbeatAccess,
	reqUnregisterClient:       groupField("consumerGroup"),
	reqGetConsumerListByGroup: groupField("consumerGroup"),
	reqCheckClientConfig:      signedOnly, // validates a filter, touches nothing
	reqLockBatchMQ:            lockAccess,
	reqUnlockBatchMQ:          lockAccess,
	// Producing
	reqSendMessage:      sendAccess,
	reqSendMessageV2:    sendAccess,
	reqSendBatchMessage: sendAccess,
	reqEndTransaction:   endTransactionAccess,
	// A reply goes to the client its request named, on a topic nobody
	// subscribes to: any authenticated user may send one.
	reqSendReplyMessage:   signedOnly,
	reqSendReplyMessageV2: signedOnly,
	// Consuming
	reqPullMessage:             consumeFields("topic", "consumerGroup"),
	reqLitePullMessage:         consumeFields("topic", "consumerGroup"),
	reqQueryConsumerOffset:     consumeFields("topic", "consumerGroup"),
	reqUpdateConsumerOffset:    consumeFields("topic", "consumerGroup"),
	reqGetMaxOffset:            consumeFields("topic", ""),
	reqGetMinOffset:            consumeFields("topic", ""),
	reqSearchOffsetByTimestamp: consumeFields("topic", ""),
	reqGetEarliestMsgStoreTime: consumeFields("topic", ""),
	reqConsumerSendMsgBack:     sendBackAccess,
	// Admin
	reqUpdateAndCreateTopic:      admin,
	reqGetAllTopicConfig:         admin,
	reqDeleteTopicInBroker:       admin,
	reqUpdateAndCreateSubGroup:   admin,
	reqGetAllSubGroupConfig:      admin,
	reqDeleteSubGroup:            admin,
	reqInvokeBrokerToResetOffset: admin,
	reqGetTopicStatsInfo:         admin,
	reqGetConsumeStats:           admin,
	reqGetConsumerConnectionList: admin,
	reqGetProducerConnectionList: admin,
	reqGetConsumerRunningInfo:    admin,
	reqConsumeMessageDirectly:    admin,
	reqGetBrokerRuntimeInfo:      admin,
	reqGetTopicsByCluster:        admin,
	reqQueryTopicConsumeByWho:    admin,
	reqQueryTopicsByConsumer:     admin,
	// Query and view
	reqQueryMessage:    consumeFields("topic", ""),
	reqViewMessageByID: viewAccess,
	// POP
	reqPopMessage:          consumeFields("topic", "consumerGroup"),
	reqAckMessage:          consumeFields("topic", "consumerGroup"),
	reqBatchAckMessage:     batchAckAccess,
	reqChangeInvisibleTime: consumeFields("topic", "consumerGroup"),
}

func signedOnly(*Server, *codec.Command) ([]auth.Access, *codec.Command) { return nil, nil }

func admin(*Server, *codec.Command) ([]auth.Access, *codec.Command) {
	return []auth.Access{{Admin: true}}, nil
}

// routeAccess: a topic's route is open to whoever may publish to or
// consume it (a retry topic's to its group's users, auth.User.Allow). The
// auto-create topic's route names nothing but this broker, which any
// route already tells: producers of a new topic ask it before their first
// send, which is checked against the new topic. The same holds for the
// reply topic's (reply.go).
func routeAccess(s *Server, req *codec.Command) ([]auth.Access, *codec.Command) {
	if t := req.Ext["topic"]; t != autoCreateTopic && t != s.replyTopic() {
		return []auth.Access{{Route: t}}, nil
	}
	return nil, nil
}

// groupField: the request acts as the consumer group named by field.
func groupField(field string) accessRule {
	return func(_ *Server, req *codec.Command) ([]auth.Access, *codec.Command) {
		return []auth.Access{{Group: req.Ext[field]}}, nil
	}
}

// consumeFields: the request consumes the topic named by topicField (as
// the group named by groupField, when given).
func consumeFields(topicField, groupField string) accessRule {
	return func(_ *Server, req *codec.Command) ([]auth.Access, *codec.Command) {
		acc := auth.Access{Subscribe: req.Ext[topicField]}
		if groupField != "" {
			acc.Group = req.Ext[groupField]
		}
		return []auth.Access{acc}, nil
	}
}

// sendAccess: a send publishes to its topic; a send to a retry topic (a
// client's fallback when CONSUMER_SEND_MSG_BACK fails) acts as the
// topic's group, as upstream's DefaultAuthorizationContextBuilder has it.
func sendAccess(_ *Server, req *codec.Command) ([]auth.Access, *codec.Command) {
	topic := sendHeader(req)["topic"]
	if g, ok := strings.CutPrefix(topic, metadata.RetryPrefix); ok && g != "" {
		return []auth.Access{{Group: g}}, nil
	}
	return []auth.Access{{Publish: topic}}, nil
}

// endTransactionAccess: Publish on the half message's real topic. Classic
// clients name the half message by its commit-log offset and most send no
// topic (rocketmq-client-go v2, Java 4.x), so the topic is read from the
// record the request names; a header topic, when sent, is checked too.
// Upstream checks only the header topic, which let any signed user end
// another user's transaction; a record that is not a half message touches
// nothing here and the handler refuses it.
func endTransactionAccess(s *Server, req *codec.Command) ([]auth.Access, *codec.Command) {
	var accs []auth.Access
	if t := req.Ext["topic"]; t != "" {
		accs = append(accs, auth.Access{Publish: t})
	}
	if off, err := strconv.ParseInt(req.Ext["commitLogOffset"], 10, 64); err == nil && s.cl != nil {
		if rec, err := s.cl.ReadAt(off); err == nil && rec.Topic == txn.HalfTopic {
			if t, ok := rec.Get(record.PropRealTopic); ok && t != "" {
				accs = append(accs, auth.Access{Publish: t})
			}
		}
	}
	return accs, nil
}

// heartbeatAccess: each consumer group of the body, and each topic it
// subscribes (as upstream checks); producer groups need nothing.
func heartbeatAccess(_ *Server, req *codec.Command) ([]auth.Access, *codec.Command) {
	hb, err := decodeHeartbeat(req.Body)
	if err != nil {
		return nil, invalid("%v", err)
	}
	var accs []auth.Access
	for _, cd := range hb.ConsumerDataSet {
		accs = append(accs, auth.Access{Group: cd.GroupName})
		for _, sd := range cd.SubscriptionDataSet {
			accs = append(accs, auth.Access{Subscribe: sd.Topic})
		}
	}
	return accs, nil
}

// lockAccess: the body's group, and each queue's topic (as upstream).
func lockAccess(_ *Server, req *codec.Command) ([]auth.Access, *codec.Command) {
	b, bad := decodeLockBody(req)
	if bad != nil {
		return nil, bad
	}
	accs := []auth.Access{{Group: b.ConsumerGroup}}
	for _, mq := range b.MQSet {
		accs = append(accs, auth.Access{Subscribe: mq.Topic})
	}
	return accs, nil
}

// batchAckAccess: each acknowledged topic and group.
func batchAckAccess(_ *Server, req *codec.Command) ([]auth.Access, *codec.Command) {
	acks, err := decodeBatchAck(req.Body)
	if err != nil {
		return nil, invalid("%v", err)
	}
	accs := make([]auth.Access, 0, len(acks))
	for _, a := range acks {
		accs = append(accs, auth.Access{Subscribe: a.Topic, Group: a.Group})
	}
	return accs, nil
}

// viewAccess: VIEW_MESSAGE_BY_ID names only a commit-log offset, so the
// topic of the message stored there is what is read.
func viewAccess(s *Server, req *codec.Command) ([]auth.Access, *codec.Command) {
	rec, bad := s.recordAt(req, "offset")
	if bad != nil {
		return nil, bad
	}
	return []auth.Access{{Record: rec}}, nil
}

// sendBackAccess: CONSUMER_SEND_MSG_BACK acts as its group and copies the
// message at its offset into the group's retry or dead-letter topic, where
// the group's users read it: the caller must be allowed to consume the
// message's own topic (upstream checks only the group, which lets a user
// of any group read every topic by walking offsets). The handler then
// checks that the group consumes that topic (sendback.go).
func sendBackAccess(s *Server, req *codec.Command) ([]auth.Access, *codec.Command) {
	rec, bad := s.recordAt(req, "offset")
	if bad != nil {
		return nil, bad
	}
	return []auth.Access{{Group: req.Ext["group"]}, {Record: rec}}, nil
}

// recordAt reads what the commit-log offset in field holds, for an
// auth.Record: a message's topic, or nothing (no message starts there).
// A store that cannot be read is answered as such.
func (s *Server) recordAt(req *codec.Command, field string) (*auth.Record, *codec.Command) {
	f := fields{req: req}
	phys := f.int64(field, true, 0)
	if r := f.failed(); r != nil {
		return nil, r
	}
	rec := &auth.Record{Offset: phys}
	m, err := s.cl.ReadAt(phys)
	switch {
	case err == nil:
		rec.Topic = m.Topic
	case mqerr.KindOf(err) != mqerr.KindMessageNotFound:
		return nil, s.fail(s.group.Context(), err)
	}
	return rec, nil
}
