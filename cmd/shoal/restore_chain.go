package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/shoaldb/shoal/client"
	"github.com/shoaldb/shoal/cmd/shoal/internal/backupcmd"
	"github.com/shoaldb/shoal/cmd/shoal/internal/cli"
)

// restorePlan is restore's merge order of a chain.
var restorePlan backupcmd.PlanFlags

// restoreChain is restore of an incremental backup: its chain, checked, then merged.
func restoreChain(cmd *cobra.Command, dir string) error {
	strategy, fanin, err := restorePlan.Options()
	if err != nil {
		return err
	}
	return withLongSession(cmd, func(s *session) error {
		p := newProgress(cmd.ErrOrStderr())
		res, err := s.c.RestoreChain(s.ctx, dir, client.ChainRestoreOptions{
			RestoreOptions: client.RestoreOptions{Batch: restoreFlags.batch, Verify: restoreFlags.verify,
				Progress: func(done uint64) {
					// The chain's key count is known only once merged: a line per 10 000 keys in a log.
					p.show(fmt.Sprintf("%d keys restored", done), fmt.Sprintf("restored %d keys", done/10_000*10_000))
				}},
			Strategy: strategy, Fanin: fanin, TempDir: os.TempDir()})
		p.end()
		if err != nil {
			return err
		}
		if cli.JSON() {
			return cli.WriteJSON(cmd.OutOrStdout(), res)
		}
		_, err = fmt.Fprintf(cmd.OutOrStdout(), "restored %d keys of %d ranges from a chain of %d backups ending in %s (%d merges, %s)%s\n",
			res.Keys, res.Ranges, res.Links, dir, len(res.Merges), strategy, verifiedNote(res.Verified))
		return err
	})
}

func init() {
	restorePlan.Register(restoreCmd)
	rootCmd.AddCommand(backupcmd.Command())
}
