package background

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/shoaldb/shoal/backup"
	"github.com/shoaldb/shoal/bgtask"
	"github.com/shoaldb/shoal/node/backups"
	"github.com/shoaldb/shoal/pb"
	"github.com/shoaldb/shoal/replica"
	"github.com/shoaldb/shoal/storage"
)

// checkpointDir is where backups stage their engine checkpoint, inside the store directory (hard links
// need the same filesystem); leftovers of a crashed backup are removed at start.
const checkpointDir = "backup-checkpoints"

// removeStaleCheckpoints deletes checkpoints left by a backup that was interrupted by a crash, and a
// change journal the configuration switched off (it would otherwise grow until the next backup).
func (s *Service) removeStaleCheckpoints(eng *storage.Engine, log *slog.Logger) {
	if s.cfg.Backup.NoJournal {
		if st, err := eng.JournalState(); err != nil {
			log.Warn("could not read the backup journal's state", "err", err)
		} else if st.On {
			if err := eng.DisableJournal(); err != nil {
				log.Warn("could not delete the backup journal", "err", err)
			} else {
				log.Info("backup journal switched off and deleted: the next incremental backup reads every key")
			}
		}
	}
	dir := filepath.Join(eng.Dir(), checkpointDir)
	if _, err := os.Stat(dir); err == nil {
		if err := os.RemoveAll(dir); err != nil {
			log.Warn("could not remove stale backup checkpoints", "dir", dir, "err", err)
		}
	}
}

// catchUp waits, for each range with a replica here that another node leads, until this replica has
// applied what its leader had applied when asked: then the backup holds every write acknowledged
// before it started. It reports the ranges that could not catch up within the bound.
func (s *Service) catchUp(ctx context.Context) map[uint64]bool {
	lagging := map[uint64]bool{}
	for _, r := range s.deps.Store().Replicas() {
		id := r.RangeID()
		leader := r.LeaderNode()
		if leader == s.nodeID.Load() || id == replica.MetaRangeID {
			continue
		}
		c, pe := s.peerFor(leader)
		if leader == 0 || pe != nil {
			lagging[id] = true
			continue
		}
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		resp, err := c.WaitApplied(cctx, &pb.WaitAppliedRequest{RangeId: id})
		if err == nil && resp.Error == nil {
			_, err = s.deps.Ranges.WaitAppliedLocal(cctx, id, resp.Applied)
		} else if err == nil {
			err = fmt.Errorf("%s", resp.Error.Message)
		}
		cancel()
		if err != nil {
			lagging[id] = true
		}
	}
	return lagging
}

// writeBackup writes a backup of every user range with a replica on this node into dir: a checkpoint
// of the engine (one consistent point in time), read range by range into backup files (in full, or
// only the changes since parent when it is set: node/backups), then the manifest. Reading every key is
// what makes a backup heavy; rate (bytes/s, 0: unlimited) paces it.
func (s *Service) writeBackup(ctx context.Context, dir string, parent *backups.Parent, rate int64, h *bgtask.Handle) (string, error) {
	start := time.Now()
	lagging := s.catchUp(ctx)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("backup: %w", err)
	}
	stage := filepath.Join(s.deps.Engine.Dir(), checkpointDir)
	if err := os.MkdirAll(stage, 0o755); err != nil {
		return "", fmt.Errorf("backup: %w", err)
	}
	ckDir := filepath.Join(stage, fmt.Sprintf("ck-%d", time.Now().UnixNano()))
	// The journal's epoch closes before the snapshot or checkpoint is taken: every write it misses is
	// journaled under a later epoch, which the next incremental reads.
	mark, err := backups.BeginEpoch(s.deps.Engine, s.cfg.Backup)
	if err != nil {
		return "", err
	}
	src, release, err := backups.OpenSource(s.deps.Engine, ckDir, parent, mark)
	if err != nil {
		return "", err
	}
	defer release()

	ids := []uint64{}
	for _, r := range s.deps.Store().Replicas() {
		if r.RangeID() != replica.MetaRangeID {
			ids = append(ids, r.RangeID())
		}
	}
	pace := NewPacer(rate)
	m, err := backups.Write(ctx, src, backups.Request{Dir: dir, Parent: parent, Ranges: ids, Lagging: lagging,
		Pace: func(read uint64) error {
			h.SetBytes(read)
			if err := pace.Wait(ctx, read); err != nil {
				return fmt.Errorf("backup: %w", err)
			}
			return nil
		},
		OnRange: func(id uint64, what string) { s.log.Info("backup: range "+what, "range", id) },
		Mark:    mark,
		Disk:    s.deps.Engine.Device(),
	})
	if err != nil {
		return "", err
	}
	m.ClusterID, m.NodeID, m.CreatedAt = *s.clusterID.Load(), s.nodeID.Load(), start.UTC()
	m.DurationMS = time.Since(start).Milliseconds()
	if err := backup.WriteManifest(dir, m); err != nil {
		return "", err
	}
	chargeManifest(s.deps.Engine, dir)
	if err := backups.Finish(s.deps.Engine, mark); err != nil {
		s.log.Warn("backup: could not trim the change journal", "err", err)
	}
	data, _ := json.Marshal(m)
	if m.Fallback != "" {
		s.log.Info("backup: incremental diffed every key instead of reading the journal", "why", m.Fallback)
	}
	s.log.Info("backup complete", "dir", dir, "incremental", parent != nil, "method", m.Method, "ranges", len(m.Ranges), "keys", m.TotalKeys,
		"deletes", m.TotalDeletes, "bytes", m.TotalBytes, "duration", time.Since(start).Round(time.Millisecond))
	return string(data), nil
}

// chargeManifest charges the node's emulated disk (if any) for the manifest just written and synced
// beside the files node/backups charged.
func chargeManifest(eng *storage.Engine, dir string) {
	st, err := os.Stat(filepath.Join(dir, backup.ManifestFile))
	if err != nil {
		return
	}
	w := eng.Device().WriteStream(st.Size())
	w.Add(st.Size())
	w.Sync()
}

// Pacer keeps a byte stream at or below a rate: backups and scan jobs read at it. Not safe for
// concurrent use: each stream has its own.
type Pacer struct {
	rate  int64
	start time.Time
}

// NewPacer starts a stream paced at rate bytes/s from now; rate <= 0 does not pace.
func NewPacer(rate int64) *Pacer { return &Pacer{rate: rate, start: time.Now()} }

// Wait sleeps until done bytes (read since NewPacer) are within the rate.
func (p *Pacer) Wait(ctx context.Context, done uint64) error {
	if p.rate <= 0 {
		return ctx.Err()
	}
	due := p.start.Add(time.Duration(float64(done) / float64(p.rate) * float64(time.Second)))
	if d := time.Until(due); d > 5*time.Millisecond {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(d):
		}
	}
	return nil
}
