package rekey

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/shoaldb/shoal/client"
	"github.com/shoaldb/shoal/pb"
	"github.com/shoaldb/shoal/table"
)

// checkpointEvery is how often the copy's watch reports its frontier: while the old keyspace is
// fenced, how soon the copy sees that it has applied the last changes.
const checkpointEvery = 20 * time.Millisecond

// errCutOver ends the copy's watch once the descriptor has switched.
var errCutOver = errors.New("cut over")

// copier copies the old keyspace into the new one and follows its changes until the cutover.
type copier struct {
	c        *client.Client
	old, new table.Descriptor
	batch    int
	progress func(Progress)
	// record writes the progress into the descriptor (rekey-status reads it), every recordEvery
	// until the fence; lastRecord is when it last did.
	record        func(Progress)
	lastRecord    time.Time
	recordedPhase string
	start         time.Time

	// moved maps each live old row's key to its key in the new keyspace: a change that moves a
	// row under the new key (or deletes it) deletes what the copy wrote for it before.
	moved   map[string][]byte
	owner   map[string]string // the other way: new key → old key (a new key must stay unique)
	pending []*pb.Mutation
	// pendingChanges: pending holds a change, not only initial rows; inFlight and flying are the
	// initial copy's batches under way (flush).
	pendingChanges bool
	inFlight       chan error
	flying         int

	phase          string
	rows, changes  int64
	sinceCheck     int64 // changes since the last checkpoint
	fenceIdx       map[uint64]uint64
	fencedAt       time.Time
	held           time.Duration
	lastReport     time.Time
	reported       string // the phase last reported
	cleaned        int64
	cutoverApplied bool
	// catchUpFrom is when the catch-up began, lagChecked when caughtUp last asked for the ranges'
	// applied indexes.
	catchUpFrom, lagChecked time.Time
}

func (cp *copier) run(ctx context.Context) error {
	ostart, oend := table.TableSpan(cp.old.ID)
	cp.phase = "copy"
	err := cp.c.Watch(ctx, ostart, oend, "", func(ev client.WatchEvent) error { return cp.apply(ctx, ev) },
		client.WithInitialScan(), client.WithCheckpointEvery(checkpointEvery))
	if errors.Is(err, errCutOver) {
		return nil
	}
	if err == nil {
		err = errors.New("the copy's watch ended")
	}
	if cp.fenceIdx != nil && !cp.cutoverApplied {
		// Writers must not wait on a re-key that stopped: lift its fence, even if ctx is done —
		// unless the cutover did apply (an answer lost on the way): then the fence must stay.
		lctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		switch cut, cerr := cp.cutOver(lctx); {
		case cerr != nil:
			return fmt.Errorf("%w (and whether it cut over is unknown: %v; `shoal table rekey-status` tells, rekey-cancel lifts its fence)", err, cerr)
		case cut:
			cp.cutoverApplied = true
			return nil
		}
		if lerr := cp.c.LiftFence(lctx, ostart, oend, cp.old.Rekey.FenceID); lerr != nil {
			return fmt.Errorf("%w (and lifting its fence failed: %v; `shoal table rekey-cancel` lifts it)", err, lerr)
		}
	}
	return err
}

