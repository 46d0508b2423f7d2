package test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shoaldb/shoal/node/supervisor"
	"github.com/shoaldb/shoal/replica"
)

// TestRestartKeepsWhatItAcknowledged: across in-process restarts of supervised nodes under
// writes, no leader counts a follower's match beyond the log of the replica that serves the range on
// the follower's node (in its term), and no node drops a raft message as invalid. A restarted node's
// store once built a second replica of a range from a message that arrived while it loaded: that
// one acknowledged an entry the serving replica never held, and the leader's heartbeats committing
// it were dropped ("heartbeat commits N+1 beyond last index N") until the leadership moved.
func TestRestartKeepsWhatItAcknowledged(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	sups, _, cl := startSupervisedHeld(t, ctx)
	// Several ranges: a restarted node loads them one by one while its peers' appends arrive.
	for i := 1; i < 8; i++ {
		if _, _, err := cl.Split(ctx, []byte(fmt.Sprintf("m%d", i))); err != nil {
			t.Fatalf("split: %v", err)
		}
	}
	wctx, stopWriters := context.WithCancel(ctx)
	var wg sync.WaitGroup
	var written, failed atomic.Int64
	for w := range 4 {
		wg.Go(func() {
			for i := 0; wctx.Err() == nil; i++ {
				if err := cl.Put(wctx, []byte(fmt.Sprintf("m%d-w%d-%06d", i%8, w, i)), []byte("v")); err != nil {
					if wctx.Err() == nil {
						failed.Add(1)
					}
					continue
				}
				written.Add(1)
			}
		})
	}
	mctx, stopMonitor := context.WithCancel(ctx)
	violation := make(chan string, 1)
	wg.Go(func() { watchMatches(mctx, sups, violation) })

	for i, p := range []string{"write", "write", "default", "default"} {
		s := sups[1+i%2]
		if err := s.SetProfile(ctx, p); err != nil {
			t.Fatalf("restart %d (n%d to %s): %v", i+1, s.Node().NodeID(), p, err)
		}
		time.Sleep(time.Second) // the monitor checks the reopened node under writes
	}
	stopWriters()
	stopMonitor()
	wg.Wait()
	select {
	case v := <-violation:
		t.Fatal(v)
	default:
	}
	for _, s := range sups {
		if n := s.Node().Store().LoopStats().DroppedInvalid; n != 0 {
			t.Errorf("n%d dropped %d raft messages as invalid", s.Node().NodeID(), n)
		}
	}
	t.Logf("%d writes during 4 restarts (%d failed attempts)", written.Load(), failed.Load())
}

// watchMatches checks, every 20 ms until ctx ends, every leader's match for each follower against the
// log of the follower node's replica in the same term, and reports (once) a match beyond it that
// lasts a second: raft acknowledges only what the follower's log holds, and a follower's log index
// read after the leader's match can only be higher, so a lasting gap is an acknowledgement the
// serving replica does not hold (a moment's gap is tolerated for a log replaced by a snapshot).
func watchMatches(ctx context.Context, sups []*supervisor.Supervisor, violation chan<- string) {
	since := map[string]time.Time{}
	for ctx.Err() == nil {
		seen := map[string]bool{}
		for _, ls := range sups {
			ln := ls.Node()
			if ln == nil || ln.Store() == nil {
				continue
			}
			for _, lr := range ln.Store().Replicas() {
				st := lr.Status()
				if !st.IsLeader || st.Desc == nil {
					continue
				}
				for _, rd := range st.Desc.Replicas {
					fs := nodeOf(sups, rd.NodeId)
					if rd.NodeId == ln.NodeID() || fs == nil {
						continue
					}
					fr := fs.Replica(st.Desc.RangeId)
					if fr == nil {
						continue
					}
					match := st.LastIndex - st.LaggingPeers[rd.ReplicaId]
					if f := fr.Status(); f.Term == st.Term && f.ReplicaID == rd.ReplicaId && f.LastIndex < match {
						key := fmt.Sprintf("r%d: the leader on n%d counts n%d at match %d, its replica's log ends at %d (term %d)",
							st.Desc.RangeId, ln.NodeID(), rd.NodeId, match, f.LastIndex, st.Term)
						id := fmt.Sprintf("%d/%d", st.Desc.RangeId, rd.NodeId)
						seen[id] = true
						if _, ok := since[id]; !ok {
							since[id] = time.Now()
						} else if time.Since(since[id]) > time.Second {
							select {
							case violation <- key:
							default:
							}
							return
						}
					}
				}
			}
		}
		for id := range since {
			if !seen[id] {
				delete(since, id)
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// nodeOf is the store of the node with id among sups, or nil (none, or restarting).
func nodeOf(sups []*supervisor.Supervisor, id uint64) *replica.Store {
	for _, s := range sups {
		if n := s.Node(); n != nil && n.NodeID() == id {
			return n.Store()
		}
	}
	return nil
}
