package delay

import (
	"context"
	"strconv"
	"time"

	"github.com/mqgate/mqgate/broker/mqerr"
	"github.com/mqgate/mqgate/broker/produce"
	"github.com/mqgate/mqgate/broker/record"
	"github.com/mqgate/mqgate/storage"
	"github.com/mqgate/mqgate/storage/message"
)

// This file serves the classic remoting protocol, whose delayed records
// are ready-made: every property the producer set is kept (RETRY_TOPIC,
// ORIGIN_MESSAGE_ID, PGROUP, ...) and the record names its queue
// (REAL_QID). It stages the delay levels and timer properties of classic
// producers and the delayed redelivery of CONSUMER_SEND_MSG_BACK into
// %RETRY%<group>; publish treats them like any other staged record.

// levels are upstream's 18 delay levels (messageDelayLevel), level 1 first.
var levels = [...]time.Duration{
	time.Second, 5 * time.Second, 10 * time.Second, 30 * time.Second,
	time.Minute, 2 * time.Minute, 3 * time.Minute, 4 * time.Minute, 5 * time.Minute,
	6 * time.Minute, 7 * time.Minute, 8 * time.Minute, 9 * time.Minute, 10 * time.Minute,
	20 * time.Minute, 30 * time.Minute, time.Hour, 2 * time.Hour,
}

// LevelDelay returns the delay of level (clamped to 1..18).
func LevelDelay(level int) time.Duration {
	level = max(1, min(level, len(levels)))
	return levels[level-1]
}

// StageRecord keeps rec until due, then publishes it to (topic, queue). rec
// is modified (stage topic, bookkeeping properties). A flush timeout is
// reported as KindFlushTimeout with the entry: the record is stored.
func (s *Service) StageRecord(ctx context.Context, rec *message.Message, topic string, queue int32, due time.Time) (storage.AppendEntry, error) {
	rec.Set(record.PropRealTopic, topic)
	rec.Set(record.PropRealQueue, strconv.Itoa(int(queue)))
	rec.Set(record.PropDueMS, strconv.FormatInt(due.UnixMilli(), 10))
	_, res, err := s.stage.Put(ctx, rec, due.UnixMilli())
	if err != nil {
		return storage.AppendEntry{}, produce.AppendError(err)
	}
	s.wake()
	if res.Status == storage.StatusFlushTimeout {
		return res.Entries[0], mqerr.Errorf(mqerr.KindFlushTimeout, "stored, but the disk flush did not finish in time; the message is not yet durable")
	}
	return res.Entries[0], nil
}
