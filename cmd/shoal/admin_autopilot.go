package main

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/shoaldb/shoal/cmd/shoal/internal/cli"
	"github.com/shoaldb/shoal/pb"
)

var adminPolicyCmd = &cobra.Command{
	Use:   "policy",
	Short: "List the autopilot's policies or switch one on or off",
	Long: `The autopilot (on the node leading the meta range) runs one policy per mechanism: replicate,
decommission, drain, load_split, merge, rebalance, ... "policy list" shows them; "policy set NAME on|off"
switches one, cluster-wide and persistently. A policy that is off proposes nothing.`,
	Args: cobra.ArbitraryArgs,
	RunE: cli.GroupRunE,
}

var adminPolicyListCmd = &cobra.Command{
	Use:     "list",
	Short:   "List the autopilot's policies and whether each is on",
	Example: "  shoal admin policy list --format json",
	Args:    cli.Args(cobra.NoArgs),
	RunE: func(cmd *cobra.Command, _ []string) error {
		return withSession(cmd, func(s *session) error {
			ps, err := s.c.Policies(s.ctx)
			if err != nil {
				return err
			}
			if cli.JSON() {
				out := []map[string]any{}
				for _, p := range ps {
					out = append(out, map[string]any{"name": p.Name, "on": p.On})
				}
				return cli.WriteJSON(cmd.OutOrStdout(), out)
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
	Args:    cli.Args(cobra.ExactArgs(2)),
	RunE: func(cmd *cobra.Command, a []string) error {
		var on bool
		switch a[1] {
		case "on":
			on = true
		case "off":
		default:
			return cli.Usage(fmt.Errorf("state must be on or off, not %q", a[1]))
		}
		return withSession(cmd, func(s *session) error {
			if err := s.c.SetPolicy(s.ctx, a[0], on); err != nil {
				return err
			}
			if cli.JSON() {
				return cli.WriteJSON(cmd.OutOrStdout(), map[string]any{"name": a[0], "on": on})
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
predicted benefit ("metric before→expected") and — measured after the operator finished — the
realized one ("metric before→after"), and, in a window before it and a window after it, the requests
per second of the key span it changed (QPS) and the 99th percentile of their latency on the ranges'
leaders, in milliseconds (P99 MS); "-": no reading, "?": the window after is not over yet.
--format json prints the same array as /api/decisions (throughput.before and .after hold qps,
timed, p50_ms and p99_ms).`,
	Example: "  shoal admin decisions --format json",
	Args:    cli.Args(cobra.NoArgs),
	RunE: func(cmd *cobra.Command, _ []string) error {
		return withSession(cmd, func(s *session) error {
			ds, raw, err := s.c.Decisions(s.ctx)
			if err != nil {
				return err
			}
			if cli.JSON() {
				if len(raw) == 0 || string(raw) == "null" {
					raw = []byte("[]")
				}
				_, err := fmt.Fprintln(cmd.OutOrStdout(), string(raw))
				return err
			}
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "TIME\tPOLICY\tRANGE\tSTATUS\tOPERATOR\tPREDICTED\tMEASURED\tQPS\tP99 MS\tREASON")
			for _, d := range ds {
				t := d.Time
				if pt, err := time.Parse(time.RFC3339Nano, d.Time); err == nil {
					t = pt.Local().Format("15:04:05")
				}
				qps, p99 := throughputText(d.Throughput)
				fmt.Fprintf(tw, "%s\t%s\tr%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", t, d.Policy, d.Range, d.Status, d.Operator,
					benefitText(d.Predicted, false), benefitText(d.Measured, true), qps, p99, d.Reason)
			}
			return tw.Flush()
		})
	},
}

// benefitText renders a decision's predicted benefit ("metric before→expected") or measured one
// ("metric before→after"), or "-" when there is none (not measured yet, or the operator failed).
func benefitText(raw json.RawMessage, measured bool) string {
	var b struct {
		Metric string   `json:"metric"`
		Before float64  `json:"before"`
		Delta  float64  `json:"delta"`
		After  *float64 `json:"after"`
	}
	if len(raw) == 0 || string(raw) == "null" || json.Unmarshal(raw, &b) != nil || b.Metric == "" {
		return "-"
	}
	end := b.Before + b.Delta
	if measured && b.After != nil {
		end = *b.After
	}
	return fmt.Sprintf("%s %s→%s", b.Metric, cli.Number(b.Before), cli.Number(end))
}

// throughputText renders the requests per second of a decision's key span before and after it
// ("120→240"; "120→?" until measured) and their p99 latency in milliseconds ("4.20→1.10"), each "-"
// when there is no reading.
func throughputText(raw json.RawMessage) (qps, p99 string) {
	type window struct {
		QPS   float64  `json:"qps"`
		P99Ms *float64 `json:"p99_ms"`
	}
	var t struct {
		Before *window `json:"before"`
		After  *window `json:"after"`
	}
	if len(raw) == 0 || string(raw) == "null" || json.Unmarshal(raw, &t) != nil || t.Before == nil {
		return "-", "-"
	}
	ms := func(v *float64) string {
		if v == nil {
			return "-"
		}
		return strconv.FormatFloat(*v, 'f', 2, 64)
	}
	qpsAfter, p99After := "?", "?"
	if t.After != nil {
		qpsAfter, p99After = strconv.FormatFloat(t.After.QPS, 'f', 0, 64), ms(t.After.P99Ms)
	}
	qps = strconv.FormatFloat(t.Before.QPS, 'f', 0, 64) + "→" + qpsAfter
	if t.Before.P99Ms == nil && (t.After == nil || t.After.P99Ms == nil) {
		return qps, "-"
	}
	return qps, ms(t.Before.P99Ms) + "→" + p99After
}

func nodeStateCmd(use, short, long string, state pb.NodeAdminState, done string) *cobra.Command {
	c := &cobra.Command{
		Use:   use + " NODE",
		Short: short,
		Long:  long,
		Args:  cli.Args(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, a []string) error {
			node, err := parseID("NODE", a[0])
			if err != nil {
				return err
			}
			return withSession(cmd, func(s *session) error {
				if err := checkNodeState(s, node, state); err != nil {
					return err
				}
				if err := s.c.SetNodeState(s.ctx, node, state); err != nil {
					return err
				}
				if wait, _ := cmd.Flags().GetBool("wait"); wait && state != pb.NodeAdminState_NODE_ACTIVE {
					if err := waitNodeEmptied(cmd, s, node, state); err != nil {
						return err
					}
				}
				if cli.JSON() {
					// The state as "admin nodes" names it, not the protobuf enum's name.
					return cli.WriteJSON(cmd.OutOrStdout(), map[string]any{"node": node, "state": done})
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

// checkNodeState refuses, before anything changes, a state the cluster cannot reach: a node that is not
// a member, a drain with nowhere to move a leadership to, or a decommission with nowhere to move a
// replica to (the autopilot would retry forever).
func checkNodeState(s *session, node uint64, state pb.NodeAdminState) error {
	nodes, err := s.c.Nodes(s.ctx)
	if err != nil {
		return err
	}
	var members []uint64
	for _, n := range nodes {
		members = append(members, n.GetDesc().GetNodeId())
	}
	if !slices.Contains(members, node) {
		return fmt.Errorf("node %d is not a member of this cluster (its nodes: %s)", node, ids(members))
	}
	if state == pb.NodeAdminState_NODE_ACTIVE {
		return nil
	}
	ranges, err := s.c.Ranges(s.ctx)
	if err != nil {
		return err
	}
	if state == pb.NodeAdminState_NODE_DRAINING {
		return drainBlocker(nodes, ranges, node)
	}
	return decommissionBlocker(nodes, ranges, node)
}

// decommissionBlocker says why node cannot be emptied, or returns nil: every range with a voter on it
// needs another node to move that replica to — live, not draining or decommissioning, and not
// holding a replica of the range already (the decommission policy's choice of targets).
func decommissionBlocker(nodes []*pb.NodeStatus, ranges []*pb.RangeStatus, node uint64) error {
	var takers []uint64
	for _, n := range nodes {
		id := n.GetDesc().GetNodeId()
		if id != node && canTake(n) {
			takers = append(takers, id)
		}
	}
	for _, r := range ranges {
		d := r.GetDesc()
		var holders []uint64
		voter := false
		for _, rep := range d.GetReplicas() {
			holders = append(holders, rep.GetNodeId())
			voter = voter || (rep.GetNodeId() == node && !rep.GetLearner())
		}
		if !voter {
			continue // a learner is simply removed
		}
		free := slices.DeleteFunc(slices.Clone(takers), func(id uint64) bool { return slices.Contains(holders, id) })
		if len(free) > 0 {
			continue
		}
		why := "no other node is live and active (not draining or decommissioning)"
		if len(takers) > 0 {
			why = fmt.Sprintf("range %d already has replicas on nodes %s, every other live, active node, and a range keeps its replicas on distinct nodes",
				d.GetRangeId(), ids(holders))
		}
		return fmt.Errorf("node %d cannot be decommissioned: its replicas have nowhere to go: %s. Start another node "+
			"(shoal start --join ...) first; to move only its leaderships away, use \"shoal admin drain %d\"", node, why, node)
	}
	return nil
}

// waitNodeEmptied shows the progress of a drain (leaderships left) or decommission (replicas left)
// until it is done or the command's --timeout ends; the work itself goes on in the cluster either way.
func waitNodeEmptied(cmd *cobra.Command, s *session, node uint64, state pb.NodeAdminState) error {
	what := "leaderships"
	if state == pb.NodeAdminState_NODE_DECOMMISSIONING {
		what = "replicas"
	}
	p := newProgress(cmd.ErrOrStderr())
	defer p.end()
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
		p.show(fmt.Sprintf("node %d: %s %d/%d %s moved", node, progressBar(done, first, 30), done, first, what),
			fmt.Sprintf("node %d: %d/%d %s moved", node, done, first, what))
		if left <= 0 {
			return nil
		}
		select {
		case <-s.ctx.Done():
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
