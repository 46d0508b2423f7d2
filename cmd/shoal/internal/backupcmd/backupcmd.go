// Package backupcmd is `shoal backup`: the commands that inspect, check, plan and roll up backups
// and chains of incremental backups, offline, on their directories. It never talks to a cluster
// (restore, which does, is the root's).
package backupcmd

import (
	"errors"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/shoaldb/shoal/backup"
	"github.com/shoaldb/shoal/cmd/shoal/internal/cli"
	"github.com/shoaldb/shoal/plan/mergeplan"
)

// PlanFlags are the merge planner's flags of a command that merges a chain (restore, backup
// compact): the merge order and the most backups one merge reads.
type PlanFlags struct {
	Strategy string
	Fanin    int
}

// Register adds --strategy and --fanin to c.
func (f *PlanFlags) Register(c *cobra.Command) {
	f.registerFanin(c)
	// A chain is one large full backup and small incrementals: the shape on which BalanceTree
	// carries the large run through every level (the thesis's Lemma 5.3) and SmallestInput leaves it
	// for the last merge.
	c.Flags().StringVar(&f.Strategy, "strategy", mergeplan.SmallestInput.String(),
		"merge order of a chain: balance-tree-input, balance-tree-output, smallest-input, smallest-output, largest-match, random")
}

func (f *PlanFlags) registerFanin(c *cobra.Command) {
	c.Flags().IntVar(&f.Fanin, "fanin", 16, "the most backups one merge reads")
}

// Options checks the flags and returns the strategy and fan-in they name.
func (f PlanFlags) Options() (mergeplan.Strategy, int, error) {
	s, err := mergeplan.ParseStrategy(f.Strategy)
	if err != nil {
		return 0, 0, cli.Usage(err)
	}
	if f.Fanin < 2 {
		return 0, 0, cli.Usage(errors.New("--fanin must be at least 2"))
	}
	return s, f.Fanin, nil
}

// compactFlags are backup compact's, planFlags backup plan's.
var (
	compactFlags struct {
		PlanFlags
		out string
	}
	planFlags PlanFlags
)

var backupCmd = &cobra.Command{
	Use:   "backup",
	Short: "Inspect, check and roll up backups and chains of incremental backups (offline, on files)",
}

var backupListCmd = &cobra.Command{
	Use:   "list DIR",
	Short: "List the backups in a directory and its subdirectories, with their chains",
	Long: `List the backup in DIR and those in its subdirectories, oldest first: id, kind (full or
incremental, with how it found its changes: journal or diff), parent, keys put and deleted, bytes, and
the length of its chain back to a full backup —
or why it cannot be restored (an interrupted backup, a missing or altered parent). Reads manifests only.`,
	Example: `  shoal backup list /var/backups/shoal`,
	Args:    cli.Args(cobra.ExactArgs(1)),
	RunE: func(cmd *cobra.Command, a []string) error {
		list, err := backup.List(a[0])
		if err != nil {
			return err
		}
		if cli.JSON() {
			return cli.WriteJSON(cmd.OutOrStdout(), list)
		}
		tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "DIR\tID\tKIND\tPARENT\tCREATED\tKEYS\tDELETES\tBYTES\tCHAIN")
		for _, l := range list {
			chain := fmt.Sprint(l.Chain)
			switch {
			case l.Kind == "incomplete" || l.Kind == "unreadable":
				chain = l.Err
			case l.Err != "":
				chain = "broken: " + l.Err
			}
			kind := l.Kind
			if l.Method != "" {
				kind += " (" + l.Method + ")"
			}
			created := ""
			if !l.CreatedAt.IsZero() {
				created = l.CreatedAt.Format(time.RFC3339)
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d\t%d\t%s\t%s\n", l.Dir, l.ID, kind, l.Parent, created, l.Keys, l.Deletes,
				cli.HumanBytes(l.Bytes), chain)
		}
		return tw.Flush()
	},
}

