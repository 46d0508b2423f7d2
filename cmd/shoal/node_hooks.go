package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/shoaldb/shoal/client"
	"github.com/shoaldb/shoal/cmd/shoal/internal/cli"
	"github.com/shoaldb/shoal/node/background"
	"github.com/shoaldb/shoal/pb"
)

var nodeCmd = &cobra.Command{
	Use:   "node",
	Short: "Hooks an orchestrator runs around a node's stop and start (prestop, poststart)",
	Long: `Commands an orchestrator runs on the machine of one node, against that node (--host, default
127.0.0.1:26257): prestop before it stops the node, poststart after it started one. Kubernetes runs
them as the pod's lifecycle hooks (deploy/k8s/statefulset.yaml). Both exit 0 whenever the
orchestrator should go ahead, and say what they did in one line: a hook that fails would make the
orchestrator kill the node.`,
}

var preStopFlags struct{ grace time.Duration }

var preStopCmd = &cobra.Command{
	Use:   "prestop",
	Short: "Move this node's leaderships to peers before it stops; it reports not ready from now on",
	Long: `Tell the node at --host that it is about to stop. It hands every range it leads to another voter
of the range at once (a leadership transfer: clients retry once, no election timeout), stays
draining until its process ends so the autopilot gives it none back, and turns /healthz to 503 so
load balancers stop sending it clients. prestop returns when no leadership is left, or after --grace
with the count still there; either way it exits 0, since the stop goes ahead. A node that does not
answer has nothing to hand over: prestop says so and exits 0.

Give --grace less than the orchestrator's termination grace period, leaving time for the node's own
shutdown (Kubernetes: terminationGracePeriodSeconds, which counts the hook's time too).`,
	Example: `  shoal node prestop --host 127.0.0.1:26257 --grace 30s && systemctl stop shoal
  kubectl exec shoal-2 -- /shoal node prestop`,
	Args: cli.Args(cobra.NoArgs),
	RunE: runPreStop,
}

var postStartFlags struct{ wait time.Duration }

var postStartCmd = &cobra.Command{
	Use:   "poststart",
	Short: "Tell a restart from a replacement or growth once this node serves, and act on it",
	Long: `After the node at --host started, wait (up to --wait) until it serves, then say what its start was
and do what that calls for:

  restart      the node came back with its store and its node id: its replicas catch up from
               their peers' logs; poststart returns once they have (the node reports not ready
               and takes no leadership until then, at most 30 s).
  replacement  a new node id at the address of a node that is gone (its volume was lost): the old id
               is decommissioned, so its replicas are re-created from their peers now instead of
               after the dead-node timeout.
  growth       a new node at a new address: the autopilot's join (incremental_join) streams ranges
               to it piece by piece; shoal admin nodes shows its progress.

A node still waiting for shoal init, or not serving within --wait, is left alone (exit 0).`,
	Example: `  shoal node poststart --host 127.0.0.1:26257`,
	Args:    cli.Args(cobra.NoArgs),
	RunE:    runPostStart,
}

// hookTokenFile is where the hooks read the auth token from: an exec hook has no shell to expand one.
var hookTokenFile string

func init() {
	nodeCmd.PersistentFlags().StringVar(&hookTokenFile, "auth-token-file", "", "read the auth token from this file (as shoal start does), instead of --auth-token")
	preStopCmd.Flags().DurationVar(&preStopFlags.grace, "grace", 30*time.Second, "how long to move leaderships before letting the stop go ahead")
	postStartCmd.Flags().DurationVar(&postStartFlags.wait, "wait", 2*time.Minute, "how long to wait for the node to serve")
	nodeCmd.AddCommand(preStopCmd, postStartCmd)
	rootCmd.AddCommand(nodeCmd)
}

// localNode is oneNode for a hook, with the token read from --auth-token-file when given.
func localNode(cmd *cobra.Command, d time.Duration) (context.Context, pb.ShoalClient, func(), error) {
	if hookTokenFile != "" {
		tok, err := readTokenFile(hookTokenFile)
		if err != nil {
			return nil, nil, nil, err
		}
		cli.Global.AuthToken = tok
	}
	return oneNode(cmd, "node hooks", d)
}

func runPreStop(cmd *cobra.Command, _ []string) error {
	if preStopFlags.grace <= 0 {
		return cli.Usage(fmt.Errorf("--grace must be positive (got %s)", preStopFlags.grace))
	}
	// The node gives up at --grace; the call's own deadline leaves it time to answer.
	ctx, c, done, err := localNode(cmd, preStopFlags.grace+5*time.Second)
	if err != nil {
		return err
	}
	defer done()
	resp, err := c.Maintenance(ctx, &pb.MaintenanceRequest{Task: background.PreStopTask, DurationMs: preStopFlags.grace.Milliseconds()})
	if err == nil && resp.GetError() != nil {
		err = errors.New(resp.GetError().GetMessage())
	}
	if err != nil {
		// The stop goes ahead regardless: a node that cannot be asked has nothing to hand over.
		return hookLine(cmd, map[string]any{"node": 0, "outcome": "not drained: " + err.Error()},
			"node at %s not drained (%v); the stop may go ahead\n", cli.Global.Host, err)
	}
	return hookLine(cmd, map[string]any{"node": resp.GetNodeId(), "outcome": resp.GetOutcome()},
		"node %d: %s\n", resp.GetNodeId(), resp.GetOutcome())
}

