package main

import (
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/shoaldb/shoal/pb"
)

var adminPolicyCmd = &cobra.Command{
	Use:   "policy",
	Short: "List the autopilot's policies or switch one on or off",
	Long: `The autopilot (on the node leading the meta range) runs one policy per mechanism: replicate,
decommission, drain, load_split, merge, rebalance, ... "policy list" shows them; "policy set NAME on|off"
switches one, cluster-wide and persistently. A policy that is off proposes nothing.`,
	Args: cobra.ArbitraryArgs,
	RunE: groupRunE,
}

var adminPolicyListCmd = &cobra.Command{
	Use:     "list",
	Short:   "List the autopilot's policies and whether each is on",
	Example: "  shoal admin policy list --format json",
	Args:    args(cobra.NoArgs),
	RunE: func(cmd *cobra.Command, _ []string) error {
		return withSession(cmd, func(s *session) error {
			ps, err := s.c.Policies(s.ctx)
			if err != nil {
				return err
			}
			if jsonOutput() {
				out := []map[string]any{}
				for _, p := range ps {
					out = append(out, map[string]any{"name": p.Name, "on": p.On})
				}
				return writeJSON(cmd.OutOrStdout(), out)
			}
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "POLICY\tSTATE")
			for _, p := range ps {
				st := "off"
				if p.On {
					st = "on"
				}
				fmt.Fprintf(tw, "%s\t%s\n", p.Name, st)
			}
			return tw.Flush()
		})
	},
}

var adminPolicySetCmd = &cobra.Command{
	Use:     "set NAME on|off",
	Short:   "Switch an autopilot policy on or off",
	Example: "  shoal admin policy set rebalance off",
	Args:    args(cobra.ExactArgs(2)),
	RunE: func(cmd *cobra.Command, a []string) error {
		var on bool
		switch a[1] {
		case "on":
			on = true
		case "off":
		default:
			return usageError{fmt.Errorf("state must be on or off, not %q", a[1])}
		}
		return withSession(cmd, func(s *session) error {
			if err := s.c.SetPolicy(s.ctx, a[0], on); err != nil {
				return err
			}
			if jsonOutput() {
				return writeJSON(cmd.OutOrStdout(), map[string]any{"name": a[0], "on": on})
			}
			_, err := fmt.Fprintf(cmd.OutOrStdout(), "policy %s is %s\n", a[0], a[1])
			return err
		})
	},
}

var adminDecisionsCmd = &cobra.Command{
	Use:   "decisions",
	Short: "Show the autopilot's decision log: what it did, why, what it predicted and what it measured",
	Long: `Every operator the autopilot ran, oldest first: its policy, the operator, the reason, the
predicted benefit and — measured after the operator finished — the realized one. --format json prints
the same array as /api/decisions.`,
	Example: "  shoal admin decisions --format json",
	Args:    args(cobra.NoArgs),
	RunE: func(cmd *cobra.Command, _ []string) error {
		return withSession(cmd, func(s *session) error {
			ds, raw, err := s.c.Decisions(s.ctx)
			if err != nil {
				return err
			}
			if jsonOutput() {
				if len(raw) == 0 || string(raw) == "null" {
					raw = []byte("[]")
				}
				_, err := fmt.Fprintln(cmd.OutOrStdout(), string(raw))
				return err
			}
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "TIME\tPOLICY\tRANGE\tSTATUS\tOPERATOR\tREASON")
			for _, d := range ds {
				t := d.Time
				if pt, err := time.Parse(time.RFC3339Nano, d.Time); err == nil {
					t = pt.Local().Format("15:04:05")
				}
				fmt.Fprintf(tw, "%s\t%s\tr%d\t%s\t%s\t%s\n", t, d.Policy, d.Range, d.Status, d.Operator, d.Reason)
			}
			return tw.Flush()
		})
	},
}

