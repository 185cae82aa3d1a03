package deploy

import (
	"encoding/json"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	bootstrapv3 "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"
	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	upstreamhttpv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/upstreams/http/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/known/anypb"
	"gopkg.in/yaml.v3"

	// Every typed_config the file uses must resolve: importing the
	// extension packages registers their types.
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/router/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/listener/tls_inspector/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/retry/host/previous_hosts/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"

	"github.com/mqgate/mqgate/gateway/node"
	"github.com/mqgate/mqgate/gateway/v2service"
)

const envoyFile = "envoy/envoy.yaml"

// loadEnvoy decodes an Envoy bootstrap written in YAML the way Envoy reads
// it: YAML → JSON → protojson into envoy.config.bootstrap.v3.Bootstrap,
// unknown fields rejected and every Any resolved; then the
// protoc-gen-validate rules of every message, including those inside the
// Anys (typed_config), are checked.
func loadEnvoy(text []byte) (*bootstrapv3.Bootstrap, error) {
	var doc any
	if err := yaml.Unmarshal(text, &doc); err != nil {
		return nil, fmt.Errorf("yaml: %w", err)
	}
	js, err := json.Marshal(doc)
	if err != nil {
		return nil, fmt.Errorf("yaml → json: %w", err)
	}
	var b bootstrapv3.Bootstrap
	if err := (protojson.UnmarshalOptions{Resolver: protoregistry.GlobalTypes}).Unmarshal(js, &b); err != nil {
		return nil, fmt.Errorf("bootstrap: %w", err)
	}
	if err := validateDeep(&b); err != nil {
		return nil, err
	}
	return &b, nil
}

type validator interface{ ValidateAll() error }

// validateDeep runs m's validation rules, then those of every message
// packed in an Any anywhere below m (PGV does not look inside Anys).
func validateDeep(m proto.Message) error {
	if v, ok := m.(validator); ok {
		if err := v.ValidateAll(); err != nil {
			return fmt.Errorf("%s: %w", m.ProtoReflect().Descriptor().FullName(), err)
		}
	}
	return walkAnys(m.ProtoReflect())
}

func walkAnys(m protoreflect.Message) error {
	if a, ok := m.Interface().(*anypb.Any); ok {
		inner, err := a.UnmarshalNew()
		if err != nil {
			return fmt.Errorf("typed_config %s: %w", a.GetTypeUrl(), err)
		}
		return validateDeep(inner)
	}
	var err error
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		switch {
		case fd.IsList() && fd.Message() != nil:
			l := v.List()
			for i := 0; i < l.Len() && err == nil; i++ {
				err = walkAnys(l.Get(i).Message())
			}
		case fd.IsMap() && fd.MapValue().Message() != nil:
			v.Map().Range(func(_ protoreflect.MapKey, mv protoreflect.Value) bool {
				err = walkAnys(mv.Message())
				return err == nil
			})
		case fd.Message() != nil && !fd.IsList() && !fd.IsMap():
			err = walkAnys(v.Message())
		}
		return err == nil
	})
	return err
}

