package archtest

import (
	"fmt"
	"strings"
)

// Module is mqgate's module path.
const Module = "github.com/mqgate/mqgate"

// Violation is one forbidden import edge.
type Violation struct {
	From, To, Rule string
}

func (v Violation) String() string { return fmt.Sprintf("%s imports %s: %s", v.From, v.To, v.Rule) }

func rel(p string) (string, bool) {
	if p == Module {
		return "", true
	}
	if strings.HasPrefix(p, Module+"/") {
		return strings.TrimPrefix(p, Module+"/"), true
	}
	return "", false
}

func under(p, dir string) bool { return p == dir || strings.HasPrefix(p, dir+"/") }

// edges of gateway listeners that must not import each other.
var listeners = []string{"gateway/grpcserver", "gateway/v2service", "gateway/httpserver", "gateway/restmessaging", "gateway/remoting", "gateway/admin"}

// serviceOnTransport lists the one allowed edge between listeners: the
// v2 MessagingService reads the per-call ids from the gRPC transport it is
// registered on (never the other way round).
var serviceOnTransport = [2]string{"gateway/v2service", "gateway/grpcserver"}

func isStd(p string) bool {
	first, _, _ := strings.Cut(p, "/")
	return !strings.Contains(first, ".")
}

// Check returns the violations of the import graph (package → its direct,
// non-test imports).
func Check(imports map[string][]string) []Violation {
	var out []Violation
	for from, tos := range imports {
		rf, ok := rel(from)
		if !ok {
			continue
		}
		for _, to := range tos {
			if r := check(rf, to); r != "" {
				out = append(out, Violation{From: from, To: to, Rule: r})
			}
		}
	}
	return out
}

func check(from, toFull string) string {
	to, internalTo := rel(toFull)
	protoish := strings.HasPrefix(toFull, "google.golang.org/protobuf") ||
		strings.HasPrefix(toFull, "google.golang.org/grpc") ||
		strings.HasPrefix(toFull, "github.com/grpc-ecosystem/") ||
		strings.HasPrefix(toFull, "github.com/golang/protobuf")
	switch {
	case under(from, "gen"):
		if internalTo && !under(to, "gen") {
			return "gen/ is generated code and imports nothing of mqgate but gen/"
		}
	case under(from, "sdk"):
		if internalTo && !under(to, "gen") && !under(to, "sdk") {
			return "sdk/ may import only gen/, grpc and protobuf (it is a module of its own)"
		}
		if !internalTo && !isStd(toFull) && !protoish && !strings.HasPrefix(toFull, "google.golang.org/genproto") {
			return "sdk/ may import only gen/, grpc and protobuf (it is a module of its own)"
		}
	case under(from, "storage"):
		if internalTo && !under(to, "storage") && !under(to, "internal") {
			return "storage is the bottom layer: it imports only storage/ and internal/"
		}
		if protoish {
			return "storage never sees protobuf or gRPC types"
		}
	case under(from, "broker"):
		if internalTo && !under(to, "broker") && !under(to, "storage") && !under(to, "internal") {
			return "broker imports only broker/, storage/ and internal/ (never gen/ or gateway/)"
		}
		if protoish {
			return "broker never sees protobuf or gRPC types"
		}
	case under(from, "internal/wirecompat"):
		// Test tooling that compares our generated descriptors with the
		// official client's: it must see gen/.
		if internalTo && !under(to, "internal") && !under(to, "gen") {
			return "internal/wirecompat imports only internal/ and gen/"
		}
	case under(from, "internal"):
		if internalTo && !under(to, "internal") {
			return "internal/ sits below everything and imports only internal/"
		}
	case under(from, "gateway"):
		if !internalTo {
			return ""
		}
		if under(to, "cmd") {
			return "dependencies point down: gateway must not import cmd"
		}
		if under(to, "gateway/node") && !under(from, "gateway/node") {
			return "only cmd and tests may import the composition root gateway/node"
		}
		if under(to, "storage") && !under(from, "gateway/node") && !under(to, "storage/message") {
			return "listeners reach storage through the broker (only gateway/node opens the store)"
		}
		for _, a := range listeners {
			for _, b := range listeners {
				if a != b && under(from, a) && under(to, b) && [2]string{a, b} != serviceOnTransport {
					return "listeners never import each other: share through gateway/session or gateway/admission"
				}
			}
		}
		if under(from, "gateway/httpserver") && under(to, "broker") {
			return "REST reaches the broker only through gRPC"
		}
		if (under(from, "gateway/console") || under(from, "gateway/mcpserver")) && (under(to, "broker") || under(to, "gateway/node") || under(to, "gateway/peer")) {
			return "the console and the MCP server reach mqgate only through its APIs"
		}
	case under(from, "cmd"):
		if internalTo && (under(to, "broker") || under(to, "storage")) {
			return "cmd composes the server through gateway/node, never broker/ or storage/ directly"
		}
	}
	if internalTo && under(to, "cmd") && !under(from, "cmd") {
		return "nothing imports cmd/"
	}
	return ""
}
