package mcpserver

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	adminv1 "github.com/mqgate/mqgate/gen/mqgate/admin/v1"
)

// StuckMessage is the message a group has had longest without
// acknowledging it.
type StuckMessage struct {
	Message
	Deliveries    int32  `json:"deliveries" jsonschema:"how many times it was delivered to the group"`
	MaxDeliveries int32  `json:"max_deliveries" jsonschema:"deliveries after which it goes to the dead-letter queue"`
	VisibleAt     string `json:"visible_at" jsonschema:"its deadline while in flight; past it, when it is delivered again"`
	Held          bool   `json:"held,omitempty" jsonschema:"a FIFO message held behind an earlier one of its message group"`
}

// TopicDiagnosis is a group's state in one topic.
type TopicDiagnosis struct {
	Topic          string        `json:"topic"`
	Ready          int64         `json:"ready"`
	InFlight       int64         `json:"in_flight"`
	Held           int64         `json:"held"`
	Backlog        int64         `json:"backlog"`
	OldestInFlight *StuckMessage `json:"oldest_in_flight,omitempty"`
}

// Consumer is a connected client of the group.
type Consumer struct {
	ClientID string   `json:"client_id"`
	Protocol string   `json:"protocol"`
	Roles    []string `json:"roles"`
	Address  string   `json:"address"`
	Topics   []string `json:"topics"`
	LastSeen string   `json:"last_seen"`
}

// Diagnosis is diagnose_group's answer.
type Diagnosis struct {
	Group               string           `json:"group"`
	FIFO                bool             `json:"fifo"`
	MaxDeliveryAttempts int32            `json:"max_delivery_attempts"`
	Topics              []TopicDiagnosis `json:"topics"`
	DeadLetters         DeadLetters      `json:"dead_letters"`
	// Consumers are nil when the caller may not list clients (not an
	// admin).
	Consumers []Consumer `json:"connected_consumers"`
	// Findings say in words what the figures mean.
	Findings []string `json:"findings"`
}

func (t *tools) diagnoseGroup(ctx context.Context, req *mcp.CallToolRequest, in GroupName) (*mcp.CallToolResult, Diagnosis, error) {
	if strings.TrimSpace(in.Group) == "" {
		return nil, Diagnosis{}, errors.New("group is required")
	}
	ctx, cancel := t.callCtx(ctx, req)
	defer cancel()
	d, err := t.admin.DescribeGroup(ctx, &adminv1.DescribeGroupRequest{Name: in.Group, OldestInFlight: true})
	if err != nil {
		return nil, Diagnosis{}, failure("describe consumer group "+in.Group, err)
	}
	dl, err := t.deadLetters(ctx, in.Group)
	if err != nil {
		return nil, Diagnosis{}, err
	}
	g := d.GetGroup()
	out := Diagnosis{Group: g.GetName(), FIFO: g.GetFifo(), MaxDeliveryAttempts: g.GetMaxDeliveryAttempts(), Topics: []TopicDiagnosis{}, DeadLetters: dl}
	for _, p := range d.GetTopics() {
		if isSystemTopic(p.GetTopic()) {
			continue
		}
		td := TopicDiagnosis{Topic: p.GetTopic(), Ready: p.GetReady(), InFlight: p.GetInFlight(), Held: p.GetHeld(), Backlog: p.GetBacklog()}
		if o := p.GetOldestInFlight(); o != nil {
			td.OldestInFlight = &StuckMessage{Message: messageOf(o.GetMessage()), Deliveries: o.GetDeliveries(),
				MaxDeliveries: g.GetMaxDeliveryAttempts(), VisibleAt: when(o.GetVisibleAt()), Held: o.GetHeld()}
		}
		out.Topics = append(out.Topics, td)
	}
	switch cs, err := t.admin.ListClients(ctx, &adminv1.ListClientsRequest{}); {
	case err == nil:
		out.Consumers = []Consumer{}
		for _, c := range cs.GetClients() {
			if !slices.Contains(c.GetGroups(), in.Group) || !consumes(c.GetRoles()) {
				continue
			}
			out.Consumers = append(out.Consumers, Consumer{ClientID: c.GetClientId(), Protocol: c.GetProtocol(), Roles: c.GetRoles(),
				Address: c.GetAddress(), Topics: c.GetTopics(), LastSeen: when(c.GetLastSeen())})
		}
	case status.Code(err) != codes.PermissionDenied:
		return nil, Diagnosis{}, failure("list the connected clients", err)
	}
	out.Findings = findings(out, time.Now())
	return nil, out, nil
}