// hookLine prints a hook's one line, or its JSON.
func hookLine(cmd *cobra.Command, js map[string]any, format string, args ...any) error {
	if cli.JSON() {
		return cli.WriteJSON(cmd.OutOrStdout(), js)
	}
	_, err := fmt.Fprintf(cmd.OutOrStdout(), format, args...)
	return err
}

// postStartRecent is how long after its join a node's start still counts as growth.
const postStartRecent = 10 * time.Minute

func runPostStart(cmd *cobra.Command, _ []string) error {
	if postStartFlags.wait <= 0 {
		return cli.Usage(fmt.Errorf("--wait must be positive (got %s)", postStartFlags.wait))
	}
	ctx, c, done, err := localNode(cmd, postStartFlags.wait)
	if err != nil {
		return err
	}
	defer done()
	self, why := memberID(ctx, c)
	if self == 0 {
		return hookLine(cmd, map[string]any{"node": 0, "start": "unknown", "outcome": why}, "node at %s: %s; nothing to do\n", cli.Global.Host, why)
	}
	// Past this point a failure is reported, not returned: the orchestrator kills a container whose
	// postStart hook fails, and a node that serves must not be killed because its cluster could not
	// be asked about it.
	unclassified := func(err error) error {
		return hookLine(cmd, map[string]any{"node": self, "start": "unknown", "outcome": err.Error()},
			"node %d: start not classified (%v); nothing done\n", self, err)
	}
	err = withSession(cmd, func(s *session) error {
		nodes, err := s.c.Nodes(s.ctx)
		if err != nil {
			return unclassified(err)
		}
		kind, gone := classifyStart(nodes, self, time.Now())
		outcome := ""
		switch kind {
		case "replacement":
			var done []string
			for _, old := range gone {
				if err := s.c.SetNodeState(s.ctx, old, pb.NodeAdminState_NODE_DECOMMISSIONING); err != nil {
					return unclassified(fmt.Errorf("decommission node %d, which node %d replaces: %w", old, self, err))
				}
				done = append(done, fmt.Sprint(old))
			}
			outcome = fmt.Sprintf("replaces node %s at its address without its data: decommissioned, its replicas are re-created from their peers", strings.Join(done, ", "))
		case "growth":
			outcome = "a new node: the autopilot's join streams ranges to it (shoal admin nodes shows its progress)"
		default:
			outcome = "restarted with its store: " + caughtUp(ctx, c)
		}
		return hookLine(cmd, map[string]any{"node": self, "start": kind, "replaces": gone, "outcome": outcome}, "node %d: %s\n", self, outcome)
	})
	var usage cli.UsageError
	if err != nil && !errors.As(err, &usage) {
		return unclassified(err) // the session itself (a flag's value is a usage error, exit 2)
	}
	return err
}

// caughtUp asks the restarted node to answer once its replicas have caught up with their peers
// (within what is left of --wait), so that an orchestrator moves on to the next node only then, and
// says how that went.
func caughtUp(ctx context.Context, c pb.ShoalClient) string {
	d := postStartFlags.wait
	if dl, ok := ctx.Deadline(); ok {
		d = time.Until(dl) - time.Second // the answer's own time
	}
	if d <= 0 {
		return "its replicas catch up from their peers"
	}
	resp, err := c.Maintenance(ctx, &pb.MaintenanceRequest{Task: background.PostStartTask, DurationMs: d.Milliseconds()})
	if err == nil && resp.GetError() != nil {
		err = errors.New(resp.GetError().GetMessage())
	}
	if err != nil {
		return fmt.Sprintf("its replicas catch up from their peers (not waited for: %v)", err)
	}
	return resp.GetOutcome()
}

// memberID waits until the node answers as a member of a cluster and returns its id; 0 and why when
// it waits for shoal init or ctx ends first.
func memberID(ctx context.Context, c pb.ShoalClient) (uint64, string) {
	for {
		resp, err := c.Init(ctx, &pb.InitRequest{CheckOnly: true})
		switch {
		case err == nil && resp.GetNodeId() != 0:
			return resp.GetNodeId(), ""
		case err == nil && resp.GetError() == nil:
			return 0, "waiting for shoal init"
		}
		select {
		case <-ctx.Done():
			why := "not serving within --wait"
			if err != nil {
				why += ": " + initTransportError(cli.Global.Host, err).Error()
			} else if pe := resp.GetError(); pe != nil {
				why += ": " + (&client.Error{Code: pe.Code, Message: pe.Message}).Error()
			}
			return 0, why
		case <-time.After(initRetryInterval):
		}
	}
}

// classifyStart says what self's start was: "replacement" (other node ids at its address are gone:
// dead and not yet decommissioned), "growth" (it joined a running cluster within postStartRecent, or
// its join is under way), or "restart".
func classifyStart(nodes []*pb.NodeStatus, self uint64, now time.Time) (kind string, gone []uint64) {
	var me *pb.NodeStatus
	for _, n := range nodes {
		if n.GetDesc().GetNodeId() == self {
			me = n
		}
	}
	if me == nil {
		return "restart", nil
	}
	for _, n := range nodes {
		d := n.GetDesc()
		if d.GetNodeId() != self && d.GetAddr() == me.GetDesc().GetAddr() && !n.GetLive() && !n.GetDecommissioned() && n.GetState() != "decommissioning" {
			gone = append(gone, d.GetNodeId())
		}
	}
	if len(gone) > 0 {
		return "replacement", gone
	}
	if j := me.GetJoin(); j != nil && (j.GetDoneUnixNanos() == 0 || now.Sub(time.Unix(0, j.GetStartedUnixNanos())) < postStartRecent) {
		return "growth", nil
	}
	return "restart", nil
}
