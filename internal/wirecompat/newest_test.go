package wirecompat_test

import (
	"testing"

	"google.golang.org/protobuf/reflect/protoreflect"

	rocketmqv2 "github.com/mqgate/mqgate/gen/apache/rocketmq/v2"
)

// TestOursHasNewestUpstream pins what apache/rocketmq-apis HEAD (3e60073)
// added beyond the official Go client v5.1.3, which the comparison against
// that client cannot see. Numbers are the upstream ones.
func TestOursHasNewestUpstream(t *testing.T) {
	files := []protoreflect.FileDescriptor{
		rocketmqv2.File_apache_rocketmq_v2_definition_proto,
		rocketmqv2.File_apache_rocketmq_v2_service_proto,
		rocketmqv2.File_apache_rocketmq_v2_admin_proto,
	}
	find := func(name protoreflect.FullName) protoreflect.Descriptor {
		for _, f := range files {
			if d := f.Messages().ByName(name.Name()); d != nil && d.FullName() == name {
				return d
			}
			if d := f.Enums().ByName(name.Name()); d != nil && d.FullName() == name {
				return d
			}
			if d := f.Services().ByName(name.Name()); d != nil && d.FullName() == name {
				return d
			}
		}
		t.Fatalf("%s not declared", name)
		return nil
	}
	msg := func(name string) protoreflect.MessageDescriptor {
		return find(protoreflect.FullName("apache.rocketmq.v2." + name)).(protoreflect.MessageDescriptor)
	}
	fields := []struct {
		msg, field string
		num        protoreflect.FieldNumber
	}{
		{"SystemProperties", "lite_topic", 21},
		{"SystemProperties", "priority", 22},
		{"Settings", "client_properties", 9},
		{"Subscription", "lite_subscription_quota", 6},
		{"Subscription", "max_lite_topic_size", 7},
		{"AckMessageEntry", "lite_topic", 3},
		{"ForwardMessageToDeadLetterQueueRequest", "lite_topic", 7},
		{"ChangeInvisibleDurationRequest", "lite_topic", 6},
		{"ChangeInvisibleDurationRequest", "suspend", 7},
		{"TelemetryCommand", "notify_unsubscribe_lite_command", 9},
		{"SyncLiteSubscriptionRequest", "offset_option", 6},
		{"ListConsumerConnectionRequest", "liteTopic", 4}, // camelCase upstream
		{"ListMessageRequest", "lite_topic", 14},
		{"AdminSendMessageRequest", "ext_info", 8},
	}
	for _, f := range fields {
		fd := msg(f.msg).Fields().ByName(protoreflect.Name(f.field))
		if fd == nil || fd.Number() != f.num {
			t.Errorf("%s.%s = %d missing or renumbered", f.msg, f.field, f.num)
		}
	}

	enumValues := map[string]map[string]protoreflect.EnumNumber{
		"Code": {"ILLEGAL_LITE_TOPIC": 40020, "INVALID_CLIENT_PROPERTIES": 40021,
			"LITE_TOPIC_QUOTA_EXCEEDED": 42901, "LITE_SUBSCRIPTION_QUOTA_EXCEEDED": 42902},
		"MessageType":  {"LITE": 5, "PRIORITY": 6},
		"ClientType":   {"LITE_PUSH_CONSUMER": 5, "LITE_SIMPLE_CONSUMER": 6},
		"MessageModel": {"LITE_SELECTIVE": 3},
	}
	for enum, values := range enumValues {
		ed := find(protoreflect.FullName("apache.rocketmq.v2." + enum)).(protoreflect.EnumDescriptor)
		for name, num := range values {
			if v := ed.Values().ByName(protoreflect.Name(name)); v == nil || v.Number() != num {
				t.Errorf("%s.%s = %d missing or renumbered", enum, name, num)
			}
		}
	}

	services := map[string][]string{
		"MessagingService": {"QueryRoute", "Heartbeat", "SendMessage", "QueryAssignment",
			"ReceiveMessage", "AckMessage", "ForwardMessageToDeadLetterQueue", "PullMessage",
			"UpdateOffset", "GetOffset", "QueryOffset", "EndTransaction", "Telemetry",
			"NotifyClientTermination", "ChangeInvisibleDuration", "RecallMessage",
			"SyncLiteSubscription"},
		"Admin": {"ChangeLogLevel", "DescribeTopicStatus", "ListSubscription",
			"DescribeSubscription", "DeleteSubscription", "DescribeGroupAccumulation",
			"ListConsumerConnection", "ResetGroupOffset", "QueryMessage",
			"PrintThreadStackTrace", "VerifyMessage", "AdminSendMessage",
			"GetConsumerRunningInfo", "GetTopicRoute", "QueryTimeSpan", "GetProxyRuntimeStats"},
	}
	for svc, methods := range services {
		sd := find(protoreflect.FullName("apache.rocketmq.v2." + svc)).(protoreflect.ServiceDescriptor)
		if sd.Methods().Len() != len(methods) {
			t.Errorf("%s has %d methods, want %d", svc, sd.Methods().Len(), len(methods))
		}
		for _, m := range methods {
			if sd.Methods().ByName(protoreflect.Name(m)) == nil {
				t.Errorf("%s.%s missing", svc, m)
			}
		}
	}
	// Streaming kinds the official client does not have for SyncLiteSubscription.
	sls := find("apache.rocketmq.v2.MessagingService").(protoreflect.ServiceDescriptor).Methods().ByName("SyncLiteSubscription")
	if sls.IsStreamingClient() || sls.IsStreamingServer() {
		t.Errorf("SyncLiteSubscription must be unary")
	}
}
