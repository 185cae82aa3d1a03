package remoting

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/mqgate/mqgate/broker"
	"github.com/mqgate/mqgate/broker/model"
	"github.com/mqgate/mqgate/gateway/remoting/codec"
)

// handler answers one request; nil means no response (oneway semantics
// of the code itself, e.g. END_TRANSACTION with "unknown yet").
// ctx is the request's context: it carries the authenticated user
// (auth.FromContext) when auth is on.
type handler func(ctx context.Context, c *conn, req *codec.Command) *codec.Command

// routes is the request-code table. Codes not listed are answered
// REQUEST_CODE_NOT_SUPPORTED (never silence: that costs a client its
// whole timeout).
func (s *Server) routes() map[int32]handler {
	return map[int32]handler{
		// NameServer
		reqGetRouteInfoByTopic:   s.routeInfo,
		reqGetBrokerClusterInfo:  s.clusterInfo,
		reqGetAllTopicListFromNS: s.topicList,
		reqDeleteTopicInNamesrv:  s.deleteTopic, // the same deletion as 215: one process
		reqPutKVConfig:           s.putKV,
		reqGetKVConfig:           s.getKV,
		reqDeleteKVConfig:        s.deleteKV,
		// Clients
		reqHeartBeat:              s.heartbeat,
		reqUnregisterClient:       s.unregisterClient,
		reqGetConsumerListByGroup: s.consumerList,
		reqCheckClientConfig:      s.checkClientConfig,
		reqLockBatchMQ:            s.lockBatch,
		reqUnlockBatchMQ:          s.unlockBatch,
		// Producing
		reqSendMessage:      s.send,
		reqSendMessageV2:    s.send,
		reqSendBatchMessage: s.send,
		reqEndTransaction:   s.endTransaction,
		// Request/reply
		reqSendReplyMessage:   s.sendReply,
		reqSendReplyMessageV2: s.sendReply,
		// Consuming
		reqPullMessage:             s.pull,
		reqLitePullMessage:         s.pull,
		reqQueryConsumerOffset:     s.queryConsumerOffset,
		reqUpdateConsumerOffset:    s.updateConsumerOffset,
		reqGetMaxOffset:            s.maxOffset,
		reqGetMinOffset:            s.minOffset,
		reqSearchOffsetByTimestamp: s.searchOffset,
		reqGetEarliestMsgStoreTime: s.earliestStoreTime,
		reqConsumerSendMsgBack:     s.sendBack,
		// Admin
		reqUpdateAndCreateTopic:      s.updateTopic,
		reqGetAllTopicConfig:         s.allTopicConfig,
		reqDeleteTopicInBroker:       s.deleteTopic,
		reqUpdateAndCreateSubGroup:   s.updateGroup,
		reqGetAllSubGroupConfig:      s.allGroupConfig,
		reqDeleteSubGroup:            s.deleteGroup,
		reqInvokeBrokerToResetOffset: s.resetOffset,
		reqGetTopicStatsInfo:         s.topicStats,
		reqGetConsumeStats:           s.consumeStats,
		reqGetConsumerConnectionList: s.consumerConnections,
		reqGetProducerConnectionList: s.producerConnections,
		reqGetConsumerRunningInfo:    s.consumerRunningInfo,
		reqConsumeMessageDirectly:    s.consumeMessageDirectly,
		reqGetBrokerRuntimeInfo:      s.runtimeInfo,
		reqGetTopicsByCluster:        s.clusterTopics,
		reqQueryTopicConsumeByWho:    s.topicConsumers,
		reqQueryTopicsByConsumer:     s.consumerTopics,
		// Query and view
		reqQueryMessage:    s.queryMessage,
		reqViewMessageByID: s.viewMessage,
		// POP (JSON headers only: the codes exceed int16)
		reqPopMessage:          s.popMessage,
		reqAckMessage:          s.ackMessage,
		reqBatchAckMessage:     s.batchAckMessage,
		reqChangeInvisibleTime: s.changeInvisibleTime,
	}
}

// parseFilter reads a subscription's expression by its expressionType:
// SQL92 is compiled (broker.SQLFilter: RocketMQ's SQL92 over the
// messages' properties, which upstream serves only with the broker's
// enablePropertyFilter on); TAG, empty or anything else is a tag set.
func parseFilter(expr, typ string) (model.Filter, error) {
	if strings.EqualFold(typ, "SQL92") {
		return broker.SQLFilter(expr)
	}
	return model.ParseTagFilter(expr)
}

func ok() *codec.Command { return &codec.Command{Code: codeSuccess} }

func invalid(format string, args ...any) *codec.Command {
	return &codec.Command{Code: codeInvalidParameter, Remark: fmt.Sprintf(format, args...)}
}

// fail maps a broker error through the one table.
func (s *Server) fail(ctx context.Context, err error) *codec.Command {
	code, remark := errorCode(ctx, s.log, err)
	return &codec.Command{Code: int32(code), Remark: remark}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// fields reads typed ext fields, remembering the first problem so a
// handler checks once (a required field that is
// missing or unparsable answers INVALID_PARAMETER naming it).
type fields struct {
	req *codec.Command
	err string
}

func (f *fields) bad(name, why string) {
	if f.err == "" {
		f.err = fmt.Sprintf("header field %s %s", name, why)
	}
}

// str returns a field; required ones must be present and non-blank.
func (f *fields) str(name string, required bool) string {
	v, ok := f.req.Ext[name]
	if required && (!ok || strings.TrimSpace(v) == "") {
		f.bad(name, "is required")
	}
	return v
}

func (f *fields) int64(name string, required bool, def int64) int64 {
	v, ok := f.req.Ext[name]
	if !ok || v == "" {
		if required {
			f.bad(name, "is required")
		}
		return def
	}
	n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
	if err != nil {
		f.bad(name, fmt.Sprintf("is not an integer: %.40q", v))
		return def
	}
	return n
}

func (f *fields) int32(name string, required bool, def int32) int32 {
	n := f.int64(name, required, int64(def))
	if n < -1<<31 || n > 1<<31-1 {
		f.bad(name, "is out of range")
		return def
	}
	return int32(n)
}

// bool is "true" (any case) or anything else.
func (f *fields) bool(name string) bool { return strings.EqualFold(f.req.Ext[name], "true") }

// failed returns the INVALID_PARAMETER answer when a field was bad.
func (f *fields) failed() *codec.Command {
	if f.err == "" {
		return nil
	}
	return &codec.Command{Code: codeInvalidParameter, Remark: f.err}
}