func consumes(roles []string) bool {
	for _, r := range roles {
		if strings.HasSuffix(r, "_CONSUMER") {
			return true
		}
	}
	return false
}

// findings reads a diagnosis in words, the likeliest causes first.
func findings(d Diagnosis, now time.Time) []string {
	var out []string
	var backlog, ready, inFlight int64
	for _, t := range d.Topics {
		backlog += t.Backlog
		ready += t.Ready
		inFlight += t.InFlight
	}
	if d.Consumers != nil && len(d.Consumers) == 0 && backlog > 0 {
		out = append(out, fmt.Sprintf("No consumer of group %s is connected (gRPC or remoting), and it has %d messages to consume: start a consumer of the group.", d.Group, backlog))
	}
	for _, t := range d.Topics {
		o := t.OldestInFlight
		switch {
		case o != nil && o.Held:
			out = append(out, fmt.Sprintf("In %s, FIFO message %s (message group %q) is held: an earlier message of its message group is in flight and must be acknowledged first.", t.Topic, o.MessageID, o.MessageGroup))
		case o != nil && o.Deliveries > 1:
			s := fmt.Sprintf("In %s, message %s was delivered %d times (of at most %d) without being acknowledged: the consumer keeps failing on it or does not acknowledge it.", t.Topic, o.MessageID, o.Deliveries, o.MaxDeliveries)
			if o.Deliveries >= o.MaxDeliveries {
				s += fmt.Sprintf(" It goes to the dead-letter queue %s when its deadline passes.", d.DeadLetters.Topic)
			} else {
				s += fmt.Sprintf(" After %d more deliveries it goes to the dead-letter queue %s.", o.MaxDeliveries-o.Deliveries, d.DeadLetters.Topic)
			}
			out = append(out, s)
		case o != nil:
			if at, err := time.Parse(time.RFC3339Nano, o.VisibleAt); err == nil && at.Before(now) {
				out = append(out, fmt.Sprintf("In %s, message %s was delivered and its deadline passed at %s without an acknowledgement: it is delivered again at the next receive.", t.Topic, o.MessageID, o.VisibleAt))
			} else {
				out = append(out, fmt.Sprintf("In %s, the oldest message in flight, %s, was delivered once and is invisible to other consumers until %s.", t.Topic, o.MessageID, o.VisibleAt))
			}
		}
		if t.Held > 0 && (o == nil || !o.Held) {
			out = append(out, fmt.Sprintf("In %s, %d FIFO messages wait behind earlier messages of their message groups.", t.Topic, t.Held))
		}
		if t.Ready > 0 && t.InFlight == 0 && len(d.Consumers) > 0 {
			out = append(out, fmt.Sprintf("In %s, %d messages are ready and none is in flight although consumers are connected: they are not receiving from %s (check their subscriptions and filters).", t.Topic, t.Ready, t.Topic))
		}
	}
	if n := d.DeadLetters.Pending; n > 0 {
		s := fmt.Sprintf("%d dead letters are pending in %s", n, d.DeadLetters.Topic)
		if len(d.DeadLetters.Oldest) > 0 {
			m := d.DeadLetters.Oldest[0]
			s += fmt.Sprintf(" (the oldest, %s from %s, stored %s)", m.MessageID, m.DLQOriginTopic, m.StoreTime)
		}
		out = append(out, s+": once the consumer handles them, redrive them to their topics (mqgate group redrive "+d.Group+", or the console).")
	}
	if backlog == 0 && d.DeadLetters.Pending == 0 {
		if len(d.Topics) == 0 {
			out = append(out, "The group has not consumed any topic yet.")
		} else {
			out = append(out, "Nothing is stuck: the group has no backlog and no dead letter.")
		}
	} else if len(out) == 0 {
		out = append(out, fmt.Sprintf("%d messages are ready and %d in flight; nothing points to a stuck consumer: compare the delivery rate with the send rate (describe_group, describe_topic).", ready, inFlight))
	}
	return out
}
