package v2service

import (
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

// resourceKey is how a namespaced resource is named inside mqgate:
// "ns%name", or the bare name without a namespace.
func resourceKey(ns, name string) string {
	if ns == "" {
		return name
	}
	return ns + "%" + name
}
