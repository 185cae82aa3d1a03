package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	reflectionpb "google.golang.org/grpc/reflection/grpc_reflection_v1"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

	"github.com/mqgate/mqgate/internal/testutil"
)

// The README's "Your first message" section, run for real: every mqgate
// command of its sh blocks through the binary, its Go program through the
// SDK and its grpcurl requests through a gRPC client, all against a
// server started as `make run` starts it. The README cannot rot.

type fence struct {
	lang string
	body string
}

// readmeSection returns the fenced blocks of the README section titled
// heading.
func readmeSection(t *testing.T, heading string) []fence {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(testutil.RepoRoot(), "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	i := strings.Index(s, "\n"+heading+"\n")
	if i < 0 {
		t.Fatalf("README.md has no %q section", heading)
	}
	s = s[i+len(heading)+2:]
	if j := strings.Index(s, "\n## "); j >= 0 {
		s = s[:j]
	}
	var out []fence
	for {
		i := strings.Index(s, "```")
		if i < 0 {
			return out
		}
		s = s[i+3:]
		nl := strings.IndexByte(s, '\n')
		lang := strings.TrimSpace(s[:nl])
		s = s[nl+1:]
		j := strings.Index(s, "```")
		if j < 0 {
			t.Fatal("README.md: unterminated code block")
		}
		out = append(out, fence{lang: lang, body: s[:j]})
		s = s[j+3:]
	}
}

// shellLines joins backslash continuations.
func shellLines(body string) []string {
	var out []string
	cur := ""
	for _, l := range strings.Split(body, "\n") {
		if strings.HasSuffix(l, "\\") {
			cur += strings.TrimSuffix(l, "\\") + " "
			continue
		}
		cur += l
		if strings.TrimSpace(cur) != "" {
			out = append(out, strings.TrimSpace(cur))
		}
		cur = ""
	}
	return out
}

// makeRunArgs are the serve flags of the Makefile's run target, without
// --data-dir (the test uses its own).
func makeRunArgs(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(testutil.RepoRoot(), "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^run:.*\n\t\./mqgate serve (.*)$`).FindStringSubmatch(string(b))
	if m == nil {
		t.Fatal("Makefile: no `./mqgate serve` line under run:")
	}
	var args []string
	f := strings.Fields(m[1])
	for i := 0; i < len(f); i++ {
		if f[i] == "--data-dir" {
			i++
			continue
		}
		args = append(args, f[i])
	}
	return args
}

func TestReadmeFirstMessage(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end")
	}
	blocks := readmeSection(t, "## Your first message")
	p := testutil.Start(t, testutil.StartOptions{NoRemoting: true, Args: makeRunArgs(t)})
	dir := t.TempDir()
	wrapper := filepath.Join(dir, "mqgate")
	script := fmt.Sprintf("#!/bin/sh\nexec %q \"$@\" --server %q\n", testutil.Binary(t), p.GRPC)
	if err := os.WriteFile(wrapper, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}

	var cli, grpcurl []string
	var goProgram string
	for _, b := range blocks {
		switch b.lang {
		case "sh":
			for _, l := range shellLines(b.body) {
				switch {
				case l == "make run":
				case strings.HasPrefix(l, "grpcurl "):
					grpcurl = append(grpcurl, l)
				case strings.Contains(l, "./mqgate "):
					cli = append(cli, l)
				default:
					t.Fatalf("README: a command the test does not know how to run: %q", l)
				}
			}
		case "go":
			goProgram = b.body
		}
	}
	if len(cli) < 7 || len(grpcurl) < 4 || goProgram == "" {
		t.Fatalf("README section lost its examples: %d CLI commands, %d grpcurl commands, Go program %v", len(cli), len(grpcurl), goProgram != "")
	}

	t.Run("cli", func(t *testing.T) {
		var all strings.Builder
		for _, l := range cli {
			line := strings.ReplaceAll(l, "./mqgate ", wrapper+" ")
			cmd := exec.Command("sh", "-c", line)
			cmd.Dir = dir
			var out, errb bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &errb
			if err := cmd.Run(); err != nil {
				t.Fatalf("README command %q: %v\nstdout: %s\nstderr: %s", l, err, out.String(), errb.String())
			}
			all.WriteString(out.String())
			if strings.HasPrefix(l, "./mqgate receive --group readers --topic hello") && !strings.Contains(l, "--max") &&
				!strings.Contains(out.String(), `"body":"Hello, mqgate!"`) {
				t.Fatalf("%q did not receive the message sent before it:\n%s", l, out.String())
			}
		}
		for _, want := range []string{"sent message ", "sent 3 messages to hello", `"receipt_handle":"r1.`, "QUEUE  MIN OFFSET", "readers", "keys:", "batch-1"} {
			if !strings.Contains(all.String(), want) {
				t.Errorf("README commands' output lacks %q:\n%s", want, all.String())
			}
		}
	})

	t.Run("go", func(t *testing.T) {
		src := strings.ReplaceAll(goProgram, `"127.0.0.1:8081"`, fmt.Sprintf("%q", p.GRPC))
		if src == goProgram {
			t.Fatal("the README's Go program does not dial 127.0.0.1:8081")
		}
		// An overlay puts the program inside the module (so it builds
		// against this tree's sdk) without writing into the tree.
		file := filepath.Join(dir, "main.go")
		if err := os.WriteFile(file, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
		pkg := filepath.Join(testutil.RepoRoot(), "internal", "readmeexample")
		overlay, _ := json.Marshal(map[string]any{"Replace": map[string]string{filepath.Join(pkg, "main.go"): file}})
		ovl := filepath.Join(dir, "overlay.json")
		if err := os.WriteFile(ovl, overlay, 0o644); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, "go", "run", "-overlay", ovl, "./internal/readmeexample")
		cmd.Dir = testutil.RepoRoot()
		out, err := cmd.CombinedOutput()
		if err != nil || !strings.Contains(string(out), "Hello from Go!") {
			t.Fatalf("README Go program: %v\n%s", err, out)
		}
	})

	t.Run("grpcurl", func(t *testing.T) {
		conn, err := grpc.NewClient(p.GRPC, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		handle := ""
		sentID := ""
		for _, l := range grpcurl {
			args := shellWords(t, l)
			var hdrs []string
			var data, method string
			for i := 1; i < len(args); i++ {
				switch args[i] {
				case "-plaintext":
				case "-H":
					hdrs = append(hdrs, args[i+1])
					i++
				case "-d":
					data = args[i+1]
					i++
				default:
					if args[i] != "127.0.0.1:8081" {
						method = args[i]
					}
				}
			}
			if method == "list" {
				listServices(t, ctx, conn)
				continue
			}
			md := metadata.MD{}
			for _, h := range hdrs {
				k, v, _ := strings.Cut(h, ":")
				md.Append(strings.TrimSpace(k), strings.TrimSpace(v))
			}
			data = strings.ReplaceAll(data, "RECEIPT_HANDLE", handle)
			if strings.HasSuffix(method, "/SendMessage") {
				var req struct {
					Messages []struct {
						SystemProperties struct {
							MessageID string `json:"messageId"`
						} `json:"systemProperties"`
					} `json:"messages"`
				}
				if err := json.Unmarshal([]byte(data), &req); err != nil || len(req.Messages) != 1 {
					t.Fatalf("README grpcurl SendMessage: want one message with its id: %v", err)
				}
				sentID = req.Messages[0].SystemProperties.MessageID
			}
			resps := invokeJSON(t, metadata.NewOutgoingContext(ctx, md), conn, method, data)
			for _, r := range resps {
				b, _ := protojson.Marshal(r)
				var m struct {
					Status *struct {
						Code string `json:"code"`
					} `json:"status"`
					Message *struct {
						SystemProperties struct {
							ReceiptHandle string `json:"receiptHandle"`
							MessageID     string `json:"messageId"`
						} `json:"systemProperties"`
					} `json:"message"`
				}
				_ = json.Unmarshal(b, &m)
				if m.Status != nil && m.Status.Code != "OK" {
					t.Fatalf("README grpcurl %s answered %s", method, b)
				}
				// The receive must bring back the message the README sent
				// and nothing else, so that its handle is the one to ack.
				if m.Message != nil && m.Message.SystemProperties.MessageID != sentID {
					t.Fatalf("README grpcurl ReceiveMessage returned message %s, not the %s it sent: give the grpcurl example a topic of its own",
						m.Message.SystemProperties.MessageID, sentID)
				}
				if m.Message != nil && handle == "" {
					handle = m.Message.SystemProperties.ReceiptHandle
				}
			}
			if strings.HasSuffix(method, "/ReceiveMessage") && handle == "" {
				t.Fatalf("README grpcurl ReceiveMessage returned no message: %v", resps)
			}
		}
	})
}

// shellWords splits a command line with single-quoted words.
func shellWords(t *testing.T, s string) []string {
	t.Helper()
	var out []string
	for s = strings.TrimSpace(s); s != ""; s = strings.TrimSpace(s) {
		if s[0] == '\'' {
			j := strings.IndexByte(s[1:], '\'')
			if j < 0 {
				t.Fatalf("unbalanced quote in %q", s)
			}
			out = append(out, s[1:j+1])
			s = s[j+2:]
			continue
		}
		j := strings.IndexAny(s, " \t")
		if j < 0 {
			j = len(s)
		}
		out = append(out, s[:j])
		s = s[j:]
	}
	return out
}

// invokeJSON calls "pkg.Service/Method" with a protojson request, as
// grpcurl -d does, and returns the responses (several for a stream).
func invokeJSON(t *testing.T, ctx context.Context, conn *grpc.ClientConn, method, data string) []proto.Message {
	t.Helper()
	svc, name, _ := strings.Cut(method, "/")
	d, err := protoregistry.GlobalFiles.FindDescriptorByName(protoreflect.FullName(svc))
	if err != nil {
		t.Fatalf("README grpcurl: unknown service %s: %v", svc, err)
	}
	md := d.(protoreflect.ServiceDescriptor).Methods().ByName(protoreflect.Name(name))
	if md == nil {
		t.Fatalf("README grpcurl: unknown method %s", method)
	}
	newMsg := func(desc protoreflect.MessageDescriptor) proto.Message {
		mt, err := protoregistry.GlobalTypes.FindMessageByName(desc.FullName())
		if err != nil {
			t.Fatal(err)
		}
		return mt.New().Interface()
	}
	req := newMsg(md.Input())
	if err := protojson.Unmarshal([]byte(data), req); err != nil {
		t.Fatalf("README grpcurl %s: -d is not a valid %s: %v", method, md.Input().FullName(), err)
	}
	full := "/" + method
	if !md.IsStreamingServer() {
		resp := newMsg(md.Output())
		if err := conn.Invoke(ctx, full, req, resp); err != nil {
			t.Fatalf("README grpcurl %s: %v", method, err)
		}
		return []proto.Message{resp}
	}
	st, err := conn.NewStream(ctx, &grpc.StreamDesc{ServerStreams: true}, full)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.SendMsg(req); err != nil {
		t.Fatal(err)
	}
	if err := st.CloseSend(); err != nil {
		t.Fatal(err)
	}
	var out []proto.Message
	for {
		resp := newMsg(md.Output())
		err := st.RecvMsg(resp)
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatalf("README grpcurl %s: %v", method, err)
		}
		out = append(out, resp)
	}
}

// listServices is `grpcurl list`: it needs server reflection.
func listServices(t *testing.T, ctx context.Context, conn *grpc.ClientConn) {
	t.Helper()
	st, err := reflectionpb.NewServerReflectionClient(conn).ServerReflectionInfo(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Send(&reflectionpb.ServerReflectionRequest{MessageRequest: &reflectionpb.ServerReflectionRequest_ListServices{ListServices: "*"}}); err != nil {
		t.Fatal(err)
	}
	resp, err := st.Recv()
	if err != nil {
		t.Fatalf("server reflection (grpcurl list): %v", err)
	}
	_ = st.CloseSend()
	var names []string
	for _, s := range resp.GetListServicesResponse().GetService() {
		names = append(names, s.GetName())
	}
	if !strings.Contains(strings.Join(names, " "), "apache.rocketmq.v2.MessagingService") {
		t.Fatalf("reflection lists %v", names)
	}
}
