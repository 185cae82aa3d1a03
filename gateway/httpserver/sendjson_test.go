package httpserver

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	restv1 "github.com/mqgate/mqgate/gen/mqgate/rest/v1"
)

var sendJSONSeeds = []string{
	`{"messages":[{"body":"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"}]}`,
	`{"topic":"t","messages":[{"text":"hello","tag":"a","keys":["k","l"],"properties":{"p":"v","q":""}}]}`,
	`{"messages":[{"body":"aGVsbG8="},{"body":"aGVsbG8"},{"body":"-_-_"},{"body":""},{"text":""}]}`,
	`{"messages":[{"body":"aGVs\nbG8="}]}`,
	`{"messages":[{"body":"aGVs\\nbG8="}]}`,
	`{"messages":[{"body":"aGVsbG8=="}]}`,
	"{\"messages\":[{\"body\":\"aGVs\nbG8=\"}]}",
	"{\"messages\":[{\"body\":\"aGVs\rbG8=\"}]}",
	"{\"messages\":[{\"body\":\"aGVs\tbG8=\"}]}",
	"{\"messages\":[{\"body\":\"aGVs\xc3\xa9bG8=\"}]}",
	`{"messages":[{"body":"aGVs\/bG8"}]}`,
	`{"messages":[{"body":"aGVsbG8=`,
	`{"messages":[{"body":"a+/_"}]}`,
	`{"messages":[{"message_group":"g","message_id":"01ABC","messageGroup":"h"}]}`,
	`{"messages":[{"messageGroup":"g","messageId":"01ABC"}]}`,
	`{"messages":[{"text":"a","body":"YQ=="}]}`,
	`{"messages":[{"body":"YQ==","text":"a"}]}`,
	`{"messages":[{"text":"a","text":"b"}]}`,
	`{"messages":[{"text":"tab\there \"q\" \\ \/ \b\f\r\n"}]}`,
	`{"messages":[{"text":"\u00e9\ud83d\ude00"}]}`,
	`{"messages":[{"text":"é😀 ünïcødé"}]}`,
	"{\"messages\":[{\"text\":\"\xff\"}]}",
	"{\"messages\":[{\"text\":\"a\x01\"}]}",
	`{"messages":[{"properties":{"a":"1","a":"2"}}]}`,
	`{"messages":[{"keys":[]},{"keys":null},{"properties":{}}]}`,
	`{"messages":null}`,
	`{"messages":[null]}`,
	`{"messages":[{"deliveryTimestamp":"2030-01-01T00:00:00Z"}]}`,
	`{"messages":[{"delivery_timestamp":"soon"}]}`,
	"{\n  \"messages\": [\n    {\"body\": \"%%%\"}\n  ]\n}",
	` { "messages" : [ { "text" : "x" } , { "tag" : "y" } ] } `,
	`{"messages":[{"text":"x"}]} x`,
	`{"messages":[{"text":"x"}]}{}`,
	`{"messages":[{"text":"x"},]}`,
	`{"messages":[{"text":"x",}]}`,
	`{"messages":[],"messages":[]}`,
	`{"topic":1}`,
	`{"unknown":1}`,
	`{"Messages":[]}`,
	`{}`,
	`[]`,
	``,
	"\x00\xff",
}

// FuzzSendJSON: the hand-written send decoder agrees with protojson on
// every body it takes, and takes none that protojson refuses.
func FuzzSendJSON(f *testing.F) {
	for _, s := range sendJSONSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		checkSendDecode(t, body)
	})
}

func checkSendDecode(t *testing.T, body []byte) bool {
	t.Helper()
	var fast restv1.SendMessagesRequest
	ok := decodeSendRequest(body, &fast)
	var want restv1.SendMessagesRequest
	err := protojson.UnmarshalOptions{}.Unmarshal(body, &want)
	if !ok {
		return false
	}
	if err != nil {
		t.Fatalf("decoded %q, which protojson refuses: %v", body, err)
	}
	if !proto.Equal(&fast, &want) {
		t.Fatalf("decoded %q as %v, protojson as %v", body, &fast, &want)
	}
	return true
}

// TestSendJSONDecode: the seeds agree with protojson, and the plain bodies
// take the hand-written path (the others fall back).
func TestSendJSONDecode(t *testing.T) {
	fastOnes := 0
	for _, s := range sendJSONSeeds {
		if checkSendDecode(t, []byte(s)) {
			fastOnes++
		}
	}
	for _, s := range []string{
		`{"messages":[{"body":"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"}]}`,
		`{"topic":"t","messages":[{"text":"hello","tag":"a","keys":["k","l"],"properties":{"p":"v","q":""}}]}`,
		`{"messages":[{"body":"aGVsbG8="},{"body":"aGVsbG8"},{"body":"-_-_"},{"body":""},{"text":""}]}`,
		`{"messages":[{"body":"aGVs\nbG8h"},{"body":"aGVs\/bG8"}]}`,
		`{"messages":[{"messageGroup":"g","messageId":"01ABC"},{"message_group":"g","message_id":"01ABC"}]}`,
		`{"messages":[{"text":"tab\there \"q\" \\ \/ \b\f\r\n"}]}`,
		`{"messages":[{"text":"é😀 ünïcødé"}]}`,
		` { "messages" : [ { "text" : "x" } , { "tag" : "y" } ] } `,
	} {
		if !decodeSendRequest([]byte(s), &restv1.SendMessagesRequest{}) {
			t.Errorf("%s fell back to protojson", s)
		}
	}
	for _, s := range []string{
		`{"messages":[{"text":"a","body":"YQ=="}]}`,
		`{"messages":null}`,
		"{\"messages\":[{\"text\":\"\xff\"}]}",
		"{\"messages\":[{\"body\":\"aGVs\nbG8=\"}]}",
		`{"messages":[]} x`,
	} {
		if decodeSendRequest([]byte(s), &restv1.SendMessagesRequest{}) {
			t.Errorf("%s was taken by the hand-written decoder", s)
		}
	}
	if fastOnes == 0 {
		t.Fatal("no seed took the hand-written path")
	}
}

