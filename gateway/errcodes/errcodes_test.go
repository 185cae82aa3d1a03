package errcodes

import (
	"testing"

	"google.golang.org/grpc/codes"

	"github.com/mqgate/mqgate/broker/mqerr"
	v2 "github.com/mqgate/mqgate/gen/apache/rocketmq/v2"
)

func TestTableCoversEveryKind(t *testing.T) {
	for _, k := range mqerr.Kinds() {
		m, ok := Of(k)
		if !ok {
			t.Errorf("mqerr.%s has no row in errcodes's table", k)
			continue
		}
		if m.V2 == v2.Code_OK || m.V2 == v2.Code_MULTIPLE_RESULTS || m.V2 < 40000 || m.V2 >= 60000 {
			t.Errorf("mqerr.%s maps to %s, not an error code", k, m.V2)
		}
		if m.GRPC == codes.OK {
			t.Errorf("mqerr.%s maps to gRPC OK", k)
		}
		// Codes newer than the Go v5.1.3 client's enum print as garbage
		// there: only the lite kinds, which only lite operations (of
		// clients that know the codes) raise, may use them.
		lite := k == mqerr.KindIllegalLiteTopic || k == mqerr.KindLiteTopicQuota || k == mqerr.KindLiteSubscriptionQuota
		switch m.V2 {
		case v2.Code_ILLEGAL_LITE_TOPIC, v2.Code_INVALID_CLIENT_PROPERTIES, v2.Code_LITE_TOPIC_QUOTA_EXCEEDED, v2.Code_LITE_SUBSCRIPTION_QUOTA_EXCEEDED:
			if !lite {
				t.Errorf("mqerr.%s maps to %s, unknown to v5.1.3 clients", k, m.V2)
			}
		}
	}
	if _, ok := Of(mqerr.Kind(-1)); ok {
		t.Error("a negative kind has a row")
	}
	if _, ok := Of(mqerr.Kind(len(mqerr.Kinds()))); ok {
		t.Error("a kind past the last has a row")
	}
}

// Errors with only a gRPC code get the v2 code of the kind they stand for.
func TestCodeOfGRPC(t *testing.T) {
	want := map[codes.Code]v2.Code{
		codes.InvalidArgument:    v2.Code_BAD_REQUEST,
		codes.FailedPrecondition: v2.Code_BAD_REQUEST,
		codes.OutOfRange:         v2.Code_BAD_REQUEST,
		codes.AlreadyExists:      v2.Code_BAD_REQUEST,
		codes.Unauthenticated:    v2.Code_UNAUTHORIZED,
		codes.PermissionDenied:   v2.Code_FORBIDDEN,
		codes.NotFound:           v2.Code_NOT_FOUND,
		codes.ResourceExhausted:  v2.Code_TOO_MANY_REQUESTS,
		codes.DeadlineExceeded:   v2.Code_REQUEST_TIMEOUT,
		codes.Canceled:           v2.Code_REQUEST_TIMEOUT,
		codes.Unimplemented:      v2.Code_NOT_IMPLEMENTED,
		codes.Unavailable:        v2.Code_INTERNAL_SERVER_ERROR,
		codes.Unknown:            v2.Code_INTERNAL_ERROR,
		codes.Aborted:            v2.Code_INTERNAL_ERROR,
		codes.Internal:           v2.Code_INTERNAL_ERROR,
		codes.DataLoss:           v2.Code_INTERNAL_ERROR,
	}
	for c := codes.Canceled; c <= codes.Unauthenticated; c++ {
		if got := CodeOfGRPC(c); got != want[c] {
			t.Errorf("gRPC %v → %v, want %v", c, got, want[c])
		}
	}
}
