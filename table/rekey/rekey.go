// Package rekey changes a table's primary key online (Ghosh's Morphus and Parqua, chapters 2–3 of
// ../shared/research/ghosh-2018-data-reconfiguration-phd.txt), without refusing a write and without
// a stale read:
//
//  1. the descriptor records the re-key (a new table id, the new key, a fence id);
//  2. a watch with an initial scan copies every row of the old keyspace into the new one (the rows
//     re-encoded under the new key), then keeps applying the old keyspace's changes;
//  3. once the copy has caught up, a span fence over the old keyspace holds its writes (they wait
//     in the store, they are not refused); the copy applies the changes up to each range's fence
//     index, the last ones there can be;
//  4. the fence is retired (writes and reads of the old keyspace now fail with SPAN_RETIRED) and the
//     descriptor switches to the new id and key in one compare-and-swap: the cutover. Table clients
//     that meet the retired span reload the descriptor and go on under the new key;
//  5. the old rows are deleted (by the fence's owner, whose writes pass it).
//
// A restarted coordinator lifts a fence it may have left, clears the new keyspace and copies again.
// It owns the protocol only: rows and descriptors are package table's, fences and watches the
// store's (client, kv). It must never write the old keyspace except to delete it after the cutover.
package rekey

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/shoaldb/shoal/client"
	"github.com/shoaldb/shoal/table"
)

// Options tune a re-key.
type Options struct {
	// PrimaryKey is the new primary key (columns of the table, in key order).
	PrimaryKey []string
	// BatchRows is how many row writes the copy sends per batch (default 512).
	BatchRows int
	// Placement is how the new keyspace's ranges are cut and led (Placements; default balanced).
	Placement string
	// Seed makes the random placement repeatable.
	Seed uint64
	// Progress, if set, is told how the re-key goes (from the coordinator's goroutine).
	Progress func(Progress)
}

// Progress is where a re-key is.
type Progress struct {
	Phase string // "placement", "copy", "catch-up", "fencing", "fenced", "cutover", "cleanup", "done"
	// Rows copied by the initial scan, changes applied since, old rows deleted by the cleanup.
	Rows, Changes, Cleaned int64
	Elapsed                time.Duration
}

// Result is what a finished re-key did.
type Result struct {
	OldID, NewID         uint64
	Rows, Changes, Moved int64
	Cleaned              int64
	FenceHeld, CutoverAt time.Duration // how long writes were held; when the cutover happened
	Total                time.Duration
	PrimaryKey, OldKey   []string
	FenceIndexes         map[uint64]uint64
	// Resumed: an interrupted re-key to the same key was taken over.
	Resumed bool
	// Placement is how the new keyspace was split and led (nil with PlaceNone).
	Placement *PlacementReport
}

// ErrBusy: another re-key of the table is under way (or was interrupted with another key: cancel
// it first).
var ErrBusy = errors.New("another re-key of the table is under way")

