package main

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/shoaldb/shoal/cmd/shoal/internal/cli"
	"github.com/shoaldb/shoal/pb"
	"github.com/shoaldb/shoal/server/apijson"
)

var joinStatusFlags struct{ once bool }

var adminJoinStatusCmd = &cobra.Command{
	Use:   "join-status NODE",
	Short: "Follow a node's join: replicas received, ranges served, with a progress bar",
	Long: `Show how far NODE (a node id, as shown by "admin nodes") has got in joining the cluster. When a
node joins a running cluster, the autopilot's incremental_join policy moves its share of replicas to
it — one range at a time with the incremental strategy (the default: the node serves each range as
soon as its replica has caught up, state "partially-joined"), or all at once with the parallel one
(it serves nothing until the end). The command prints a progress bar every second until the join is
complete; --once prints the current state and returns. With --format json it prints the join object
of "admin nodes --format json".`,
	Example: `  shoal admin join-status 4
  shoal admin join-status 4 --once --format json`,
	Args: cli.Args(cobra.ExactArgs(1)),
	RunE: func(cmd *cobra.Command, a []string) error {
		node, err := parseID("NODE", a[0])
		if err != nil {
			return err
		}
		once := joinStatusFlags.once || cli.JSON()
		if !once && !cmd.Flags().Changed("timeout") {
			cli.Global.Timeout = 24 * time.Hour
		}
		return withSession(cmd, func(s *session) error {
			p := newProgress(cmd.ErrOrStderr())
			defer p.end()
			for {
				nodes, err := s.c.Nodes(s.ctx)
				if err != nil {
					return err
				}
				var ns *pb.NodeStatus
				for _, n := range nodes {
					if n.GetDesc().GetNodeId() == node {
						ns = n
					}
				}
				if ns == nil {
					return fmt.Errorf("node %d is not a member of this cluster", node)
				}
				j := ns.GetJoin()
				if cli.JSON() {
					return cli.WriteJSON(cmd.OutOrStdout(), apijson.JoinStatusJSON(j))
				}
				if j == nil {
					_, err := fmt.Fprintf(cmd.OutOrStdout(), "node %d has no join: it was part of the cluster from the start, or its join has not started (state %s)\n", node, ns.GetState())
					return err
				}
				line := joinLine(node, ns.GetState(), j)
				if once || j.DoneUnixNanos != 0 {
					p.end()
					_, err := fmt.Fprintln(cmd.OutOrStdout(), line)
					return err
				}
				p.show(line, fmt.Sprintf("node %d %s (%s): %d/%d replicas, leads %d ranges", node, ns.GetState(), j.Strategy, j.Held, j.Target, j.Leading))
				select {
				case <-s.ctx.Done():
					return fmt.Errorf("node %d is still joining; the autopilot keeps going", node)
				case <-time.After(time.Second):
				}
			}
		})
	},
}

func joinLine(node uint64, state string, j *pb.JoinStatus) string {
	started := time.Unix(0, j.StartedUnixNanos)
	end := time.Now()
	if j.DoneUnixNanos != 0 {
		end = time.Unix(0, j.DoneUnixNanos)
		state = "joined"
	}
	line := fmt.Sprintf("node %d %s (%s): %s %d/%d replicas, leads %d ranges, %s", node, state, j.Strategy,
		progressBar(int(j.Held), int(j.Target), 30), j.Held, j.Target, j.Leading, end.Sub(started).Round(time.Second))
	if j.FirstServedUnixNanos != 0 {
		line += fmt.Sprintf("; first range served after %s", time.Unix(0, j.FirstServedUnixNanos).Sub(started).Round(100*time.Millisecond))
	}
	return line
}

func init() {
	adminJoinStatusCmd.Flags().BoolVar(&joinStatusFlags.once, "once", false, "print the current state and return")
	adminCmd.AddCommand(adminJoinStatusCmd)
}