// cutOver reads the descriptor until it can tell whether this re-key's cutover applied.
func (cp *copier) cutOver(ctx context.Context) (bool, error) {
	for {
		cur, err := table.NewCatalog(cp.c).Describe(ctx, cp.old.Name)
		if err == nil {
			return cur.ID == cp.new.ID, nil
		}
		select {
		case <-ctx.Done():
			return false, err
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// apply handles one event of the old keyspace's watch.
func (cp *copier) apply(ctx context.Context, ev client.WatchEvent) error {
	switch ev.Kind {
	case pb.RangeFeedEvent_PUT:
		row, err := cp.old.DecodeRow(ev.Key, ev.Value)
		if err != nil {
			return err
		}
		nk, nv, err := cp.new.EncodeRow(row)
		if err != nil {
			return fmt.Errorf("row %q under the new key: %w", ev.Key, err)
		}
		if o, taken := cp.owner[string(nk)]; taken && o != string(ev.Key) {
			return fmt.Errorf("the new primary key is not unique: rows %q and %q both map to %q", o, ev.Key, nk)
		}
		if prev := cp.moved[string(ev.Key)]; prev != nil && !bytes.Equal(prev, nk) {
			cp.pending = append(cp.pending, &pb.Mutation{Key: prev, Delete: true})
			delete(cp.owner, string(prev))
		}
		cp.moved[string(ev.Key)] = nk
		cp.owner[string(nk)] = string(ev.Key)
		cp.pending = append(cp.pending, &pb.Mutation{Key: nk, Value: nv})
		cp.pendingChanges = cp.pendingChanges || !ev.Initial
		cp.count(ev.Initial)
	case pb.RangeFeedEvent_DELETE, pb.RangeFeedEvent_EXPIRE:
		if prev := cp.moved[string(ev.Key)]; prev != nil {
			cp.pending = append(cp.pending, &pb.Mutation{Key: prev, Delete: true})
			cp.pendingChanges = true
			delete(cp.moved, string(ev.Key))
			delete(cp.owner, string(prev))
		}
		cp.count(false)
	case pb.RangeFeedEvent_CHECKPOINT:
		cp.pendingChanges = true // everything up to the frontier must be written before a fence or cutover
		if err := cp.flush(ctx); err != nil {
			return err
		}
		if err := cp.drain(); err != nil {
			return err
		}
		return cp.checkpoint(ctx, ev)
	}
	if len(cp.pending) >= cp.batch {
		return cp.flush(ctx)
	}
	return nil
}

func (cp *copier) count(initial bool) {
	if initial {
		cp.rows++
	} else {
		cp.changes++
		cp.sinceCheck++
	}
	cp.report(cp.phase)
}

// checkpoint moves the re-key on: the first checkpoint after the initial scan ends the initial copy; one with little to
// catch up fences the old keyspace; once every fenced range's frontier passed its fence index,
// the last change is applied and the re-key cuts over.
func (cp *copier) checkpoint(ctx context.Context, ev client.WatchEvent) error {
	frontier := ev.Frontier
	ostart, oend := table.TableSpan(cp.old.ID)
	fence := cp.old.Rekey.FenceID
	switch cp.phase {
	case "copy":
		if ev.Scanning > 0 {
			return nil // the initial scan goes on
		}
		cp.phase, cp.catchUpFrom = "catch-up", time.Now()
	case "catch-up":
		late := time.Since(cp.catchUpFrom) > maxCatchUp
		if !late && (cp.sinceCheck > int64(cp.batch) || !cp.caughtUp(ctx, frontier)) {
			break // still behind: fence once a checkpoint comes with little new and little left
		}
		cp.report("fencing")
		idx, err := cp.c.FenceSpan(ctx, ostart, oend, fence, false)
		if err != nil {
			return fmt.Errorf("fence the old keyspace: %w", err)
		}
		cp.fenceIdx, cp.fencedAt, cp.phase = idx, time.Now(), "fenced"
	case "fenced":
		for r, i := range cp.fenceIdx {
			if f, ok := frontier[r]; !ok || f < i {
				cp.sinceCheck = 0
				return nil
			}
		}
		// Every change the old keyspace will ever have is applied: retire it, then switch.
		if _, err := cp.c.FenceSpan(ctx, ostart, oend, fence, true); err != nil {
			return fmt.Errorf("retire the old keyspace: %w", err)
		}
		cp.phase = "cutover"
		_, err := table.NewCatalog(cp.c).Update(ctx, cp.old.Name, func(cur *table.Descriptor) error {
			if cur.ID != cp.old.ID || cur.Rekey == nil || cur.Rekey.NewID != cp.new.ID {
				return fmt.Errorf("the descriptor changed under the re-key (cancelled?): %w", table.ErrDescriptorChanged)
			}
			cur.ID, cur.PrimaryKey, cur.Rekey = cp.new.ID, cp.new.PrimaryKey, nil
			cur.RetiredIDs = append(cur.RetiredIDs, cp.old.ID)
			return nil
		})
		if err != nil {
			return fmt.Errorf("cut over: %w", err)
		}
		cp.cutoverApplied = true
		cp.held = time.Since(cp.fencedAt)
		cp.report("cutover")
		return errCutOver
	}
	cp.sinceCheck = 0
	cp.report(cp.phase)
	return nil
}

// fenceLag is how many raft entries a range's delivered changes may trail its applied index when
// the copy fences it: the writes the fence holds wait for the copy to apply that many entries.
// maxCatchUp bounds the catch-up: past it the copy fences whatever the lag.
const (
	fenceLag   = 64
	maxCatchUp = 30 * time.Second
)

// caughtUp reports whether every range's frontier is within fenceLag entries of its applied index
// (asked at most every 100 ms; an answer it cannot get counts as not caught up; past maxCatchUp
// the caller fences without asking).
func (cp *copier) caughtUp(ctx context.Context, frontier map[uint64]uint64) bool {
	if time.Since(cp.lagChecked) < 100*time.Millisecond {
		return false
	}
	cp.lagChecked = time.Now()
	ids := make([]uint64, 0, len(frontier))
	for r := range frontier {
		ids = append(ids, r)
	}
	all, err := cp.c.AppliedIndexes(ctx, ids)
	if err != nil {
		return false
	}
	applied := make(map[uint64]uint64, len(all))
	for _, rs := range all {
		applied[rs.GetDesc().GetRangeId()] = rs.GetAppliedIndex()
	}
	for r, f := range frontier {
		// 0: the answering node holds no replica of r; it cannot tell.
		if a := applied[r]; a == 0 || a > f+fenceLag {
			return false
		}
	}
	return true
}

// recordEvery is how often the coordinator records its progress in the descriptor.
const recordEvery = 2 * time.Second

// flushesInFlight bounds the initial copy's concurrent batches.
const flushesInFlight = 4

// flush writes the pending row writes to the new keyspace. Batches of the initial scan alone (each
// row once, in no batch twice) go out concurrently; a batch with a change waits for those first,
// so that the writes of one key stay in order.
func (cp *copier) flush(ctx context.Context) error {
	if len(cp.pending) == 0 {
		return nil
	}
	muts := cp.pending
	cp.pending = nil
	if !cp.pendingChanges {
		if cp.inFlight == nil {
			cp.inFlight = make(chan error, flushesInFlight)
		}
		if cp.flying == flushesInFlight {
			if err := <-cp.inFlight; err != nil {
				return err
			}
			cp.flying--
		}
		cp.flying++
		go func() { cp.inFlight <- cp.write(ctx, muts) }()
		return nil
	}
	cp.pendingChanges = false
	if err := cp.drain(); err != nil {
		return err
	}
	return cp.write(ctx, muts)
}

// drain waits for the initial copy's batches in flight.
func (cp *copier) drain() error {
	var first error
	for ; cp.flying > 0; cp.flying-- {
		if err := <-cp.inFlight; err != nil && first == nil {
			first = err
		}
	}
	return first
}

func (cp *copier) write(ctx context.Context, muts []*pb.Mutation) error {
	if err := cp.c.WriteMany(ctx, muts); err != nil {
		return fmt.Errorf("write %d rows under the new key: %w", len(muts), err)
	}
	return nil
}

// cleanup deletes the old rows, as the owner of the retired fence (no one else may write there).
func (cp *copier) cleanup(ctx context.Context) (int64, error) {
	keys := make([]string, 0, len(cp.moved))
	for k := range cp.moved {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	fence := cp.old.Rekey.FenceID
	cp.phase = "cleanup"
	done := make(chan error, flushesInFlight) // batches of distinct keys: any order will do
	flying := 0
	var first error
	for len(keys) > 0 && first == nil {
		n := min(len(keys), 500)
		muts := make([]*pb.Mutation, n)
		for i, k := range keys[:n] {
			muts[i] = &pb.Mutation{Key: []byte(k), Delete: true}
		}
		keys = keys[n:]
		if flying == flushesInFlight {
			first = <-done
			flying--
		}
		flying++
		go func() { done <- ownedWriteMany(ctx, cp.c, muts, fence) }()
		cp.cleaned += int64(n)
		cp.report("cleanup")
	}
	for ; flying > 0; flying-- {
		if err := <-done; err != nil && first == nil {
			first = err
		}
	}
	return cp.cleaned, first
}

// ownedWriteMany writes muts as the fence's owner, halving a batch that spans ranges.
func ownedWriteMany(ctx context.Context, c *client.Client, muts []*pb.Mutation, fence uint64) error {
	err := c.BatchWriteAsFenceOwner(ctx, muts, fence)
	if err == nil || len(muts) == 1 || !errors.Is(err, client.ErrInvalidArgument) {
		return err
	}
	half := len(muts) / 2
	if err := ownedWriteMany(ctx, c, muts[:half], fence); err != nil {
		return err
	}
	return ownedWriteMany(ctx, c, muts[half:], fence)
}

// report tells Progress, at most every 200 ms unless the phase is new.
func (cp *copier) report(phase string) {
	if cp.record != nil && (phase == "copy" || phase == "catch-up") && (time.Since(cp.lastRecord) >= recordEvery || phase != cp.recordedPhase) {
		cp.lastRecord, cp.recordedPhase = time.Now(), phase
		cp.record(Progress{Phase: phase, Rows: cp.rows, Changes: cp.changes, Elapsed: time.Since(cp.start)})
	}
	if cp.progress == nil {
		return
	}
	if phase == cp.reported && time.Since(cp.lastReport) < 200*time.Millisecond {
		return
	}
	cp.lastReport, cp.reported = time.Now(), phase
	cp.progress(Progress{Phase: phase, Rows: cp.rows, Changes: cp.changes, Cleaned: cp.cleaned, Elapsed: time.Since(cp.start)})
}