// Run re-keys table name to opts.PrimaryKey and returns once it has cut over and deleted the old
// rows. An interrupted re-key to the same key is taken over (its copy starts again).
func Run(ctx context.Context, c *client.Client, name string, opts Options) (Result, error) {
	if opts.BatchRows <= 0 {
		opts.BatchRows = 512
	}
	if opts.Placement == "" {
		opts.Placement = PlaceBalanced
	}
	if err := checkPlacement(opts.Placement); err != nil {
		return Result{}, err
	}
	cat := table.NewCatalog(c)
	start := time.Now()
	d, err := cat.Describe(ctx, name)
	if err != nil {
		return Result{}, err
	}
	nd := d
	nd.PrimaryKey = opts.PrimaryKey
	nd.Rekey, nd.RetiredIDs = nil, nil
	if err := nd.Validate(); err != nil {
		return Result{}, err
	}
	if equal(d.PrimaryKey, opts.PrimaryKey) && d.Rekey == nil {
		return Result{}, fmt.Errorf("re-key table %q: the primary key is already (%s): %w", name, strings.Join(d.PrimaryKey, ", "), client.ErrInvalidArgument)
	}
	res := Result{OldID: d.ID, OldKey: d.PrimaryKey, PrimaryKey: opts.PrimaryKey}
	prev := d.Rekey
	if prev != nil && !equal(prev.PrimaryKey, opts.PrimaryKey) {
		return res, fmt.Errorf("re-key table %q to (%s): %w (to (%s), since %s; cancel it first)", name, strings.Join(opts.PrimaryKey, ", "), ErrBusy,
			strings.Join(prev.PrimaryKey, ", "), time.UnixMilli(prev.StartedUnixMs).Format(time.RFC3339))
	}
	if d, err = claim(ctx, c, cat, d, opts.PrimaryKey); err != nil {
		return res, err
	}
	res.Resumed = prev != nil
	nd.ID = d.Rekey.NewID
	res.NewID = nd.ID
	// The old and the new keyspace in ranges of their own: the copy's writes and other tables'
	// must not crowd the old keyspace's change buffers (they hold a range's changes, all keys).
	ostart, oend := table.TableSpan(d.ID)
	nstart, nend := table.TableSpan(nd.ID)
	for _, k := range [][]byte{ostart, oend, nstart, nend} {
		if err := rangeBoundary(ctx, c, k); err != nil {
			return res, fmt.Errorf("re-key table %q: %w", name, err)
		}
	}
	if opts.Placement != PlaceNone {
		if opts.Progress != nil {
			opts.Progress(Progress{Phase: "placement", Elapsed: time.Since(start)})
		}
		if res.Placement, err = place(ctx, c, d, nd, opts.Placement, opts.Seed); err != nil {
			return res, fmt.Errorf("re-key table %q: %w (the table still serves under its old key; run the re-key again or cancel it)", name, err)
		}
	}
	cp := &copier{c: c, old: d, new: nd, batch: opts.BatchRows, progress: opts.Progress, start: start, moved: map[string][]byte{}, owner: map[string]string{}}
	var est int64
	if res.Placement != nil {
		est = res.Placement.EstimatedRows
	}
	cp.record = recorder(ctx, cat, name, nd.ID, est)
	if err := cp.run(ctx); err != nil {
		return res, fmt.Errorf("re-key table %q: %w (the table still serves under its old key; run the re-key again or cancel it)", name, err)
	}
	res.Rows, res.Changes, res.FenceHeld, res.FenceIndexes = cp.rows, cp.changes, cp.held, cp.fenceIdx
	res.Moved = int64(len(cp.moved))
	res.CutoverAt = time.Since(start)
	cleaned, err := cp.cleanup(ctx)
	res.Cleaned = cleaned
	if err != nil {
		return res, fmt.Errorf("re-key table %q: cut over; deleting the old rows: %w", name, err)
	}
	if _, err := cat.Update(ctx, name, func(cur *table.Descriptor) error {
		cur.RetiredIDs = without(cur.RetiredIDs, d.ID)
		return nil
	}); err != nil {
		return res, fmt.Errorf("re-key table %q: cut over and cleaned; recording it: %w", name, err)
	}
	res.Total = time.Since(start)
	cp.report("done")
	return res, nil
}

// claim records this run's re-key of d (a new id and fence) in the descriptor, first: a run it
// takes over (or one still going somewhere) then fails its cutover, which names the id it copied
// to. A run taken over has its fence lifted (the writes it may hold go on) and its copy dropped.
func claim(ctx context.Context, c *client.Client, cat *table.Catalog, d table.Descriptor, key []string) (table.Descriptor, error) {
	prev := d.Rekey
	id, err := cat.AllocateID(ctx)
	if err != nil {
		return d, err
	}
	nd, err := cat.Update(ctx, d.Name, func(cur *table.Descriptor) error {
		if cur.ID != d.ID || !sameRekey(cur.Rekey, prev) {
			return fmt.Errorf("re-key table %q: %w", d.Name, ErrBusy)
		}
		cur.Rekey = &table.RekeyState{NewID: id, PrimaryKey: key, FenceID: id, StartedUnixMs: time.Now().UnixMilli()}
		return nil
	})
	if err != nil {
		return d, err
	}
	if prev != nil {
		if err := undo(ctx, c, nd.ID, prev); err != nil {
			return nd, err
		}
	}
	return nd, nil
}

