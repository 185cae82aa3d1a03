// Package deploy holds no code: it is where the deployment files live
// (envoy/, nginx/, k8s/, systemd/, grafana/, Dockerfile,
// mqgate.example.yaml; see README.md) and the tests that keep them honest:
// the Envoy bootstrap decodes into the Envoy API protos and validates, the
// Kubernetes, systemd and Docker files agree with the binary's defaults and
// flags, the example configuration loads, and every metric the Grafana
// dashboard queries exists on a running mqgate.
//
// Its tests may import anything; nothing imports this package.
package deploy
