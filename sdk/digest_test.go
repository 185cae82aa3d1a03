package sdk

import (
	"errors"
	"testing"

	v2 "github.com/mqgate/mqgate/gen/apache/rocketmq/v2"
)

func TestCheckDigest(t *testing.T) {
	body := []byte("hello")
	for _, c := range []struct {
		d  *v2.Digest
		ok bool
	}{
		{nil, true},
		{&v2.Digest{Type: v2.DigestType_DIGEST_TYPE_UNSPECIFIED, Checksum: "x"}, true},
		{&v2.Digest{Type: v2.DigestType_CRC32, Checksum: "3610A686"}, true},
		{&v2.Digest{Type: v2.DigestType_CRC32, Checksum: "3610a686"}, true},
		{&v2.Digest{Type: v2.DigestType_CRC32, Checksum: "3610A687"}, false},
		{&v2.Digest{Type: v2.DigestType_CRC32, Checksum: "907126406"}, false}, // decimal is not hex
		{&v2.Digest{Type: v2.DigestType_MD5, Checksum: "5D41402ABC4B2A76B9719D911017C592"}, true},
		{&v2.Digest{Type: v2.DigestType_MD5, Checksum: "5d41402abc4b2a76b9719d911017c592"}, true},
		{&v2.Digest{Type: v2.DigestType_MD5, Checksum: "5D41402ABC4B2A76B9719D911017C593"}, false},
		{&v2.Digest{Type: v2.DigestType_SHA1, Checksum: "AAF4C61DDCC5E8A2DABEDE0F3B482CD9AEA9434D"}, true},
		{&v2.Digest{Type: v2.DigestType_SHA1, Checksum: ""}, false},
	} {
		err := checkDigest(c.d, body)
		if c.ok != (err == nil) || err != nil && !errors.Is(err, ErrCorruptBody) {
			t.Errorf("%v: %v", c.d, err)
		}
	}
	// fromV2 reports the mismatch and still returns the message with its
	// receipt handle.
	h := "h"
	m, err := fromV2(&v2.Message{Topic: &v2.Resource{Name: "t"}, Body: body, SystemProperties: &v2.SystemProperties{
		MessageId: "M", ReceiptHandle: &h, BodyDigest: &v2.Digest{Type: v2.DigestType_MD5, Checksum: "00"}}})
	if !errors.Is(err, ErrCorruptBody) || m == nil || m.ReceiptHandle != "h" {
		t.Fatalf("fromV2 with a bad digest: %v %v", m, err)
	}
}
