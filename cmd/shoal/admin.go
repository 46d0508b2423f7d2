package main

import (
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/shoaldb/shoal/cmd/shoal/internal/cli"
	"github.com/shoaldb/shoal/pb"
	"github.com/shoaldb/shoal/server/apijson"
)

var adminNodesCmd = &cobra.Command{
	Use:   "nodes",
	Short: "List the cluster's nodes with their state and load",
	Long: `List the cluster's nodes: id, gRPC and HTTP addresses, state (live, dead, draining, ...),
how many ranges each holds and leads, and its background tasks (compactions, backups, announced
maintenance; "pending" ones wait for the node's leaderships to move). With --format json, print an
array of objects with id, addr, http_addr, live, draining, state, range_count, leader_count,
profile (the engine profile the node runs), tasks, usage (measured and predicted usage — CPU
share plus disk busy, 1 is saturated — and the cache's predicted and observed hit ratio; as
/api/nodes does). USAGE shows measured/predicted, HIT predicted/observed.`,
	Example: `  shoal admin nodes
  shoal admin nodes --format json`,
	Args: cli.Args(cobra.NoArgs),
	RunE: func(cmd *cobra.Command, _ []string) error {
		return withSession(cmd, func(s *session) error {
			nodes, err := s.c.Nodes(s.ctx)
			if err != nil {
				return err
			}
			out := apijson.NodesJSON(nodes)
			if cli.JSON() {
				return cli.WriteJSON(cmd.OutOrStdout(), out)
			}
			return writeTable(cmd.OutOrStdout(), []string{"ID", "ADDR", "HTTP", "STATE", "LIVE", "DRAINING", "RANGES", "LEADERS", "LOCALITY", "PROFILE", "USAGE", "HIT", "TASKS"},
				len(out), func(i int) []string {
					n := out[i]
					tasks := strings.Join(n.Tasks, ", ")
					if tasks == "" {
						tasks = "-"
					}
					loc := n.Locality
					if loc == "" {
						loc = "-"
					}
					profile := n.Profile
					if profile == "" {
						profile = "-"
					}
					use, hit := usageCells(n.Usage)
					return []string{u64(n.ID), n.Addr, n.HTTPAddr, n.State, strconv.FormatBool(n.Live), strconv.FormatBool(n.Draining),
						strconv.FormatUint(uint64(n.RangeCount), 10), strconv.FormatUint(uint64(n.LeaderCount), 10), loc, profile, use, hit, tasks}
				})
		})
	},
}

var adminRangesCmd = &cobra.Command{
	Use:   "ranges",
	Short: "List the cluster's ranges with their replicas and leaders",
	Long: `List the cluster's ranges in key order: id, span [start, end), voting replicas, learners,
leader and generation (node ids). Text output shows keys quoted and the meta range as (meta); with
--format json, print an array of objects (as /api/ranges does) with id, start and end (hex; "" is
-inf/+inf), start_key and end_key (the same keys as text, or base64 with start_key_encoding or
end_key_encoding "base64"), meta (true for the meta range, which holds no user data), replicas,
learners, generation and leader (null while unknown).`,
	Example: `  shoal admin ranges
  shoal admin ranges --format json`,
	Args: cli.Args(cobra.NoArgs),
	RunE: func(cmd *cobra.Command, _ []string) error {
		return withSession(cmd, func(s *session) error {
			ranges, err := s.c.Ranges(s.ctx)
			if err != nil {
				return err
			}
			out := apijson.RangesJSON(ranges)
			if cli.JSON() {
				return cli.WriteJSON(cmd.OutOrStdout(), out)
			}
			descs := make(map[uint64]*pb.RangeDescriptor, len(ranges))
			for _, r := range ranges {
				descs[r.GetDesc().GetRangeId()] = r.GetDesc()
			}
			return writeTable(cmd.OutOrStdout(), []string{"ID", "START", "END", "REPLICAS", "LEARNERS", "LEADER", "GEN", "FENCES"},
				len(out), func(i int) []string {
					r := out[i]
					d := descs[r.ID]
					start, end := startText(d.GetStartKey()), endText(d.GetEndKey())
					if r.ID == metaRangeID {
						start, end = "(meta)", "-" // the meta range's span is not part of the user key space
					}
					return []string{u64(r.ID), start, end, ids(r.Replicas), ids(r.Learners), leaderText(r.Leader), u64(r.Generation), fencesText(r.Fences)}
				})
		})
	},
}

