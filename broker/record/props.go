package record

import "github.com/mqgate/mqgate/storage/message"

// System property names. They follow RocketMQ's MessageConst so classic
// clients and tools read mqgate records as they would a broker's.
const (
	PropKeys            = "KEYS"
	PropTags            = "TAGS"
	PropUniqKey         = "UNIQ_KEY"
	PropShardingKey     = "__SHARDINGKEY" // FIFO message group
	PropDeliverMS       = "TIMER_DELIVER_MS"
	PropTranMsg         = "TRAN_MSG"
	PropProducerGroup   = "PGROUP"
	PropCheckImmunity   = "CHECK_IMMUNITY_TIME_IN_SECONDS"
	PropReconsumeTime   = "RECONSUME_TIME"
	PropRetryTopic      = "RETRY_TOPIC"
	PropRealTopic       = "REAL_TOPIC"
	PropRealQueue       = "REAL_QID"
	PropDLQOriginTopic  = "DLQ_ORIGIN_TOPIC"
	PropDLQOriginID     = "DLQ_ORIGIN_MESSAGE_ID"
	PropTraceContext    = "TRACE_CONTEXT"
	PropMsgType         = "MSG_TYPE"
	PropBornHost        = "__BORNHOST"
	PropDelayLevel      = "DELAY"
	PropMaxReconsume    = "MAX_RECONSUME_TIMES"
	PropOriginMessageID = "ORIGIN_MESSAGE_ID"
	PropWait            = "WAIT"
	// PropKeysList keeps v2 keys intact when one contains whitespace (KEYS
	// is space-separated); mqgate's own name.
	PropKeysList = "__MQG_KEYS"
	// PropTxID is the transaction id minted at send; mqgate's own name.
	PropTxID = "__MQG_TXID"
	// PropClassicFlag keeps a classic producer's user FLAG; mqgate's own
	// name, hidden from v2 consumers.
	PropClassicFlag = "__MQG_FLAG"
	// PropLiteTopic is the lite topic of a LITE message (upstream 5.4
	// spells it the same).
	PropLiteTopic = "__LITE_TOPIC"
)

// FlagGzip is the RocketMQ sysflag bit for a compressed body.
const FlagGzip uint32 = 0x1

// FlagTransactionPrepared is the sysflag of a half message.
const FlagTransactionPrepared uint32 = 0x4

// reserved are the property names users may not set, plus
// the names mqgate itself stores.
var reserved = map[string]bool{}

func init() {
	for _, n := range []string{
		"KEYS", "TAGS", "WAIT", "DELAY", "RETRY_TOPIC", "REAL_TOPIC", "REAL_QID", "TRAN_MSG", "PGROUP",
		"MIN_OFFSET", "MAX_OFFSET", "BUYER_ID", "ORIGIN_MESSAGE_ID", "TRANSFER_FLAG", "CORRECTION_FLAG",
		"MQ2_FLAG", "RECONSUME_TIME", "MSG_REGION", "TRACE_ON", "UNIQ_KEY", "MAX_RECONSUME_TIMES",
		"CONSUME_START_TIME", "POP_CK", "POP_CK_OFFSET", "1ST_POP_TIME", "TRAN_PREPARED_QUEUE_OFFSET",
		"DUP_INFO", "EXTEND_UNIQ_INFO", "INSTANCE_ID", "CORRELATION_ID", "REPLY_TO_CLIENT", "TTL",
		"ARRIVE_TIME", "PUSH_REPLY_TIME", "CLUSTER", "MSG_TYPE", "INNER_MULTI_QUEUE_OFFSET",
		"TIMER_DELAY_MS", "TIMER_DELAY_SEC", "TIMER_DELIVER_MS", "TIMER_ENQUEUE_MS", "TIMER_DEQUEUE_MS",
		"TIMER_ROLL_TIMES", "TIMER_OUT_MS", "TIMER_DEL_UNIQKEY", "TIMER_DELAY_LEVEL", "__BORNHOST",
		"BORN_TIMESTAMP", "DLQ_ORIGIN_TOPIC", "DLQ_ORIGIN_MESSAGE_ID", "__CRC32#",
		// stored by mqgate as well
		PropShardingKey, PropCheckImmunity, PropTraceContext, PropKeysList, PropTxID, PropClassicFlag,
		message.PropSalvaged, PropLiteTopic,
	} {
		reserved[n] = true
	}
}

// Reserved reports whether a user property may not use name.
func Reserved(name string) bool { return reserved[name] }

// ReservedNames lists the reserved names (for documentation and tests).
func ReservedNames() []string {
	out := make([]string, 0, len(reserved))
	for n := range reserved {
		out = append(out, n)
	}
	return out
}
