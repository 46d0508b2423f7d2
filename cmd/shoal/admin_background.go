package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/shoaldb/shoal/backup"
	"github.com/shoaldb/shoal/client"
	"github.com/shoaldb/shoal/cmd/shoal/internal/cli"
)

// withLongSession is withSession for commands that wait for heavy work: unless --timeout was given,
// the command may run for a day (the work itself reports progress on the node).
func withLongSession(cmd *cobra.Command, fn func(s *session) error) error {
	if !cmd.Flags().Changed("timeout") {
		cli.Global.Timeout = 24 * time.Hour
	}
	return withSession(cmd, fn)
}

var adminCompactCmd = &cobra.Command{
	Use:   "compact NODE",
	Short: "Run a full compaction of a node's storage engine, after moving its leaderships away",
	Long: `Compact the whole storage engine of NODE (a node id, as shown by "admin nodes") down to its
bottom level. A full compaction rewrites every table, so the node first announces it: the autopilot's
shed_leadership policy moves the node's leaderships to idle replicas and the compaction starts once
none is left (or after the node's maximum postponement, default 5m, if no replica is idle). The
command returns when the compaction is done and prints how it passed that gate.`,
	Example: `  shoal admin compact 2`,
	Args:    cli.Args(cobra.ExactArgs(1)),
	RunE: func(cmd *cobra.Command, a []string) error {
		node, err := parseID("NODE", a[0])
		if err != nil {
			return err
		}
		return withLongSession(cmd, func(s *session) error {
			fmt.Fprintf(cmd.ErrOrStderr(), "node %d: full compaction requested; waiting for it to finish...\n", node)
			res, err := s.c.Compact(s.ctx, node)
			if err != nil {
				return err
			}
			return printTask(cmd, "compaction", res)
		})
	},
}

var backupFlags struct {
	rate            int64
	incrementalFrom string
}

var adminBackupCmd = &cobra.Command{
	Use:   "backup NODE DIR",
	Short: "Back up every range held by a node into a directory on that node's host",
	Long: `Write a consistent backup of every range with a replica on NODE into DIR, an absolute path on
NODE's host that must not exist or be empty. Each replica first catches up with its leader (so every
write acknowledged before the backup started is in it), then the node takes a checkpoint of its engine
(one point in time) and writes one file per range plus MANIFEST.json (spans, key counts, CRC-32C).
A backup reads every key, so the node first moves its leaderships away (shed_leadership policy).
Restore it into a new cluster with "shoal restore DIR".

With --incremental-from PREV (an earlier backup of the node, on its host), only the keys put and
deleted since PREV are written; the manifest names PREV with its checksum. When PREV is the node's
newest backup, taken on this node, the node reads only the keys its change journal lists since PREV;
otherwise it reads every key and diffs against PREV's key index, and says why. A damaged or missing
PREV is refused before anything is written.
"shoal backup list|verify|compact" and "shoal restore" work on the chain.`,
	Example: `  shoal admin backup 1 /var/backups/shoal/2026-11-23
  shoal admin backup 1 /mnt/backup/b1 --rate 50MiB
  shoal admin backup 1 /var/backups/shoal/2026-11-24 --incremental-from /var/backups/shoal/2026-11-23`,
	Args: cli.Args(cobra.ExactArgs(2)),
	RunE: func(cmd *cobra.Command, a []string) error {
		node, err := parseID("NODE", a[0])
		if err != nil {
			return err
		}
		if !filepath.IsAbs(a[1]) {
			return cli.Usage(fmt.Errorf("DIR %q must be an absolute path (it is on the node's host)", a[1]))
		}
		rate, parent := backupFlags.rate, backupFlags.incrementalFrom
		if parent != "" && !filepath.IsAbs(parent) {
			return cli.Usage(fmt.Errorf("--incremental-from %q must be an absolute path (it is on the node's host)", parent))
		}
		return withLongSession(cmd, func(s *session) error {
			fmt.Fprintf(cmd.ErrOrStderr(), "node %d: backup into %s requested; waiting for it to finish...\n", node, a[1])
			res, err := s.c.BackupIncremental(s.ctx, node, a[1], parent, rate)
			if err != nil {
				return err
			}
			if cli.JSON() {
				return cli.WriteJSON(cmd.OutOrStdout(), map[string]any{"node": res.Node, "outcome": res.Outcome,
					"duration_ms": res.Duration.Milliseconds(), "manifest": json.RawMessage(res.Manifest)})
			}
			var m backup.Manifest
			if err := json.Unmarshal([]byte(res.Manifest), &m); err != nil {
				return fmt.Errorf("backup finished but its manifest is unreadable: %w", err)
			}
			if m.Incremental() {
				how := "read from the change journal"
				if m.Method != "journal" {
					how = "diffed every key against the parent's index"
					if m.Fallback != "" {
						how += ": " + m.Fallback
					}
				}
				_, err = fmt.Fprintf(cmd.OutOrStdout(), "node %d: incremental backup of %d ranges, %d keys put and %d deleted since %s, %s into %s in %s\n  changes %s\n  %s\n",
					res.Node, len(m.Ranges), m.TotalKeys, m.TotalDeletes, m.Parent.ID, cli.HumanBytes(m.TotalBytes), a[1],
					res.Duration.Round(time.Millisecond), how, res.Outcome)
				return err
			}
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "node %d: backup of %d ranges, %d keys, %s into %s in %s\n  %s\n",
				res.Node, len(m.Ranges), m.TotalKeys, cli.HumanBytes(m.TotalBytes), a[1], res.Duration.Round(time.Millisecond), res.Outcome)
			return err
		})
	},
}