// TestSendJSONDecodeErrors: a body the hand-written decoder leaves to
// protojson gets protojson's error, through the marshaler.
func TestSendJSONDecodeErrors(t *testing.T) {
	m := newMarshaler()
	for body, want := range map[string]string{
		`{"messages":[{"text":"a","body":"YQ=="}]}`:       `invalid JSON body: "text": error parsing "body", oneof mqgate.rest.v1.OutgoingMessage.content is already set (line 1, column 26)`,
		`{"messages":[{"body":"%%%"}]}`:                   `invalid JSON body: invalid value for bytes field body: "%%%" (line 1, column 22)`,
		`{"messages":[{"tag":"a","tag":"b"}]}`:            `invalid JSON body: duplicate field "tag" (line 1, column 25)`,
		`{"messages":[{"text":"x"}]} x`:                   `invalid JSON body: syntax error: invalid value x (line 1, column 29)`,
		`{"messages":[{"properties":{"a":"1","a":"2"}}]}`: `invalid JSON body: duplicate map key "a" (line 1, column 37)`,
	} {
		var req restv1.SendMessagesRequest
		err := m.NewDecoder(strings.NewReader(body)).Decode(&req)
		if err == nil || err.Error() != want {
			t.Errorf("%s: error %v, want %s", body, err, want)
		}
	}
}

// FuzzSendJSONResponse: the hand-written send response is protojson's
// (with the marshaler's options) but for the insignificant spaces
// protojson adds at random, and it gives up exactly where protojson fails.
func FuzzSendJSONResponse(f *testing.F) {
	f.Add("01ABCDEF", int32(20000), "OK", "", uint8(1), true)
	f.Add("", int32(0), "", "", uint8(0), true)
	f.Add("id\"\\\n\x01\x1f\x7f", int32(-4), "MASTER_PERSISTENCE_TIMEOUT", "é😀 <&> \u2028", uint8(3), true)
	f.Add("id", int32(1), "", "", uint8(2), false)
	f.Add("bad\xff", int32(1), "", "", uint8(1), false)
	f.Add("a", int32(1), "b", "bad\xc3", uint8(1), true)
	f.Fuzz(func(t *testing.T, id string, code int32, name, msg string, n uint8, withStatus bool) {
		r := &restv1.SendMessagesResponse{}
		for i := range int(n % 5) {
			res := &restv1.SendResult{MessageId: id}
			if withStatus || i%2 == 1 {
				res.Status = &restv1.Status{Code: code + int32(i), Name: name, Message: msg}
			}
			r.Results = append(r.Results, res)
		}
		checkSendEncode(t, r)
	})
}

func checkSendEncode(t *testing.T, r *restv1.SendMessagesResponse) {
	t.Helper()
	got, ok := appendSendResponse(nil, r)
	want, err := newMarshaler().JSONPb.Marshal(r)
	if !ok {
		if err == nil {
			t.Fatalf("%v: the hand-written encoder gave up, protojson wrote %s", r, want)
		}
		return
	}
	if err != nil {
		t.Fatalf("%v: encoded %s, protojson failed: %v", r, got, err)
	}
	var compact bytes.Buffer
	if err := json.Compact(&compact, want); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, compact.Bytes()) {
		t.Fatalf("encoded\n%s\nprotojson wrote\n%s", got, want)
	}
}

// TestSendJSONEncode: the marshaler writes a send's response as protojson
// does, results without a status and an empty list included.
func TestSendJSONEncode(t *testing.T) {
	for _, r := range []*restv1.SendMessagesResponse{
		{},
		{Results: []*restv1.SendResult{}},
		{Results: []*restv1.SendResult{{MessageId: "01A", Status: &restv1.Status{Code: 20000, Name: "OK"}}}},
		{Results: []*restv1.SendResult{{MessageId: "01A", Status: &restv1.Status{Code: 20000, Name: "OK"}}, {MessageId: "01B"}, {}}},
		{Results: []*restv1.SendResult{{MessageId: "x\u0000\t\"y\"", Status: &restv1.Status{Code: -1, Name: "n", Message: "stored, not durable: \\ é"}}}},
	} {
		checkSendEncode(t, r)
	}
	m := newMarshaler()
	r := &restv1.SendMessagesResponse{Results: []*restv1.SendResult{{MessageId: "01A", Status: &restv1.Status{Code: 20000, Name: "OK"}}}}
	b, err := m.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"results":[{"messageId":"01A","status":{"code":20000,"name":"OK","message":""}}]}`; string(b) != want {
		t.Fatalf("Marshal wrote %s, want %s", b, want)
	}
	// A nil result and invalid UTF-8 are protojson's to handle.
	if _, ok := appendSendResponse(nil, &restv1.SendMessagesResponse{Results: []*restv1.SendResult{nil}}); ok {
		t.Fatal("a nil result was encoded by hand")
	}
	if _, err := m.Marshal(&restv1.SendMessagesResponse{Results: []*restv1.SendResult{{MessageId: "\xff"}}}); err == nil {
		t.Fatal("invalid UTF-8 was encoded")
	}
}
