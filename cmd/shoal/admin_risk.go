package main

import (
	"fmt"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/shoaldb/shoal/cmd/shoal/internal/cli"
	"github.com/shoaldb/shoal/pb"
	"github.com/shoaldb/shoal/plan/quorumrisk"
)

var adminQuorumRiskCmd = &cobra.Command{
	Use:   "quorum-risk",
	Short: "How likely concurrent busy nodes are to leave some range without a free majority",
	Long: `For the cluster's current placement, the chance that H nodes busy at once (hot spots, backups,
compactions, maintenance), chosen at random, leave at least one range with fewer than a majority of
its voters free, for H = 1 up to the node count; and the ranges that are in that state right now
because of the nodes that are busy or down. Nodes that share ranges should not be made busy at once:
Shoal's own heavy tasks wait for each other (shoal admin maintenance, backup, compact).`,
	Example: "  shoal admin quorum-risk\n  shoal --format json admin quorum-risk",
	Args:    cli.Args(cobra.NoArgs),
	RunE: func(cmd *cobra.Command, _ []string) error {
		return withSession(cmd, func(s *session) error {
			nodes, err := s.c.Nodes(s.ctx)
			if err != nil {
				return err
			}
			ranges, err := s.c.Ranges(s.ctx)
			if err != nil {
				return err
			}
			return printQuorumRisk(cmd, nodes, ranges)
		})
	},
}

func init() { adminCmd.AddCommand(adminQuorumRiskCmd) }

// riskRow is the risk of h busy nodes.
type riskRow struct {
	Busy  int     `json:"busy_nodes"`
	Risk  float64 `json:"risk"`
	Exact bool    `json:"exact"`
}

func printQuorumRisk(cmd *cobra.Command, nodes []*pb.NodeStatus, ranges []*pb.RangeStatus) error {
	var ids []uint64
	down := map[uint64]string{}
	for _, n := range nodes {
		id := n.GetDesc().GetNodeId()
		if n.GetDecommissioned() {
			continue
		}
		ids = append(ids, id)
		switch {
		case !n.GetLive():
			down[id] = "down"
		case slices.ContainsFunc(n.GetStats().GetTasks(), func(t *pb.BackgroundTask) bool { return t.GetHeavy() && t.GetRunning() }):
			down[id] = "busy"
		}
	}
	var voters [][]uint64
	var atRisk []string
	for _, r := range ranges {
		var v []uint64
		busy := 0
		for _, rd := range r.GetDesc().GetReplicas() {
			if !rd.GetLearner() {
				v = append(v, rd.GetNodeId())
				if down[rd.GetNodeId()] != "" {
					busy++
				}
			}
		}
		voters = append(voters, v)
		if len(v) >= 3 && busy >= quorumrisk.Blocking(len(v)) {
			atRisk = append(atRisk, fmt.Sprintf("range %d (%d of %d voters busy or down)", r.GetDesc().GetRangeId(), busy, len(v)))
		}
	}
	var rows []riskRow
	for h := 1; h < len(ids); h++ {
		p, exact := quorumrisk.ClusterRisk(ids, h, voters)
		rows = append(rows, riskRow{Busy: h, Risk: p, Exact: exact})
	}
	if cli.JSON() {
		return cli.WriteJSON(cmd.OutOrStdout(), map[string]any{"nodes": len(ids), "ranges": len(ranges), "risk": rows,
			"busy_or_down": down, "ranges_without_free_majority": atRisk})
	}
	w := cmd.OutOrStdout()
	fmt.Fprintf(w, "%d nodes, %d ranges: chance that H nodes busy at random leave some range without a free majority\n", len(ids), len(ranges))
	for _, r := range rows {
		note := ""
		if !r.Exact {
			note = " (sampled)"
		}
		fmt.Fprintf(w, "  H=%-3d %6.1f %%%s\n", r.Busy, 100*r.Risk, note)
	}
	if len(down) == 0 {
		_, err := fmt.Fprintln(w, "now: no node busy or down")
		return err
	}
	var now []string
	for _, id := range ids {
		if st := down[id]; st != "" {
			now = append(now, fmt.Sprintf("n%d %s", id, st))
		}
	}
	fmt.Fprintf(w, "now: %s\n", strings.Join(now, ", "))
	if len(atRisk) == 0 {
		_, err := fmt.Fprintln(w, "every range keeps a free majority")
		return err
	}
	_, err := fmt.Fprintf(w, "without a free majority: %s\n", strings.Join(atRisk, "; "))
	return err
}