var adminSplitCmd = &cobra.Command{
	Use:   "split KEY",
	Short: "Split the range holding KEY so that KEY starts a new range",
	Long: `Split the range holding KEY at KEY: the left range keeps its id and ends at KEY, a new right
range starts at KEY. Prints both ranges (with --format json, {"left","right"} in the shape of
"admin ranges").`,
	Example: `  shoal admin split user5`,
	Args:    cli.Args(cobra.ExactArgs(1)),
	RunE: func(cmd *cobra.Command, a []string) error {
		return withSession(cmd, func(s *session) error {
			left, right, err := s.c.Split(s.ctx, []byte(a[0]))
			if err != nil {
				return err
			}
			js := apijson.RangesJSON([]*pb.RangeStatus{{Desc: left}, {Desc: right}})
			if cli.JSON() {
				if len(js) != 2 {
					return fmt.Errorf("split: server returned incomplete descriptors")
				}
				return cli.WriteJSON(cmd.OutOrStdout(), map[string]apijson.RangeJSON{"left": js[0], "right": js[1]})
			}
			w := cmd.OutOrStdout()
			fmt.Fprintf(w, "split at %s\n", strconv.Quote(a[0]))
			fmt.Fprintf(w, "left:  r%d [%s, %s)\n", left.GetRangeId(), startText(left.GetStartKey()), endText(left.GetEndKey()))
			fmt.Fprintf(w, "right: r%d [%s, %s)\n", right.GetRangeId(), startText(right.GetStartKey()), endText(right.GetEndKey()))
			return nil
		})
	},
}

var adminMergeCmd = &cobra.Command{
	Use:   "merge KEY",
	Short: "Merge the range holding KEY with its right neighbour",
	Long: `Merge the range holding KEY with the range that follows it: the left range keeps its id and
grows to the right range's end; the right range disappears. No data moves (every node keeps all its
ranges in one engine), but both ranges must have replicas on the same nodes — the autopilot's merge
policy moves replicas first; by hand, relocate them. While the merge runs (normally well under a
second) requests for the right range are retried, never failed. Prints the merged range (with
--format json in the shape of "admin ranges").`,
	Example: `  shoal admin merge user1`,
	Args:    cli.Args(cobra.ExactArgs(1)),
	RunE: func(cmd *cobra.Command, a []string) error {
		return withSession(cmd, func(s *session) error {
			d, err := s.c.Merge(s.ctx, []byte(a[0]))
			if err != nil {
				return err
			}
			js := apijson.RangesJSON([]*pb.RangeStatus{{Desc: d}})
			if cli.JSON() {
				if len(js) != 1 {
					return fmt.Errorf("merge: server returned no descriptor")
				}
				return cli.WriteJSON(cmd.OutOrStdout(), js[0])
			}
			fmt.Fprintf(cmd.OutOrStdout(), "merged: r%d [%s, %s)\n", d.GetRangeId(), startText(d.GetStartKey()), endText(d.GetEndKey()))
			return nil
		})
	},
}

var adminTransferLeaderCmd = &cobra.Command{
	Use:   "transfer-leader RANGE NODE",
	Short: "Move the leadership of range RANGE to node NODE",
	Long: `Ask range RANGE (its id, as shown by "admin ranges") to hand its leadership to its replica on
node NODE (a node id, as shown by "admin nodes").`,
	Example: `  shoal admin transfer-leader 3 2`,
	Args:    cli.Args(cobra.ExactArgs(2)),
	RunE: func(cmd *cobra.Command, a []string) error {
		rangeID, err := parseID("RANGE", a[0])
		if err != nil {
			return err
		}
		nodeID, err := parseID("NODE", a[1])
		if err != nil {
			return err
		}
		return withSession(cmd, func(s *session) error {
			if err := checkTransfer(s, rangeID, nodeID); err != nil {
				return err
			}
			if err := s.c.TransferLeader(s.ctx, rangeID, nodeID); err != nil {
				return err
			}
			if cli.JSON() {
				return cli.WriteJSON(cmd.OutOrStdout(), map[string]any{"ok": true, "range": rangeID, "node": nodeID})
			}
			_, err := fmt.Fprintf(cmd.OutOrStdout(), "range %d: leadership transferred to node %d\n", rangeID, nodeID)
			return err
		})
	},
}