var maintenanceFlags struct {
	task     string
	duration time.Duration
	end      bool
}

var adminMaintenanceCmd = &cobra.Command{
	Use:   "maintenance NODE --task NAME --duration D",
	Short: "Announce that a job of yours is about to load a node (its leaderships move away first)",
	Long: `Announce maintenance on NODE: a job of your own (a scrub, an upgrade step, a file-system backup)
is about to load it for --duration. The node registers the task as pending, the autopilot's
shed_leadership policy moves its leaderships to idle replicas, and the command returns once the job may
start (or after the node's maximum postponement if no replica is idle). While the announcement lasts
the node is never chosen as a leader. End it early with --end.`,
	Example: `  shoal admin maintenance 3 --task fsck --duration 10m && run-fsck && shoal admin maintenance 3 --task fsck --end`,
	Args:    cli.Args(cobra.ExactArgs(1)),
	RunE: func(cmd *cobra.Command, a []string) error {
		node, err := parseID("NODE", a[0])
		if err != nil {
			return err
		}
		if maintenanceFlags.task == "" {
			return cli.Usage(errors.New("--task NAME is required"))
		}
		if !maintenanceFlags.end && maintenanceFlags.duration <= 0 {
			return cli.Usage(errors.New("--duration must be positive (how long the job will load the node)"))
		}
		return withLongSession(cmd, func(s *session) error {
			if maintenanceFlags.end {
				if err := s.c.EndMaintenance(s.ctx, node, maintenanceFlags.task); err != nil {
					return err
				}
				_, err := fmt.Fprintf(cmd.OutOrStdout(), "node %d: maintenance %q ended\n", node, maintenanceFlags.task)
				return err
			}
			res, err := s.c.Maintenance(s.ctx, node, maintenanceFlags.task, maintenanceFlags.duration)
			if err != nil {
				return err
			}
			return printTask(cmd, "maintenance "+maintenanceFlags.task+" may start", res)
		})
	},
}

func printTask(cmd *cobra.Command, what string, res client.TaskResult) error {
	if cli.JSON() {
		return cli.WriteJSON(cmd.OutOrStdout(), map[string]any{"node": res.Node, "outcome": res.Outcome, "duration_ms": res.Duration.Milliseconds()})
	}
	_, err := fmt.Fprintf(cmd.OutOrStdout(), "node %d: %s (%s)\n  %s\n", res.Node, what, res.Duration.Round(time.Millisecond), res.Outcome)
	return err
}

var restoreFlags struct {
	verify bool
	batch  int
}

