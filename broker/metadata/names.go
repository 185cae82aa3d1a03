package metadata

import (
	"strings"

	"github.com/mqgate/mqgate/broker/mqerr"
)

// Name limits.
const (
	MaxTopicName = 127
	MaxGroupName = 120
)

// Derived-name prefixes.
const (
	DLQPrefix   = "%DLQ%"
	RetryPrefix = "%RETRY%"
)

// DLQTopic names a group's dead-letter topic.
func DLQTopic(group string) string { return DLQPrefix + group }

// systemTopics are reserved upstream names; anything starting with
// "rmq_sys_" is reserved too (mqgate's own internal topics use it).
var systemTopics = map[string]bool{
	"TBW102": true, "SCHEDULE_TOPIC_XXXX": true, "BenchmarkTest": true, "RMQ_SYS_TRANS_HALF_TOPIC": true,
	"RMQ_SYS_TRACE_TOPIC": true, "RMQ_SYS_TRANS_OP_HALF_TOPIC": true, "TRANS_CHECK_MAX_TIME_TOPIC": true,
	"SELF_TEST_TOPIC": true, "OFFSET_MOVED_EVENT": true, "CHECKPOINT_TOPIC": true,
}

// SystemTopicPrefix marks store-internal topics.
const SystemTopicPrefix = "rmq_sys_"

func validChars(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '_', c == '-', c == '%', c == '|':
		default:
			return false
		}
	}
	return true
}

// ValidateTopicName checks a topic name a client may use (KindIllegalTopic).
// %RETRY% and %DLQ% names pass, so consumers can read dead letters.
func ValidateTopicName(name string) error {
	switch {
	case strings.TrimSpace(name) == "":
		return mqerr.Errorf(mqerr.KindIllegalTopic, "topic name is blank")
	case len(name) > MaxTopicName:
		return mqerr.Errorf(mqerr.KindIllegalTopic, "topic name %.40q... is %d characters, the limit is %d", name, len(name), MaxTopicName)
	case !validChars(name):
		return mqerr.Errorf(mqerr.KindIllegalTopic, "topic name %q has characters outside [%%|a-zA-Z0-9_-]", name)
	case systemTopics[name] || strings.HasPrefix(strings.ToLower(name), SystemTopicPrefix):
		return mqerr.Errorf(mqerr.KindIllegalTopic, "topic name %q is reserved for the system", name)
	}
	return nil
}

// ValidateGroupName checks a consumer group name (KindIllegalGroup).
func ValidateGroupName(name string) error {
	switch {
	case strings.TrimSpace(name) == "":
		return mqerr.Errorf(mqerr.KindIllegalGroup, "consumer group name is blank")
	case len(name) > MaxGroupName:
		return mqerr.Errorf(mqerr.KindIllegalGroup, "consumer group name %.40q... is %d characters, the limit is %d", name, len(name), MaxGroupName)
	case !validChars(name):
		return mqerr.Errorf(mqerr.KindIllegalGroup, "consumer group name %q has characters outside [%%|a-zA-Z0-9_-]", name)
	case strings.HasPrefix(name, "CID_RMQ_SYS_"):
		return mqerr.Errorf(mqerr.KindIllegalGroup, "consumer group name %q is reserved for the system", name)
	}
	return nil
}

// validateCreatable adds the rule that derived names are system-managed.
func validateCreatableTopic(name string) error {
	if err := ValidateTopicName(name); err != nil {
		return err
	}
	if strings.HasPrefix(name, DLQPrefix) || strings.HasPrefix(name, RetryPrefix) {
		return mqerr.Errorf(mqerr.KindIllegalTopic, "topic name %q uses a prefix mqgate manages (%s, %s)", name, DLQPrefix, RetryPrefix)
	}
	return nil
}