// checkTransfer refuses at once a transfer that cannot happen: a range that does not exist, or a node
// without a voter of it (a node asked would wait for it until the command's timeout).
func checkTransfer(s *session, rangeID, nodeID uint64) error {
	ranges, err := s.c.Ranges(s.ctx)
	if err != nil {
		return err
	}
	for _, r := range ranges {
		d := r.GetDesc()
		if d.GetRangeId() != rangeID {
			continue
		}
		var voters, learners []uint64
		for _, rep := range d.GetReplicas() {
			if rep.GetLearner() {
				learners = append(learners, rep.GetNodeId())
			} else {
				voters = append(voters, rep.GetNodeId())
			}
		}
		switch {
		case slices.Contains(voters, nodeID):
			return nil
		case slices.Contains(learners, nodeID):
			return fmt.Errorf("node %d holds only a learner of range %d, and a learner cannot lead; its voters are on nodes %s", nodeID, rangeID, ids(voters))
		}
		return fmt.Errorf("node %d holds no replica of range %d, so it cannot lead it; its voters are on nodes %s", nodeID, rangeID, ids(voters))
	}
	return fmt.Errorf("range %d does not exist (shoal admin ranges lists the ranges)", rangeID)
}

// metaRangeID is the id of the meta range (pb: "The meta range (range_id 1) is special").
const metaRangeID = 1

func init() {
	adminCmd.AddCommand(adminNodesCmd, adminRangesCmd, adminSplitCmd, adminMergeCmd, adminTransferLeaderCmd)
}

// parseID parses a positive range or node id.
func parseID(what, s string) (uint64, error) {
	id, err := strconv.ParseUint(strings.TrimPrefix(strings.ToLower(s), "r"), 10, 64)
	if err != nil || id == 0 {
		return 0, cli.Usage(fmt.Errorf("invalid %s %q: want a positive integer id", what, s))
	}
	return id, nil
}

// writeTable prints a header and n rows as aligned columns.
func writeTable(w io.Writer, header []string, n int, row func(i int) []string) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, strings.Join(header, "\t"))
	for i := range n {
		fmt.Fprintln(tw, strings.Join(row(i), "\t"))
	}
	return tw.Flush()
}

func u64(v uint64) string { return strconv.FormatUint(v, 10) }

// ids renders node ids as "1,2,3", or "-" for none.
func ids(v []uint64) string {
	if len(v) == 0 {
		return "-"
	}
	parts := make([]string, len(v))
	for i, id := range v {
		parts[i] = u64(id)
	}
	return strings.Join(parts, ",")
}

func leaderText(id uint64) string {
	if id == 0 {
		return "?"
	}
	return u64(id)
}

// startText and endText render range bounds for humans: quoted keys, with -inf/+inf for empty bounds.
func startText(k []byte) string {
	if len(k) == 0 {
		return "-inf"
	}
	return strconv.Quote(string(k))
}

func endText(k []byte) string {
	if len(k) == 0 {
		return "+inf"
	}
	return strconv.Quote(string(k))
}

// fencesText lists a range's span fences: "7" holds writes, "7 retired" refuses them for good;
// "-" for none.
func fencesText(fs []apijson.FenceJSON) string {
	if len(fs) == 0 {
		return "-"
	}
	var parts []string
	for _, f := range fs {
		t := fmt.Sprint(f.ID)
		if f.Retired {
			t += " retired"
		}
		parts = append(parts, t)
	}
	return strings.Join(parts, ", ")
}

// usageCells are a node's USAGE (measured/predicted) and HIT (predicted/observed) cells.
func usageCells(u *apijson.UsageJSON) (usage, hit string) {
	if u == nil {
		return "-", "-"
	}
	obs := "-"
	if u.ObservedHit != nil {
		obs = fmt.Sprintf("%.0f%%", 100**u.ObservedHit)
	}
	return fmt.Sprintf("%.0f%%/%.0f%%", 100*u.Measured, 100*u.Predicted), fmt.Sprintf("%.0f%%/%s", 100*u.PredictedHit, obs)
}
