package grpcserver

import (
	"strings"
	"unicode/utf8"

	"github.com/mqgate/mqgate/broker/metadata"
	v2 "github.com/mqgate/mqgate/gen/apache/rocketmq/v2"
)

// checkTopic validates a topic Resource (the broker's rules: one list of
// reserved names for every edge) and returns its key.
func checkTopic(r *v2.Resource) (string, error) {
	if err := metadata.ValidateTopicName(r.GetName()); err != nil {
		return "", err
	}
	return resourceKey(r.GetResourceNamespace(), r.GetName()), nil
}

// checkGroup validates a consumer-group Resource and returns its key.
func checkGroup(r *v2.Resource) (string, error) {
	if err := metadata.ValidateGroupName(r.GetName()); err != nil {
		return "", err
	}
	return resourceKey(r.GetResourceNamespace(), r.GetName()), nil
}

// resourceKey is how a namespaced resource is named inside mqgate (spec
// §3.3): "ns%name", or the bare name without a namespace.
func resourceKey(ns, name string) string {
	if ns == "" {
		return name
	}
	return ns + "%" + name
}

// isControl is Java's isISOControl (spec §10.2).
func isControl(r rune) bool { return r <= 0x1f || (r >= 0x7f && r <= 0x9f) }

func hasControl(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < 0x20 || c == 0x7f {
			return true
		}
		if c >= utf8.RuneSelf {
			// Only multi-byte sequences can be U+0080–U+009F.
			for _, r := range s[i:] {
				if isControl(r) {
					return true
				}
			}
			return false
		}
	}
	return false
}

func isBlank(s string) bool { return strings.TrimSpace(s) == "" }