var backupVerifyCmd = &cobra.Command{
	Use:   "verify CHAIN",
	Short: "Check a backup and every backup of its chain, file by file",
	Long: `Check the backup in CHAIN and, for an incremental one, every link back to its full backup: each
parent is where it was (or beside its child), is the backup the child was taken against (id and manifest
checksum), and every range file and key index matches its manifest (key counts, bytes, CRC-32C).
Exits non-zero naming the first damaged or missing link.`,
	Example: `  shoal backup verify /var/backups/shoal/2026-11-24`,
	Args:    cli.Args(cobra.ExactArgs(1)),
	RunE: func(cmd *cobra.Command, a []string) error {
		c, err := backup.OpenChain(a[0])
		if err != nil {
			return err
		}
		if _, err := c.Verify(false); err != nil {
			return err
		}
		var keys, deletes, bytes uint64
		for _, l := range c.Links {
			keys, deletes, bytes = keys+l.Manifest.TotalKeys, deletes+l.Manifest.TotalDeletes, bytes+l.Manifest.TotalBytes
		}
		if cli.JSON() {
			return cli.WriteJSON(cmd.OutOrStdout(), map[string]any{"links": len(c.Links), "keys": keys, "deletes": deletes, "bytes": bytes, "ok": true})
		}
		_, err = fmt.Fprintf(cmd.OutOrStdout(), "chain of %d backups ok: %d keys put, %d deleted, %s\n", len(c.Links), keys, deletes, cli.HumanBytes(bytes))
		return err
	},
}

var backupCompactCmd = &cobra.Command{
	Use:   "compact CHAIN --out NEW",
	Short: "Roll a chain of backups up into one full backup",
	Long: `Merge the backup in CHAIN with every backup of its chain into a full backup in NEW (which must
not exist or be empty): the state the newest backup implies, in its ranges, with a key index so later
incremental backups can be taken against NEW. The chain is checked first; a damaged or missing link
writes nothing. --strategy orders the merges, reading at most --fanin backups per merge; the output
reports the keys each merge read and wrote.`,
	Example: `  shoal backup compact /var/backups/shoal/2026-11-24 --out /var/backups/shoal/2026-11-24-full`,
	Args:    cli.Args(cobra.ExactArgs(1)),
	RunE: func(cmd *cobra.Command, a []string) error {
		if compactFlags.out == "" {
			return cli.Usage(errors.New("--out NEW is required"))
		}
		strategy, fanin, err := compactFlags.Options()
		if err != nil {
			return err
		}
		c, err := backup.OpenChain(a[0])
		if err != nil {
			return fmt.Errorf("%w; nothing was written", err)
		}
		sets, err := c.Verify(true)
		if err != nil {
			return fmt.Errorf("%w; nothing was written", err)
		}
		p, err := mergeplan.Make(sets, strategy, mergeplan.Options{Fanin: fanin})
		if err != nil {
			return err
		}
		start := time.Now()
		res, err := backup.Compact(c, p, compactFlags.out)
		if err != nil {
			return err
		}
		var read, written uint64
		for _, st := range res.Merges {
			read, written = read+st.ReadKeys, written+st.WrittenKeys
		}
		if cli.JSON() {
			return cli.WriteJSON(cmd.OutOrStdout(), map[string]any{"links": len(c.Links), "strategy": strategy.String(), "fanin": fanin,
				"read_keys": read, "written_keys": written, "lower_bound": mergeplan.LowerBound(sets),
				"duration_ms": time.Since(start).Milliseconds(), "merges": res.Merges, "manifest": res.Manifest})
		}
		_, err = fmt.Fprintf(cmd.OutOrStdout(), "rolled %d backups up into %s: %d keys, %s in %d ranges; %d merges (%s, fan-in %d) read %d keys and wrote %d (lower bound %.0f) in %s\n",
			len(c.Links), compactFlags.out, res.Manifest.TotalKeys, cli.HumanBytes(res.Manifest.TotalBytes), len(res.Manifest.Ranges), len(res.Merges),
			strategy, fanin, read, written, mergeplan.LowerBound(sets), time.Since(start).Round(time.Millisecond))
		return err
	},
}

