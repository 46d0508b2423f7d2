package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/shoaldb/shoal/client"
	"github.com/shoaldb/shoal/cmd/shoal/internal/cli"
	"github.com/shoaldb/shoal/pb"
)

var initCmd = &cobra.Command{
	Use:   "init",
	Short: "Create the cluster on one node of a cluster whose nodes all started with --join",
	Long: `Create a new cluster whose nodes were all started with --join and none with --bootstrap (as
CockroachDB's init). Such nodes wait; init makes the node at --host bootstrap the cluster, and the
others then join through it. So every node can start with the same flags — the pods of one
Kubernetes StatefulSet, say, each with --join listing the first pods — and a node that comes back
with an empty store joins the cluster again instead of creating a second one.

Run init once, against any one waiting node (--host takes one address). If the cluster exists
already — that node, or a node of its --join list, belongs to one — init says so and exits 1.
A cluster whose first node was started with --bootstrap needs no init.`,
	Example: `  shoal start --data-dir d1 --listen 10.0.0.1:26257 --join 10.0.0.1:26257,10.0.0.2:26257,10.0.0.3:26257
  # (the same on 10.0.0.2 and 10.0.0.3), then once:
  shoal init --host 10.0.0.1:26257
  kubectl exec shoal-0 -- /shoal init --host shoal-0.shoal:26257`,
	Args: cli.Args(cobra.NoArgs),
	RunE: runInit,
}

func init() {
	rootCmd.AddCommand(initCmd)
}

// initRetryInterval is how often init asks again a node that is still starting.
const initRetryInterval = 250 * time.Millisecond

func runInit(cmd *cobra.Command, _ []string) error {
	ctx, c, done, err := oneNode(cmd, "init", cli.Global.Timeout)
	if err != nil {
		return err
	}
	defer done()
	addr := strings.TrimSpace(cli.Global.Host)
	for {
		resp, err := c.Init(ctx, &pb.InitRequest{})
		if err != nil {
			return initTransportError(addr, err)
		}
		pe := resp.GetError()
		switch {
		case pe == nil:
			if cli.JSON() {
				return cli.WriteJSON(cmd.OutOrStdout(), map[string]any{"cluster_id": resp.ClusterId, "node_id": resp.NodeId, "addr": addr})
			}
			_, err := fmt.Fprintf(cmd.OutOrStdout(), "Cluster %s initialized: %s is node %d; the nodes started with --join now join through it.\n",
				resp.ClusterId, addr, resp.NodeId)
			return err
		case pe.Code == pb.ErrorCode_UNAVAILABLE && !resp.AlreadyInitialized:
			// The node serves gRPC but has not reached its join loop yet: a moment more.
			select {
			case <-ctx.Done():
				return &client.Error{Code: pb.ErrorCode_UNAVAILABLE, Message: fmt.Sprintf("node %s: %s", addr, pe.Message)}
			case <-time.After(initRetryInterval):
			}
		case resp.AlreadyInitialized:
			return errors.New(pe.Message) // "cluster is already initialized: <where>"
		default:
			return &client.Error{Code: pe.Code, Message: pe.Message}
		}
	}
}

// oneNode checks --host names one node (what names the command in the error), dials it and returns a
// context bounded by d that carries the auth token.
func oneNode(cmd *cobra.Command, what string, d time.Duration) (context.Context, pb.ShoalClient, func(), error) {
	if err := cli.ValidateGlobal(cmd, nil); err != nil {
		return nil, nil, nil, err
	}
	addr := strings.TrimSpace(cli.Global.Host)
	if addr == "" || strings.Contains(addr, ",") {
		return nil, nil, nil, cli.Usage(fmt.Errorf("%s talks to one node: give one --host address (got %q)", what, cli.Global.Host))
	}
	parent := cmd.Context()
	if parent == nil {
		parent = context.Background()
	}
	c, closeConn, err := dialNode(addr)
	if err != nil {
		return nil, nil, nil, err
	}
	ctx, cancel := context.WithTimeout(parent, d)
	if cli.Global.AuthToken != "" {
		ctx = metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+cli.Global.AuthToken)
	}
	return ctx, c, func() { closeConn(); cancel() }, nil
}

// readTokenFile reads an auth token from path (--auth-token-file); an empty file is a usage error.
func readTokenFile(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", cli.Usage(fmt.Errorf("read --auth-token-file: %w", err))
	}
	tok := strings.TrimSpace(string(b))
	if tok == "" {
		return "", cli.Usage(fmt.Errorf("--auth-token-file %s is empty", path))
	}
	return tok, nil
}

// dialNode connects to one node with the client flags (TLS, not the token: the caller adds it).
func dialNode(addr string) (pb.ShoalClient, func(), error) {
	creds := insecure.NewCredentials()
	if cli.Global.CertsDir != "" {
		t, err := client.LoadTLS(cli.Global.CertsDir)
		if err != nil {
			return nil, nil, fmt.Errorf("--certs-dir: %w", err)
		}
		creds = credentials.NewTLS(t)
	}
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(creds))
	if err != nil {
		return nil, nil, cli.Usage(fmt.Errorf("invalid --host %q: %w", addr, err))
	}
	return pb.NewShoalClient(cc), func() { cc.Close() }, nil
}

// initTransportError turns a failed Init call into the client's typed errors (exit 1 with a hint).
func initTransportError(addr string, err error) error {
	st, _ := status.FromError(err)
	switch {
	case errors.Is(err, context.DeadlineExceeded) || st.Code() == codes.DeadlineExceeded:
		return &client.Error{Code: pb.ErrorCode_TIMEOUT, Message: fmt.Sprintf("no answer from %s within --timeout: it may still create the cluster; run init again to see", addr)}
	case st.Code() == codes.Unauthenticated:
		return &client.Error{Code: pb.ErrorCode_UNAUTHENTICATED, Message: st.Message()}
	case st.Code() == codes.Unimplemented:
		return fmt.Errorf("%s does not know init: is it a Shoal node of this version (and its gRPC address, not HTTP or RESP)? %s", addr, st.Message())
	default:
		return &client.Error{Code: pb.ErrorCode_UNAVAILABLE, Message: fmt.Sprintf("node %s: %s", addr, st.Message())}
	}
}