// recorder writes a re-key's progress into the table's descriptor for rekey-status. The record is
// advisory: one that fails (a busy catalog, a re-key cancelled meanwhile) is replaced by the next.
func recorder(ctx context.Context, cat *table.Catalog, name string, newID uint64, est int64) func(Progress) {
	return func(p Progress) {
		_, _ = cat.Update(ctx, name, func(cur *table.Descriptor) error {
			if cur.Rekey == nil || cur.Rekey.NewID != newID {
				return errNotOurs
			}
			cur.Rekey.Phase, cur.Rekey.Rows, cur.Rekey.Changes = p.Phase, p.Rows, p.Changes
			cur.Rekey.EstimatedRows, cur.Rekey.UpdatedUnixMs = est, time.Now().UnixMilli()
			return nil
		})
	}
}

// errNotOurs: the descriptor records another re-key (or none): leave it be.
var errNotOurs = errors.New("the descriptor records another re-key")

// Cancel stops a re-key that has not cut over: it lifts its fence, deletes the rows copied so far
// and clears the descriptor's record of it. A re-key still running elsewhere fails at its cutover.
func Cancel(ctx context.Context, c *client.Client, name string) error {
	cat := table.NewCatalog(c)
	d, err := cat.Describe(ctx, name)
	if err != nil {
		return err
	}
	st := d.Rekey
	if st == nil {
		return fmt.Errorf("table %q: no re-key to cancel: %w", name, client.ErrInvalidArgument)
	}
	// Cleared first: a run still going fails its cutover (which names this re-key), so the copy
	// is never the table when it is deleted below.
	if _, err := cat.Update(ctx, name, func(cur *table.Descriptor) error {
		if cur.ID != d.ID || !sameRekey(cur.Rekey, st) {
			return fmt.Errorf("table %q: the re-key to cancel cut over or changed meanwhile: %w", name, table.ErrDescriptorChanged)
		}
		cur.Rekey = nil
		return nil
	}); err != nil {
		return err
	}
	return undo(ctx, c, d.ID, st)
}

// sameRekey reports whether a and b are the same re-key (both none, or the same new id).
func sameRekey(a, b *table.RekeyState) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.NewID == b.NewID && a.FenceID == b.FenceID
}

// undo lifts re-key st's fence from table id's keyspace and deletes what st copied.
func undo(ctx context.Context, c *client.Client, id uint64, st *table.RekeyState) error {
	ostart, oend := table.TableSpan(id)
	if err := c.LiftFence(ctx, ostart, oend, st.FenceID); err != nil {
		return fmt.Errorf("lift the re-key's fence: %w", err)
	}
	if _, err := table.NewCatalog(c).DeleteRowsOf(ctx, st.NewID); err != nil {
		return fmt.Errorf("delete the copied rows: %w", err)
	}
	return nil
}

// rangeBoundary makes key the first key of a range (a split, unless it is one already).
func rangeBoundary(ctx context.Context, c *client.Client, key []byte) error {
	var last error
	for attempt := 0; attempt < 5; attempt++ {
		if lr, err := c.Lookup(ctx, key); err == nil && bytes.Equal(lr.GetRange().GetStartKey(), key) {
			return nil
		}
		if _, _, last = c.Split(ctx, key); last == nil {
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("split at %q: %w", key, last)
}

func equal(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func without(ids []uint64, id uint64) []uint64 {
	var out []uint64
	for _, x := range ids {
		if x != id {
			out = append(out, x)
		}
	}
	return out
}
