package client

import (
	"context"
	"fmt"
	"os"

	"github.com/shoaldb/shoal/backup"
	"github.com/shoaldb/shoal/plan/mergeplan"
)

// ChainRestoreOptions tunes RestoreChain.
type ChainRestoreOptions struct {
	RestoreOptions
	// Strategy orders the merges of the chain's backups (plan/mergeplan).
	Strategy mergeplan.Strategy
	// Fanin is the most backups one merge reads (0: 16).
	Fanin int
	// TempDir holds intermediate runs ("": the system's temporary directory).
	TempDir string
}

// ChainRestoreResult says what RestoreChain did.
type ChainRestoreResult struct {
	RestoreResult
	Links  int                `json:"links"`
	Merges []backup.MergeStat `json:"merges"`
	Plan   mergeplan.Plan     `json:"-"`
	Chain  *backup.Chain      `json:"-"`
}

// RestoreChain loads the state the backup in dir implies — a full backup, or an incremental with the
// chain of backups it was taken against — into the cluster through the normal write path. Every link
// and every file of the chain is checked before anything is written, so a damaged or missing link
// writes nothing. The chain's backups are merged in the order opts.Strategy plans.
func (c *Client) RestoreChain(ctx context.Context, dir string, opts ChainRestoreOptions) (ChainRestoreResult, error) {
	var res ChainRestoreResult
	ch, err := backup.OpenChain(dir)
	if err != nil {
		return res, fmt.Errorf("%w; nothing was written", err)
	}
	res.Chain, res.Links = ch, len(ch.Links)
	sets, err := ch.Verify(true)
	if err != nil {
		return res, fmt.Errorf("%w; nothing was written", err)
	}
	if opts.Fanin == 0 {
		opts.Fanin = 16
	}
	if res.Plan, err = mergeplan.Make(sets, opts.Strategy, mergeplan.Options{Fanin: opts.Fanin}); err != nil {
		return res, err
	}
	tmp, err := os.MkdirTemp(opts.TempDir, "shoal-restore-")
	if err != nil {
		return res, fmt.Errorf("restore: %w", err)
	}
	defer os.RemoveAll(tmp)
	bw := newBatchWriter(c, ctx, opts.RestoreOptions)
	res.Merges, err = ch.Merge(res.Plan, tmp, bw.add)
	if err == nil {
		err = bw.flush()
	}
	res.Keys = bw.written
	if err != nil {
		return res, err
	}
	res.Ranges = len(ch.Newest().Manifest.Ranges)
	if !opts.Verify {
		return res, nil
	}
	// Read every key back, merging the chain again in one pass.
	one := mergeplan.Plan{Runs: len(ch.Links)}
	if len(ch.Links) > 1 {
		all := make([]int, len(ch.Links))
		for i := range all {
			all[i] = i
		}
		one.Merges = []mergeplan.Merge{{Inputs: all}}
	}
	if _, err = ch.Merge(one, tmp, func(k, v []byte) error { return c.verifyRestored(ctx, k, v) }); err != nil {
		return res, err
	}
	res.Verified = true
	return res, nil
}
