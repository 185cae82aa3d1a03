package mcpserver

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// refusing is a connection whose every call is refused.
type refusing struct{}

func (refusing) Invoke(context.Context, string, any, any, ...grpc.CallOption) error {
	return status.Error(codes.PermissionDenied, "access key \"x\" may not use the admin API")
}

func (refusing) NewStream(context.Context, *grpc.StreamDesc, string, ...grpc.CallOption) (grpc.ClientStream, error) {
	return nil, status.Error(codes.Unimplemented, "no streams")
}

// The tools' schemas build, every tool is read-only, and a refused call
// is the tool's error (the model sees the reason), not a protocol error.
func TestToolsListAndRefusals(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st, ct := mcp.NewInMemoryTransports()
	srv := NewServer(Options{Conn: refusing{}, Version: "test"})
	ss, err := srv.Connect(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ss.Close()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "1"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	res, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tool := range res.Tools {
		names = append(names, tool.Name)
		if tool.Annotations == nil || !tool.Annotations.ReadOnlyHint || tool.Description == "" {
			t.Errorf("tool %s: annotations %+v, description %q", tool.Name, tool.Annotations, tool.Description)
		}
	}
	slices.Sort(names)
	want := []string{ToolCluster, ToolDescribeGroup, ToolDescribeTopic, ToolDiagnoseGroup, ToolFindMessage, ToolListGroups, ToolListTopics, ToolTopicRoute}
	slices.Sort(want)
	if !slices.Equal(names, want) {
		t.Fatalf("tools %v, want %v", names, want)
	}
	r, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: ToolListTopics})
	if err != nil || !r.IsError {
		t.Fatalf("a refused list_topics: %+v %v", r, err)
	}
	if tc, ok := r.Content[0].(*mcp.TextContent); !ok || tc.Text != `list topics: access key "x" may not use the admin API (PermissionDenied)` {
		t.Fatalf("the refusal as the tool says it: %+v", r.Content)
	}
	r, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: ToolFindMessage, Arguments: map[string]any{}})
	if err != nil || !r.IsError {
		t.Fatalf("find_message without id or key: %+v %v", r, err)
	}
}