var restoreCmd = &cobra.Command{
	Use:   "restore DIR",
	Short: "Load a backup into a cluster (normally a new one)",
	Long: `Load the backup in DIR (written by "shoal admin backup") into the cluster reached through
--host, through the normal replicated write path. Every range file is checked against the manifest's
key count and CRC-32C before anything is written; a damaged backup is refused. With --verify, every
key is read back afterwards and compared. Keys already in the cluster are overwritten.

DIR may be an incremental backup: then its chain back to a full backup is checked link by link and
file by file before anything is written, and merged in the order --strategy plans, reading at most
--fanin backups per merge.`,
	Example: `  shoal start --bootstrap --data-dir /var/lib/shoal-new &
  shoal restore /var/backups/shoal/2026-11-23 --verify`,
	Args: cli.Args(cobra.ExactArgs(1)),
	RunE: func(cmd *cobra.Command, a []string) error {
		dir := a[0]
		if restoreFlags.batch <= 0 {
			return cli.Usage(errors.New("--batch must be positive"))
		}
		m, err := backup.ReadManifest(dir)
		if err != nil {
			return err
		}
		if m.Incremental() {
			return restoreChain(cmd, dir)
		}
		fmt.Fprintf(cmd.ErrOrStderr(), "restoring %d ranges (%d keys, %s) backed up from node %d at %s\n", len(m.Ranges),
			m.TotalKeys, cli.HumanBytes(m.TotalBytes), m.NodeID, m.CreatedAt.Format(time.RFC3339))
		for _, e := range m.Ranges {
			if !e.CaughtUp {
				fmt.Fprintf(cmd.ErrOrStderr(), "warning: range %d was backed up from a replica that could not confirm it had caught up with its leader\n", e.RangeID)
			}
		}
		return withLongSession(cmd, func(s *session) error {
			p := newProgress(cmd.ErrOrStderr())
			_, res, err := s.c.Restore(s.ctx, dir, client.RestoreOptions{Batch: restoreFlags.batch, Verify: restoreFlags.verify,
				Progress: func(done uint64) {
					// In a log, one line per tenth of the keys.
					tenth := uint64(0)
					if m.TotalKeys > 0 {
						tenth = done * 10 / m.TotalKeys
					}
					p.show(fmt.Sprintf("%s %d/%d keys", progressBar(int(done), int(m.TotalKeys), 30), done, m.TotalKeys),
						fmt.Sprintf("restored %d%% of %d keys", tenth*10, m.TotalKeys))
				}})
			p.end()
			if err != nil {
				return err
			}
			if cli.JSON() {
				return cli.WriteJSON(cmd.OutOrStdout(), res)
			}
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "restored %d keys of %d ranges from %s%s\n", res.Keys, res.Ranges, dir, verifiedNote(res.Verified))
			return err
		})
	},
}

// verifiedNote ends a restore's line when every key was read back.
func verifiedNote(verified bool) string {
	if verified {
		return "; every key verified"
	}
	return ""
}

func init() {
	adminBackupCmd.Flags().Var(sizeOf(&backupFlags.rate), "rate", "limit the backup's reads to this many bytes per second, e.g. 50MiB (default unlimited)")
	adminBackupCmd.Flags().StringVar(&backupFlags.incrementalFrom, "incremental-from", "", "write only the changes since this earlier backup (an absolute path on the node's host)")
	f := adminMaintenanceCmd.Flags()
	f.StringVar(&maintenanceFlags.task, "task", "", "name of the job (shown in admin nodes and the decision log)")
	f.DurationVar(&maintenanceFlags.duration, "duration", 0, "how long the job will load the node, e.g. 10m")
	f.BoolVar(&maintenanceFlags.end, "end", false, "end the announcement --task early")
	restoreCmd.Flags().BoolVar(&restoreFlags.verify, "verify", false, "read every key back afterwards and compare")
	restoreCmd.Flags().IntVar(&restoreFlags.batch, "batch", 256, "keys per write batch")
	adminCmd.AddCommand(adminCompactCmd, adminBackupCmd, adminMaintenanceCmd)
	rootCmd.AddCommand(restoreCmd)
}