func nodeStateCmd(use, short, long string, state pb.NodeAdminState, done string) *cobra.Command {
	c := &cobra.Command{
		Use:   use + " NODE",
		Short: short,
		Long:  long,
		Args:  args(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, a []string) error {
			node, err := parseID("NODE", a[0])
			if err != nil {
				return err
			}
			return withSession(cmd, func(s *session) error {
				if err := s.c.SetNodeState(s.ctx, node, state); err != nil {
					return err
				}
				if wait, _ := cmd.Flags().GetBool("wait"); wait && state != pb.NodeAdminState_NODE_ACTIVE {
					if err := waitNodeEmptied(cmd, s, node, state); err != nil {
						return err
					}
				}
				if jsonOutput() {
					return writeJSON(cmd.OutOrStdout(), map[string]any{"node": node, "state": state.String()})
				}
				_, err := fmt.Fprintf(cmd.OutOrStdout(), "node %d: %s (watch it with: shoal admin nodes)\n", node, done)
				return err
			})
		},
	}
	if state != pb.NodeAdminState_NODE_ACTIVE {
		c.Flags().Bool("wait", false, "show progress until the node is emptied (bounded by --timeout); the move continues if interrupted")
	}
	return c
}

// waitNodeEmptied shows the progress of a drain (leaderships left) or decommission (replicas left)
// until it is done or the command's --timeout ends; the work itself goes on in the cluster either way.
func waitNodeEmptied(cmd *cobra.Command, s *session, node uint64, state pb.NodeAdminState) error {
	what := "leaderships"
	if state == pb.NodeAdminState_NODE_DECOMMISSIONING {
		what = "replicas"
	}
	first := -1
	for {
		ns, err := s.c.Nodes(s.ctx)
		if err != nil {
			return err
		}
		left := -1
		for _, n := range ns {
			if n.GetDesc().GetNodeId() == node {
				left = int(n.GetLeaderCount())
				if what == "replicas" {
					left = int(n.GetRangeCount())
					if n.GetDecommissioned() {
						left = 0
					}
				}
			}
		}
		if first < 0 {
			first = left
		}
		done := first - left
		bar := progressBar(done, first, 30)
		fmt.Fprintf(cmd.ErrOrStderr(), "\rnode %d: %s %d/%d %s moved", node, bar, done, first, what)
		if left <= 0 {
			fmt.Fprintln(cmd.ErrOrStderr())
			return nil
		}
		select {
		case <-s.ctx.Done():
			fmt.Fprintln(cmd.ErrOrStderr())
			return fmt.Errorf("node %d still has %d %s; the autopilot keeps going (check with: shoal admin nodes)", node, left, what)
		case <-time.After(time.Second):
		}
	}
}

func progressBar(done, total, width int) string {
	if total <= 0 {
		total, done = 1, 1
	}
	n := done * width / total
	if n < 0 {
		n = 0
	}
	return "[" + strings.Repeat("#", n) + strings.Repeat(".", width-n) + "]"
}

func init() {
	adminPolicyCmd.AddCommand(adminPolicyListCmd, adminPolicySetCmd)
	adminCmd.AddCommand(adminPolicyCmd, adminDecisionsCmd,
		nodeStateCmd("drain", "Move every leadership off a node (it keeps its replicas)",
			"Mark NODE draining: the autopilot's drain policy moves its leaderships to other nodes and gives it none.", pb.NodeAdminState_NODE_DRAINING, "draining"),
		nodeStateCmd("decommission", "Move every replica off a node, then mark it decommissioned",
			"Mark NODE decommissioning: the autopilot moves its replicas elsewhere, one range at a time, and marks it decommissioned once empty. Resumable: it continues after restarts.", pb.NodeAdminState_NODE_DECOMMISSIONING, "decommissioning"),
		nodeStateCmd("activate", "Clear a node's drain or decommission mark",
			"Make NODE an ordinary node again (undoes drain; stops a decommission in progress).", pb.NodeAdminState_NODE_ACTIVE, "active"))
}
