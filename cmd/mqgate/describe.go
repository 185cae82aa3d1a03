package main

import (
	"context"
	"fmt"
	"io"

	adminv1 "github.com/mqgate/mqgate/gen/mqgate/admin/v1"
)

// describeTopic prints a topic with its queue offsets and the progress of
// every group that has received from it (`mqgate topic describe NAME`).
func describeTopic(ctx context.Context, a *adminConn, name string, stdout io.Writer) error {
	resp, err := callAdmin(ctx, a, adminv1.AdminServiceClient.DescribeTopic, &adminv1.DescribeTopicRequest{Name: name})
	if err != nil {
		return err
	}
	if a.flags.json {
		return printJSON(stdout, resp)
	}
	t := resp.GetTopic()
	w := newTable(stdout)
	fmt.Fprintf(w, "name:\t%s\n", t.GetName())
	fmt.Fprintf(w, "type:\t%s\n", t.GetType())
	fmt.Fprintf(w, "queues:\t%d\n", t.GetQueues())
	fmt.Fprintf(w, "permission:\t%s\n", t.GetPermission())
	fmt.Fprintf(w, "created:\t%s\n", formatTime(t.GetCreateTime()))
	fmt.Fprintf(w, "messages stored:\t%d\n", resp.GetMessages())
	if err := w.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(stdout)
	w = newTable(stdout)
	fmt.Fprintln(w, "QUEUE\tMIN OFFSET\tMAX OFFSET\tMESSAGES")
	for _, q := range resp.GetQueues() {
		fmt.Fprintf(w, "%d\t%d\t%d\t%d\n", q.GetQueueId(), q.GetMinOffset(), q.GetMaxOffset(), q.GetMaxOffset()-q.GetMinOffset())
	}
	if err := w.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(stdout)
	if len(resp.GetGroups()) == 0 {
		fmt.Fprintln(stdout, "no consumer group has received from this topic yet")
		return nil
	}
	return printProgress(stdout, "GROUP", resp.GetGroups(), func(p *adminv1.GroupTopicProgress) string { return p.GetGroup() })
}

// describeGroup prints a group with its progress per topic and its
// dead-letter queue (`mqgate group describe NAME`).
func describeGroup(ctx context.Context, a *adminConn, name string, stdout io.Writer) error {
	resp, err := callAdmin(ctx, a, adminv1.AdminServiceClient.DescribeGroup, &adminv1.DescribeGroupRequest{Name: name})
	if err != nil {
		return err
	}
	if a.flags.json {
		return printJSON(stdout, resp)
	}
	g := resp.GetGroup()
	w := newTable(stdout)
	fmt.Fprintf(w, "name:\t%s\n", g.GetName())
	fmt.Fprintf(w, "fifo:\t%t\n", g.GetFifo())
	fmt.Fprintf(w, "max delivery attempts:\t%d\n", g.GetMaxDeliveryAttempts())
	fmt.Fprintf(w, "retry policy:\t%s\n", g.GetRetryPolicy())
	fmt.Fprintf(w, "created:\t%s\n", formatTime(g.GetCreateTime()))
	dlq := resp.GetDeadLetterQueue()
	if dlq.GetExists() {
		fmt.Fprintf(w, "dead-letter queue:\t%s (%d messages)\n", dlq.GetTopic(), dlq.GetMessages())
	} else {
		fmt.Fprintf(w, "dead-letter queue:\t%s (empty: created with the first dead letter)\n", dlq.GetTopic())
	}
	if err := w.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(stdout)
	if len(resp.GetTopics()) == 0 {
		fmt.Fprintln(stdout, "the group has not received from any topic yet")
		return nil
	}
	return printProgress(stdout, "TOPIC", resp.GetTopics(), func(p *adminv1.GroupTopicProgress) string { return p.GetTopic() })
}

func printProgress(stdout io.Writer, first string, ps []*adminv1.GroupTopicProgress, name func(*adminv1.GroupTopicProgress) string) error {
	w := newTable(stdout)
	fmt.Fprintf(w, "%s\tREADY\tIN FLIGHT\tHELD (FIFO)\tBACKLOG\n", first)
	for _, p := range ps {
		fmt.Fprintf(w, "%s\t%d\t%d\t%d\t%d\n", name(p), p.GetReady(), p.GetInFlight(), p.GetHeld(), p.GetBacklog())
	}
	if err := w.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(stdout, "\nready: never delivered · in flight: delivered, not acked (invisible or due for redelivery) · backlog: all not yet acked")
	return nil
}
