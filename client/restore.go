package client

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/shoaldb/shoal/backup"
	"github.com/shoaldb/shoal/pb"
	"github.com/shoaldb/shoal/storage/stored"
)

// RestoreOptions tunes Restore.
type RestoreOptions struct {
	// Batch is the number of keys per write batch (default 256).
	Batch int
	// Verify reads every key back afterwards and compares it with the backup.
	Verify bool
	// Progress, if set, is called with the number of keys written so far.
	Progress func(keys uint64)
}

// RestoreResult says what Restore did.
type RestoreResult struct {
	Ranges   int    `json:"ranges"`
	Keys     uint64 `json:"keys"`
	Verified bool   `json:"verified"`
}

// Restore loads the backup in dir (package backup's format, written by `shoal admin backup`) into the
// cluster through the normal write path. Every range file is checked against its manifest entry
// before anything is written, so a damaged backup writes nothing. Existing keys are overwritten.
func (c *Client) Restore(ctx context.Context, dir string, opts RestoreOptions) (*backup.Manifest, RestoreResult, error) {
	var res RestoreResult
	m, err := backup.ReadManifest(dir)
	if err != nil {
		return nil, res, err
	}
	if err := backup.Verify(dir, m); err != nil {
		return m, res, fmt.Errorf("%w; nothing was written", err)
	}
	bw := newBatchWriter(c, ctx, opts)
	for _, e := range m.Ranges {
		err := backup.ReadRange(dir, e, bw.add)
		if err == nil {
			err = bw.flush()
		}
		res.Keys = bw.written
		if err != nil {
			return m, res, err
		}
		res.Ranges++
	}
	if !opts.Verify {
		return m, res, nil
	}
	for _, e := range m.Ranges {
		if err := backup.ReadRange(dir, e, func(k, v []byte) error { return c.verifyRestored(ctx, k, v) }); err != nil {
			return m, res, err
		}
	}
	res.Verified = true
	return m, res, nil
}

// batchWriter writes restored pairs through WriteMany, opts.Batch at a time, and reports progress.
type batchWriter struct {
	c       *Client
	ctx     context.Context
	opts    RestoreOptions
	muts    []*pb.Mutation
	written uint64
}

func newBatchWriter(c *Client, ctx context.Context, opts RestoreOptions) *batchWriter {
	if opts.Batch <= 0 {
		opts.Batch = 256
	}
	return &batchWriter{c: c, ctx: ctx, opts: opts}
}

// add queues a pair (the slices are copied) and writes the batch once it is full.
// A backup holds stored values (package stored): the value goes back with its expiry.
func (b *batchWriter) add(k, v []byte) error {
	sv, err := stored.Decode(v)
	if err != nil {
		return fmt.Errorf("restore: key %q: %w", k, err)
	}
	b.muts = append(b.muts, &pb.Mutation{Key: bytes.Clone(k), Value: bytes.Clone(sv.Data), ExpireAtUnixMs: sv.ExpireAtMs})
	if len(b.muts) >= b.opts.Batch {
		return b.flush()
	}
	return nil
}

func (b *batchWriter) flush() error {
	if len(b.muts) == 0 {
		return nil
	}
	if err := b.c.WriteMany(b.ctx, b.muts); err != nil {
		return fmt.Errorf("restore: write batch: %w", err)
	}
	b.written += uint64(len(b.muts))
	b.muts = b.muts[:0]
	if b.opts.Progress != nil {
		b.opts.Progress(b.written)
	}
	return nil
}

// verifyRestored checks that the cluster holds v at k.
func (c *Client) verifyRestored(ctx context.Context, k, v []byte) error {
	sv, err := stored.Decode(v)
	if err != nil {
		return fmt.Errorf("restore: verify: key %q: %w", k, err)
	}
	e, found, err := c.GetEntry(ctx, k)
	got := e.Value
	switch {
	case err != nil:
		return fmt.Errorf("restore: verify %q: %w", k, err)
	case !found && sv.ExpireAtMs != 0 && sv.ExpireAtMs <= time.Now().UnixMilli():
		return nil // expired since the backup
	case found && e.ExpireAtMs != sv.ExpireAtMs:
		return fmt.Errorf("restore: verify: key %q expires at %d after the restore, %d in the backup", k, e.ExpireAtMs, sv.ExpireAtMs)
	case !found:
		return fmt.Errorf("restore: verify: key %q is missing after the restore", k)
	case !bytes.Equal(got, sv.Data):
		return fmt.Errorf("restore: verify: key %q has a different value after the restore", k)
	}
	return nil
}

// WriteMany writes muts in as few atomic batches as the cluster's ranges allow: one batch per range
// the client knows the keys to be in (each key's writes stay in their order), and, when a range
// split since, halves of a batch that straddles the new boundary, recursively. It is not atomic
// across ranges (bulk loads, restores and copies, where that does not matter).
func (c *Client) WriteMany(ctx context.Context, muts []*pb.Mutation) error {
	if len(muts) == 0 {
		return nil
	}
	if groups := c.byRange(ctx, muts); len(groups) > 1 {
		for _, g := range groups {
			if err := c.WriteMany(ctx, g); err != nil {
				return err
			}
		}
		return nil
	}
	err := c.BatchWrite(ctx, muts)
	if err == nil || len(muts) == 1 || !errors.Is(err, ErrInvalidArgument) {
		return err
	}
	half := len(muts) / 2
	if err := c.WriteMany(ctx, muts[:half]); err != nil {
		return err
	}
	return c.WriteMany(ctx, muts[half:])
}

// byRange groups muts by the range the client's cache (or a lookup) places each key in, keeping
// their order within a group. A key stays in the group of its first write even if the cache
// changed meanwhile (its writes must not be reordered across groups); a key the client cannot
// place leaves everything in one group, for BatchWrite's retries and the halving to sort out.
func (c *Client) byRange(ctx context.Context, muts []*pb.Mutation) [][]*pb.Mutation {
	var groups [][]*pb.Mutation
	index := map[uint64]int{}
	keyGroup := map[string]int{}
	for _, m := range muts {
		g, seen := keyGroup[string(m.Key)]
		if !seen {
			e, err := c.locate(ctx, m.Key)
			if err != nil {
				return [][]*pb.Mutation{muts}
			}
			id := e.desc.GetRangeId()
			var ok bool
			if g, ok = index[id]; !ok {
				g = len(groups)
				index[id] = g
				groups = append(groups, nil)
			}
			keyGroup[string(m.Key)] = g
		}
		groups[g] = append(groups[g], m)
	}
	return groups
}