func readFile(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func defaultPort(t *testing.T, addr string) uint32 {
	t.Helper()
	_, p, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	n, err := strconv.Atoi(p)
	if err != nil {
		t.Fatal(err)
	}
	return uint32(n)
}

// The shipped Envoy file is a valid bootstrap and says what mqgate needs.
func TestEnvoyConfig(t *testing.T) {
	b, err := loadEnvoy(readFile(t, envoyFile))
	if err != nil {
		t.Fatal(err)
	}
	def := node.Defaults()
	grpcPort, httpPort := defaultPort(t, def.GRPCAddr), defaultPort(t, def.HTTPAddr)

	clusters := map[string]*clusterv3.Cluster{}
	for _, c := range b.GetStaticResources().GetClusters() {
		clusters[c.GetName()] = c
	}
	upstreamPort := map[string]uint32{"mqgate_grpc": grpcPort, "mqgate_http": httpPort}
	for name, port := range upstreamPort {
		c := clusters[name]
		if c == nil {
			t.Fatalf("no cluster %s", name)
		}
		for _, le := range c.GetLoadAssignment().GetEndpoints() {
			for _, ep := range le.GetLbEndpoints() {
				if got := ep.GetEndpoint().GetAddress().GetSocketAddress().GetPortValue(); got != port {
					t.Errorf("cluster %s points at port %d, mqgate's default is %d", name, got, port)
				}
			}
		}
		if len(c.GetHealthChecks()) == 0 {
			t.Errorf("cluster %s has no active health check", name)
		}
	}
	// gRPC upstream: HTTP/2 with keepalive pings mqgate accepts, and the
	// gRPC health service of MessagingService.
	var po upstreamhttpv3.HttpProtocolOptions
	if err := clusters["mqgate_grpc"].GetTypedExtensionProtocolOptions()["envoy.extensions.upstreams.http.v3.HttpProtocolOptions"].UnmarshalTo(&po); err != nil {
		t.Fatalf("mqgate_grpc protocol options: %v", err)
	}
	h2 := po.GetExplicitHttpConfig().GetHttp2ProtocolOptions()
	if h2 == nil {
		t.Fatal("mqgate_grpc upstream is not explicitly HTTP/2")
	}
	// mqgate's keepalive enforcement (gateway/grpcserver) permits a ping
	// every 10 s or slower; faster pings get a GOAWAY (too_many_pings).
	if ka := h2.GetConnectionKeepalive().GetInterval().AsDuration(); ka < 10*time.Second {
		t.Errorf("upstream keepalive every %s: mqgate answers pings faster than 10 s with GOAWAY", ka)
	}
	hc := clusters["mqgate_grpc"].GetHealthChecks()[0].GetGrpcHealthCheck()
	if hc == nil || hc.GetServiceName() != "apache.rocketmq.v2.MessagingService" {
		t.Errorf("mqgate_grpc health check %v: want gRPC health of apache.rocketmq.v2.MessagingService", hc)
	}
	if p := clusters["mqgate_http"].GetHealthChecks()[0].GetHttpHealthCheck().GetPath(); p != "/readyz" {
		t.Errorf("mqgate_http health check path %q, want /readyz", p)
	}

	listenerPorts := map[string]uint32{"mqgate_grpc": grpcPort, "mqgate_http": httpPort}
	seenMessaging := false
	for _, l := range b.GetStaticResources().GetListeners() {
		if want, ok := listenerPorts[l.GetName()]; !ok || l.GetAddress().GetSocketAddress().GetPortValue() != want {
			t.Errorf("listener %s on port %d: want the mqgate port it fronts", l.GetName(), l.GetAddress().GetSocketAddress().GetPortValue())
		}
		for _, fc := range l.GetFilterChains() {
			for _, f := range fc.GetFilters() {
				var hcm hcmv3.HttpConnectionManager
				if err := f.GetTypedConfig().UnmarshalTo(&hcm); err != nil {
					t.Fatalf("listener %s filter %s: %v", l.GetName(), f.GetName(), err)
				}
				if idle := hcm.GetStreamIdleTimeout().AsDuration(); idle <= v2service.MaxLongPolling {
					t.Errorf("listener %s: stream idle timeout %s is not above the longest long poll %s", l.GetName(), idle, v2service.MaxLongPolling)
				}
				for _, vh := range hcm.GetRouteConfig().GetVirtualHosts() {
					for _, r := range vh.GetRoutes() {
						seenMessaging = checkRoute(t, l.GetName(), r, clusters) || seenMessaging
					}
				}
			}
		}
	}
	if !seenMessaging {
		t.Error("no route for /apache.rocketmq.v2.MessagingService/")
	}
}

// checkRoute checks one route and reports whether it is the
// MessagingService route.
func checkRoute(t *testing.T, listener string, r *routev3.Route, clusters map[string]*clusterv3.Cluster) bool {
	t.Helper()
	ra := r.GetRoute()
	if clusters[ra.GetCluster()] == nil {
		t.Errorf("%s route %s goes to unknown cluster %q", listener, r.GetName(), ra.GetCluster())
	}
	if listener != "mqgate_grpc" {
		return false
	}
	// Only UNAVAILABLE is retried: mqgate's drain promise (nothing
	// happened). Anything else may have stored a message.
	if on := ra.GetRetryPolicy().GetRetryOn(); on != "unavailable" {
		t.Errorf("gRPC route %s retries on %q, want exactly \"unavailable\"", r.GetName(), on)
	}
	if r.GetMatch().GetPrefix() != "/apache.rocketmq.v2.MessagingService/" {
		return false
	}
	if ra.GetTimeout() == nil || ra.GetTimeout().AsDuration() != 0 {
		t.Errorf("MessagingService route timeout %v, want 0s (long polls and Telemetry streams)", ra.GetTimeout())
	}
	if idle := ra.GetIdleTimeout().AsDuration(); idle <= 5*time.Minute {
		t.Errorf("MessagingService route idle timeout %s: Telemetry streams are quiet for up to 5 min", idle)
	}
	return true
}

// A typo anywhere in the file fails: unknown fields, unknown typed_config
// types and values the Envoy API rejects.
func TestEnvoyConfigRejectsTypos(t *testing.T) {
	orig := string(readFile(t, envoyFile))
	for _, tc := range []struct{ name, from, to string }{
		{"misspelled field", "stream_idle_timeout: 300s", "stream_idle_timout: 300s"},
		{"misspelled typed_config type", "filters.http.router.v3.Router", "filters.http.router.v3.Routr"},
		{"port out of range", "port_value: 8081 }", "port_value: 80810 }"},
		{"bad duration", "connect_timeout: 5s", "connect_timeout: 5 seconds"},
		{"empty cluster name", "cluster: mqgate_grpc\n", "cluster: \"\"\n"},
		{"unknown enum", "lb_policy: ROUND_ROBIN", "lb_policy: ROUND_ROBINN"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if !strings.Contains(orig, tc.from) {
				t.Fatalf("the file no longer contains %q: update the test", tc.from)
			}
			if _, err := loadEnvoy([]byte(strings.Replace(orig, tc.from, tc.to, 1))); err == nil {
				t.Fatalf("%s accepted", tc.name)
			} else {
				t.Logf("rejected: %v", err)
			}
		})
	}
}
