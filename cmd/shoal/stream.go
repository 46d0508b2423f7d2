package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"github.com/shoaldb/shoal/client"
	"github.com/shoaldb/shoal/cmd/shoal/internal/cli"
	"github.com/shoaldb/shoal/pb"
	"github.com/shoaldb/shoal/stream"
)

var streamCmd = &cobra.Command{
	Use:   "stream",
	Short: "Stream jobs next to the data: list the jobs, send events, see each node's tasks",
	Long: `A stream job (package stream: registered by name in the binary) keys each event into a span of
state kept in the cluster; its task for a range runs on the node leading that range, so the
handler's state reads and writes are served by that node. Events carry a position per key, stored
with the state: a replayed event is not applied twice.

  jobs                  the jobs this binary knows, and which each node knows
  ingest JOB            send stdin's lines as JOB's events (one payload a line); print each ack
  status                each node's tasks and counters: events applied, state accesses local/remote`,
	Args: cobra.ArbitraryArgs,
	RunE: cli.GroupRunE,
}

var streamIngestFlags struct {
	mode  string
	batch int
	quiet bool
}

func init() {
	jobs := &cobra.Command{Use: "jobs", Short: "List the stream jobs of this binary and of each node", Args: cli.Args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error { return withSession(cmd, streamJobs) }}
	status := &cobra.Command{Use: "status", Short: "Each node's stream tasks and counters", Args: cli.Args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error { return withSession(cmd, streamStatus) }}
	ingest := &cobra.Command{Use: "ingest JOB", Short: "Send stdin's lines as JOB's events and print their acknowledgements",
		Example: "  printf 'a\\nb\\na\\n' | shoal stream ingest count", Args: cli.Args(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			return withSession(cmd, func(s *session) error { return streamIngest(s, args[0], os.Stdin, cmd.OutOrStdout()) })
		}}
	ingest.Flags().StringVar(&streamIngestFlags.mode, "mode", "aligned", "aligned (to the range's leader), unaligned (by a hash of the key) or placed (to the leader first seen, never updated)")
	ingest.Flags().IntVar(&streamIngestFlags.batch, "batch", 256, "events per send")
	ingest.Flags().BoolVar(&streamIngestFlags.quiet, "quiet", false, "print only the totals")
	streamCmd.AddCommand(jobs, status, ingest)
	rootCmd.AddCommand(streamCmd)
}

// streamDial is the dial options of the nodes' Streams service, as the root's flags say.
func streamDial() ([]grpc.DialOption, error) {
	if cli.Global.CertsDir == "" {
		return nil, nil
	}
	tlsCfg, err := client.LoadTLS(cli.Global.CertsDir)
	if err != nil {
		return nil, fmt.Errorf("--certs-dir: %w", err)
	}
	return []grpc.DialOption{grpc.WithTransportCredentials(credentials.NewTLS(tlsCfg))}, nil
}

// nodeStatuses asks every node for its Streams status, dialed as the root's flags say.
func nodeStatuses(s *session) ([]*pb.StreamStatusResponse, error) {
	opts, err := streamDial()
	if err != nil {
		return nil, err
	}
	return stream.NodeStatus(s.ctx, s.c, opts, cli.Global.AuthToken)
}

func streamJobs(s *session) error {
	sts, err := nodeStatuses(s)
	if err != nil {
		return err
	}
	if cli.JSON() {
		type nodeJobs struct {
			Node uint64   `json:"node"`
			Jobs []string `json:"jobs"`
		}
		out := struct {
			Local []string   `json:"local"`
			Nodes []nodeJobs `json:"nodes"`
		}{Local: stream.Names()}
		for _, st := range sts {
			out.Nodes = append(out.Nodes, nodeJobs{Node: st.NodeId, Jobs: st.Jobs})
		}
		return cli.PrintIndented(out)
	}
	fmt.Printf("this binary: %s\n", strings.Join(stream.Names(), ", "))
	for _, st := range sts {
		fmt.Printf("node %d: %s\n", st.NodeId, strings.Join(st.Jobs, ", "))
	}
	return nil
}

func streamStatus(s *session) error {
	sts, err := nodeStatuses(s)
	if err != nil {
		return err
	}
	if cli.JSON() {
		return cli.PrintIndented(sts)
	}
	w := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "NODE\tAPPLIED\tDUPLICATE\tRETRY\tFAILED\tLOCAL\tREMOTE\tLOCAL%\tTASKS")
	for _, st := range sts {
		local, remote := st.LocalReads+st.LocalWrites, st.RemoteReads+st.RemoteWrites
		share := "-"
		if local+remote > 0 {
			share = fmt.Sprintf("%.1f", 100*float64(local)/float64(local+remote))
		}
		var tasks []string
		for _, t := range st.Tasks {
			where := fmt.Sprintf("r%d", t.RangeId)
			if t.RangeId == 0 {
				where = "unaligned"
			}
			tasks = append(tasks, fmt.Sprintf("%s@%s:%d", t.Job, where, t.Events))
		}
		fmt.Fprintf(w, "%d\t%d\t%d\t%d\t%d\t%d\t%d\t%s\t%s\n", st.NodeId, st.Applied, st.Duplicates, st.Retries, st.Failed,
			local, remote, share, strings.Join(tasks, " "))
	}
	return w.Flush()
}

func streamIngest(s *session, job string, r io.Reader, w io.Writer) error {
	mode, err := stream.ParseMode(streamIngestFlags.mode)
	if err != nil {
		return cli.Usage(err)
	}
	if streamIngestFlags.batch <= 0 {
		return cli.Usage(fmt.Errorf("--batch %d: want at least 1", streamIngestFlags.batch))
	}
	opts, err := streamDial()
	if err != nil {
		return err
	}
	in, err := stream.NewIngester(stream.IngesterConfig{Client: s.c, DialOptions: opts, AuthToken: cli.Global.AuthToken,
		Mode: mode, Resume: true}, job)
	if err != nil {
		return cli.Usage(err)
	}
	defer in.Close()
	counts := map[pb.IngestResult_Status]int{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	var batch [][]byte
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		acks, err := in.Send(s.ctx, batch)
		batch = nil
		if err != nil {
			return err
		}
		for _, a := range acks {
			counts[a.Status]++
			if !streamIngestFlags.quiet {
				fmt.Fprintf(w, "%s\t%d\t%s\t%s%s\n", a.Key, a.Position, a.Status, a.Output, a.Err)
			}
		}
		return nil
	}
	for sc.Scan() {
		if line := sc.Text(); line != "" {
			batch = append(batch, []byte(line))
		}
		if len(batch) >= streamIngestFlags.batch {
			if err := flush(); err != nil {
				return err
			}
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("read stdin: %w", err)
	}
	if err := flush(); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "%d applied, %d duplicate, %d failed\n", counts[pb.IngestResult_APPLIED], counts[pb.IngestResult_DUPLICATE], counts[pb.IngestResult_FAILED])
	if counts[pb.IngestResult_FAILED] > 0 {
		return exitCode(1)
	}
	return nil
}
