package storage

import (
	"time"

	"github.com/mqgate/mqgate/storage/consumequeue"
)

// background runs the periodic work of the store on one goroutine:
// checkpoints (also one as soon as the index seals a file), retention,
// metadata flushes and looks at the free space (space.go).
func (s *Store) background() {
	defer close(s.bgDone)
	cp := time.NewTicker(s.opts.CheckpointInterval)
	defer cp.Stop()
	ret := time.NewTicker(s.opts.RetentionInterval)
	defer ret.Stop()
	mf := time.NewTicker(s.opts.MetaFlushInterval)
	defer mf.Stop()
	sp := time.NewTicker(spaceMaxAge)
	defer sp.Stop()
	spc := sp.C
	if s.opts.noSpaceLooks {
		spc = nil
	}
	for {
		select {
		case <-s.bgStop:
			return
		case <-s.cpSoon:
			if err := s.checkpoint(false); err != nil {
				s.logger.Warn("storage: checkpoint failed", "err", err)
			}
		case <-cp.C:
			if s.lastCP.Load() != s.disp.pos.Load() {
				if err := s.checkpoint(false); err != nil {
					s.logger.Warn("storage: checkpoint failed", "err", err)
				}
			}
		case <-ret.C:
			if _, err := s.RunRetention(); err != nil {
				s.logger.Warn("storage: retention failed", "err", err)
			}
		case <-mf.C:
			if err := s.meta.Flush(); err != nil {
				s.logger.Warn("storage: metadata flush failed", "err", err)
			}
		case <-spc:
			s.look(spaceMaxAge) // the free space against the disk reserve (space.go)
		}
	}
}

// RunRetention deletes whole segments that are past the retention time,
// or the oldest ones while the disk is fuller than the threshold. It
// never deletes the active segment, nor a segment holding records not yet
// fsynced or dispatched; readers holding a deleted segment keep reading it
// until they are done. Queues' min offsets advance. It returns the number
// of segments deleted. The background loop calls it every
// RetentionInterval.
func (s *Store) RunRetention() (int, error) {
	deleted := 0
	for {
		segs := s.log.Segments()
		if len(segs) < 2 {
			break
		}
		expired := false
		if s.opts.RetentionTime > 0 && segs[1].End > segs[1].Base {
			// Every record of segs[0] is no newer than segs[1]'s first.
			t, err := s.log.StoreTimeAt(segs[1].Base)
			if err == nil && s.now().UnixMilli()-t > s.opts.RetentionTime.Milliseconds() {
				expired = true
			}
		}
		if !expired && s.opts.DiskUsagePercent > 0 {
			if u, err := s.fs.Usage(s.dir); err == nil && u.UsedPercent() >= s.opts.DiskUsagePercent {
				expired = true
			}
		}
		if !expired {
			break
		}
		upTo := min(s.disp.pos.Load(), s.log.Durable())
		ok, err := s.log.RemoveOldest(upTo)
		if err != nil {
			return deleted, err
		}
		if !ok {
			break
		}
		deleted++
		s.logger.Info("storage: retention deleted segment", "base", segs[0].Base, "end", segs[0].End)
	}
	if deleted > 0 {
		logMin := s.log.Min()
		var firstErr error
		s.cqs.All(func(q *consumequeue.Queue) {
			if err := q.TrimBelow(logMin); err != nil && firstErr == nil {
				firstErr = err
			}
		})
		if err := s.idx.RemoveBelow(logMin); err != nil && firstErr == nil {
			firstErr = err
		}
		return deleted, firstErr
	}
	return 0, nil
}