var backupPlanCmd = &cobra.Command{
	Use:   "plan CHAIN",
	Short: "Compare the merge planner's strategies on a chain (cost against the lower bound)",
	Long: `Read the keys of every backup of CHAIN and print, for each merge strategy, the cost of its plan
(the keys of every node of the merge tree, Σ|A_ν|), the keys it reads and writes, and the ratio to the
lower bound Σ|A_i| (and to Σ|A_i| + |∪A_i|, the cost of one merge of every backup). SmallestOutput is
also planned on HyperLogLog sketches of the backups, as a large chain would be. Nothing is written.`,
	Example: `  shoal backup plan /var/backups/shoal/2026-11-24 --fanin 2`,
	Args:    cli.Args(cobra.ExactArgs(1)),
	RunE: func(cmd *cobra.Command, a []string) error {
		if planFlags.Fanin < 2 {
			return cli.Usage(errors.New("--fanin must be at least 2"))
		}
		c, err := backup.OpenChain(a[0])
		if err != nil {
			return err
		}
		sets, err := c.Verify(true)
		if err != nil {
			return err
		}
		rows, err := comparePlans(sets, planFlags.Fanin)
		if err != nil {
			return err
		}
		if cli.JSON() {
			return cli.WriteJSON(cmd.OutOrStdout(), rows)
		}
		tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "strategy\tcost\tio\tcost/LB\tcost/rootLB\t")
		for _, r := range rows {
			fmt.Fprintf(tw, "%s\t%.0f\t%.0f\t%.3f\t%.3f\t\n", r.Strategy, r.Cost, r.IO, r.Cost/r.LowerBound, r.Cost/r.RootBound)
		}
		return tw.Flush()
	},
}

// planRow is one strategy's plan on a chain.
type planRow struct {
	Strategy   string  `json:"strategy"`
	Cost       float64 `json:"cost"`
	IO         float64 `json:"io"`
	LowerBound float64 `json:"lower_bound"`
	RootBound  float64 `json:"root_bound"`
}

// comparePlans plans sets with every strategy (and SmallestOutput on sketches) and costs each plan on
// the exact sets.
func comparePlans(sets []mergeplan.Set, fanin int) ([]planRow, error) {
	lb, rb := mergeplan.LowerBound(sets), mergeplan.RootBound(sets)
	var rows []planRow
	add := func(name string, p mergeplan.Plan) {
		cost, _ := mergeplan.Cost(p, sets)
		rows = append(rows, planRow{Strategy: name, Cost: cost, IO: mergeplan.IO(p, sets), LowerBound: lb, RootBound: rb})
	}
	for _, s := range mergeplan.Strategies {
		p, err := mergeplan.Make(sets, s, mergeplan.Options{Fanin: fanin, Seed: 1})
		if err != nil {
			return nil, err
		}
		add(s.String(), p)
	}
	sketches := make([]mergeplan.Set, len(sets))
	for i, s := range sets {
		sketches[i] = mergeplan.SketchOf(s.(mergeplan.KeySet))
	}
	p, err := mergeplan.Make(sketches, mergeplan.SmallestOutput, mergeplan.Options{Fanin: fanin})
	if err != nil {
		return nil, err
	}
	add("smallest-output-hll", p)
	if len(sets) <= mergeplan.MaxOptimalRuns && fanin == 2 {
		p, _, err := mergeplan.Optimal(sets)
		if err != nil {
			return nil, err
		}
		add("optimum", p)
	}
	return rows, nil
}

// Command is `shoal backup`: list, verify, compact and plan, on backup directories (no cluster).
func Command() *cobra.Command {
	compactFlags.Register(backupCompactCmd)
	planFlags.registerFanin(backupPlanCmd)
	backupCompactCmd.Flags().StringVar(&compactFlags.out, "out", "", "directory of the full backup to write (must not exist or be empty)")
	backupCmd.AddCommand(backupListCmd, backupVerifyCmd, backupCompactCmd, backupPlanCmd)
	return backupCmd
}
