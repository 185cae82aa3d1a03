package remoting

import (
	"context"
	"errors"
	"testing"

	"github.com/mqgate/mqgate/broker/mqerr"
)

// Every Kind has a row in the one table, with a response code that fits
// a Go client's int16.
func TestResponseCodeTableCoversEveryKind(t *testing.T) {
	for _, k := range mqerr.Kinds() {
		code, ok := codeOfKind(k)
		if !ok {
			t.Errorf("kind %s has no remoting response code", k)
			continue
		}
		if k != mqerr.KindFlushTimeout && code == codeSuccess {
			t.Errorf("kind %s maps to SUCCESS", k)
		}
		if code < 0 {
			t.Errorf("kind %s maps to %d", k, code)
		}
	}
	if len(kindCodes) != len(mqerr.Kinds()) {
		t.Errorf("table has %d rows for %d kinds", len(kindCodes), len(mqerr.Kinds()))
	}
}

func TestErrorCodeHidesInternals(t *testing.T) {
	code, remark := errorCode(context.Background(), nil, errors.New("disk /secret/path exploded"))
	if code != codeSystemError || remark == "" || remark == "disk /secret/path exploded" {
		t.Fatalf("%d %q", code, remark)
	}
	code, remark = errorCode(context.Background(), nil, mqerr.Errorf(mqerr.KindTopicNotFound, "topic %q does not exist", "T"))
	if code != codeTopicNotExist || remark != `topic "T" does not exist` {
		t.Fatalf("%d %q", code, remark)
	}
}
