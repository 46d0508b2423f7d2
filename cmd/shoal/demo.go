package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/shoaldb/shoal/cmd/shoal/internal/cli"
	"github.com/shoaldb/shoal/cmd/shoal/internal/demo"
)

// demoFlags are the flags of `shoal demo`.
var demoFlags struct {
	nodes    int
	dataDir  string
	noSample bool
}

var demoCmd = &cobra.Command{
	Use:   "demo [--nodes N] [--data-dir DIR]",
	Short: "Run a local cluster of N nodes on loopback, with sample data",
	Long: `Run a local Shoal cluster of N nodes as child processes on 127.0.0.1, load a small sample
data set (1000 keys: user/0000... and city/...), print each node's id and addresses and stay in
the foreground. Ctrl-C, SIGTERM or SIGHUP (the terminal closing) stops every node (SIGTERM, then
SIGKILL after 10 s) and exits 0; on Linux the nodes also stop if the demo is killed outright.

The printed ids are the cluster's node ids, the ones "admin drain NODE" and the other admin
commands take. The i-th node keeps its store in DIR/n<i> and writes its output to DIR/n<i>/shoal.log. The chosen ports
are recorded in DIR/demo.json: running the demo again with the same DIR restarts the same cluster,
with its data, on the same ports (node addresses are part of the cluster's state). Remove DIR to
start over.`,
	Example: `  shoal demo
  shoal demo --nodes 5 --data-dir /tmp/shoal-demo
  shoal demo --no-sample

  # then, in another terminal:
  shoal get user/0001
  shoal admin ranges`,
	Args: cli.Args(cobra.NoArgs),
	RunE: runDemo,
}

func init() {
	f := demoCmd.Flags()
	f.IntVar(&demoFlags.nodes, "nodes", 3, fmt.Sprintf("number of nodes (1..%d)", demo.MaxNodes))
	f.StringVar(&demoFlags.dataDir, "data-dir", "./shoal-data", "directory of the nodes' stores, logs and demo.json")
	f.BoolVar(&demoFlags.noSample, "no-sample", false, "do not load the sample data set")
	clientFlagsHidden(demoCmd)
	rootCmd.AddCommand(demoCmd)
}

func runDemo(cmd *cobra.Command, _ []string) error {
	if n := demoFlags.nodes; n < 1 || n > demo.MaxNodes {
		return cli.Usage(fmt.Errorf("invalid --nodes %d: use 1..%d", n, demo.MaxNodes))
	}
	if demoFlags.dataDir == "" {
		return cli.Usage(fmt.Errorf("--data-dir is empty"))
	}
	parent := cmd.Context()
	if parent == nil {
		parent = context.Background()
	}
	ctx, stop := signal.NotifyContext(parent, os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	defer stop()
	return demo.Run(ctx, demo.Options{Nodes: demoFlags.nodes, DataDir: demoFlags.dataDir, Sample: !demoFlags.noSample,
		Stdout: cmd.OutOrStdout(), Stderr: cmd.ErrOrStderr()})
}
