package remoting

// Request codes.
const (
	reqSendMessage              = 10
	reqPullMessage              = 11
	reqQueryMessage             = 12
	reqQueryConsumerOffset      = 14
	reqUpdateConsumerOffset     = 15
	reqUpdateAndCreateTopic     = 17
	reqGetAllTopicConfig        = 21
	reqSearchOffsetByTimestamp  = 29
	reqGetMaxOffset             = 30
	reqGetMinOffset             = 31
	reqGetEarliestMsgStoreTime  = 32
	reqViewMessageByID          = 33
	reqHeartBeat                = 34
	reqUnregisterClient         = 35
	reqConsumerSendMsgBack      = 36
	reqEndTransaction           = 37
	reqGetConsumerListByGroup   = 38
	reqCheckTransactionState    = 39
	reqNotifyConsumerIDsChanged = 40
	reqLockBatchMQ              = 41
	reqUnlockBatchMQ            = 42
	reqCheckClientConfig        = 46
	reqPutKVConfig              = 100
	reqGetKVConfig              = 101
	reqDeleteKVConfig           = 102
	reqGetRouteInfoByTopic      = 105
	reqGetBrokerClusterInfo     = 106
	reqUpdateAndCreateSubGroup  = 200
	reqGetAllSubGroupConfig     = 201
	reqGetAllTopicListFromNS    = 206
	reqDeleteSubGroup           = 207
	reqDeleteTopicInBroker      = 215
	reqDeleteTopicInNamesrv     = 216
	reqSendMessageV2            = 310
	reqSendBatchMessage         = 320
	reqLitePullMessage          = 361
	reqPopMessage               = 200050
	reqAckMessage               = 200051
	reqChangeInvisibleTime      = 200053
	reqBatchAckMessage          = 200151
)

// Response codes.
const (
	codeSuccess                   = 0
	codeSystemError               = 1
	codeSystemBusy                = 2
	codeRequestCodeNotSupported   = 3
	codeFlushDiskTimeout          = 10
	codeMessageIllegal            = 13
	codeServiceNotAvailable       = 14
	codeNoPermission              = 16
	codeTopicNotExist             = 17
	codeTopicExistAlready         = 18
	codePullNotFound              = 19
	codePullRetryImmediately      = 20
	codePullOffsetMoved           = 21
	codeQueryNotFound             = 22
	codeSubscriptionParseFailed   = 23
	codeSubscriptionNotExist      = 24
	codeSubscriptionGroupNotExist = 26
	codeConsumerNotOnline         = 206
	codeInvalidParameter          = 29
	codeNoMessage                 = 208
	codePollingFull               = 209
	codePollingTimeout            = 210
	codeIllegalOperation          = 604
	// Upstream 5.4's lite topic quotas (LMQ_QUOTA_EXCEEDED,
	// LITE_SUBSCRIPTION_QUOTA_EXCEEDED).
	codeLmqQuotaExceeded              = 2017
	codeLiteSubscriptionQuotaExceeded = 2018
)

// Version is what mqgate's frames say (MQVersion V5_3_3).
const Version = 479
