package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/shoaldb/shoal/cmd/shoal/internal/cli"
	"github.com/shoaldb/shoal/hints"
	"github.com/shoaldb/shoal/plan/usage"
	"github.com/shoaldb/shoal/server"
	"github.com/shoaldb/shoal/storage"
)

// startCfg is the configuration `shoal start` runs with: its flags write straight into it, and it starts
// from the defaults of every layer, so that --help shows them.
var startCfg = server.Config{}.WithDefaults()

// startFlags are the flags of `shoal start` that are not a configuration field.
var startFlags struct {
	authTokenFile string
	printConfig   bool
	usageModel    string
}

var startCmd = &cobra.Command{
	Use:   "start --data-dir DIR [flags]",
	Short: "Run a Shoal node in the foreground",
	Long: `Run one Shoal node in the foreground until SIGINT (Ctrl-C) or SIGTERM, then stop it cleanly.

The first node of a new cluster is started with --bootstrap; every other new node with
--join listing one or more addresses of existing nodes. A node whose data directory already holds a
store restarts with its identity: --bootstrap and --join are then ignored, and without either of
them a missing store is an error (a node never silently starts empty).

The node serves the gRPC API on --listen and HTTP on --http: /healthz, /metrics (Prometheus),
/api/nodes, /api/ranges and a dashboard at /. With --resp it also speaks the Redis Cluster protocol
(a subset: strings, hashes, SCAN, CLUSTER SLOTS/SHARDS/NODES; see docs/design/resp.md), so redis-cli
-c, go-redis and redis-benchmark work against any node. Once it serves, it prints one line:

  shoal node <id> ready grpc=<addr> http=<addr>

With --auth-token (or --auth-token-file, which keeps the token out of the process list) every gRPC
call and every HTTP /api/ and /debug/ request must carry "authorization: Bearer <token>", and RESP
clients must send AUTH <token>;
/healthz, /metrics and the dashboard page stay open. Give every node of a cluster the same token.

With --certs-dir DIR (ca.crt, node.crt, node.key; create them with "shoal cert") the node uses TLS:
gRPC (clients and other nodes, one port) requires a client certificate signed by the CA (mutual
TLS), and the node presents node.crt to the nodes it dials and verifies theirs against ca.crt; HTTP
is served as HTTPS and RESP over TLS (redis-cli --tls), both with client certificates optional (the
token still guards them). Client commands then need --certs-dir with client.crt and client.key.
Without --certs-dir everything is clear text.

Sizes take units: plain bytes, or B, KiB, MiB, GiB, TiB (also K, M, G, T) in powers of 1024,
and kB, MB, GB, TB in powers of 1000, e.g. 64MiB, 1.5GiB.`,
	Example: `  # First node of a new cluster:
  shoal start --data-dir /var/lib/shoal/n1 --listen 10.0.0.1:26257 --http 10.0.0.1:8080 --bootstrap

  # Two more nodes joining it:
  shoal start --data-dir /var/lib/shoal/n2 --listen 10.0.0.2:26257 --http 10.0.0.2:8080 --join 10.0.0.1:26257
  shoal start --data-dir /var/lib/shoal/n3 --listen 10.0.0.3:26257 --http 10.0.0.3:8080 --join 10.0.0.1:26257,10.0.0.2:26257

  # Restart a node (its store remembers the cluster):
  shoal start --data-dir /var/lib/shoal/n2 --listen 10.0.0.2:26257 --http 10.0.0.2:8080

  # Require a token and show the effective configuration:
  shoal start --data-dir d --bootstrap --auth-token-file /etc/shoal/token --cache-size 1GiB --print-config

  # Mutual TLS (see "shoal cert --help"):
  shoal start --data-dir /var/lib/shoal/n1 --listen 10.0.0.1:26257 --bootstrap --certs-dir /etc/shoal/certs`,
	Args: cli.Args(cobra.NoArgs),
	RunE: runStart,
}

func init() {
	sc := &startCfg
	c := &sc.Node
	h := &c.Hints
	f := startCmd.Flags()
	f.SortFlags = false
	f.StringVar(&c.DataDir, "data-dir", "", "directory of the node's store (required)")
	f.StringVar(&sc.Listen, "listen", sc.Listen, "gRPC listen address (port 0 picks a free port)")
	f.StringVar(&sc.Advertise, "advertise", "", "gRPC address other nodes and clients dial (default: the listen address)")
	f.StringVar(&sc.HTTP, "http", sc.HTTP, `HTTP listen address, or "off"`)
	f.StringVar(&sc.RESP, "resp", "", "RESP (Redis Cluster protocol) listen address; empty: off")
	f.Var((*addrList)(&c.Join), "join", "gRPC addresses of existing nodes to join through (comma-separated or repeated)")
	f.BoolVar(&c.Bootstrap, "bootstrap", false, "create a new cluster (first node only)")
	f.StringVar(&c.Locality, "locality", "", "where this node runs, e.g. region=eu,zone=eu-1a (tiers from the most general): each range's replicas are spread over the last tier's values")
	// Shadows the root's client --auth-token with the server meaning of the same flag.
	f.StringVar(&c.AuthToken, "auth-token", "", "require this token on gRPC and HTTP admin requests")
	f.StringVar(&startFlags.authTokenFile, "auth-token-file", "", "read the required token from this file")
	// Shadows the root's client --certs-dir with the server meaning of the same flag.
	f.StringVar(&sc.CertsDir, "certs-dir", "", "TLS: ca.crt, node.crt, node.key; mutual TLS on gRPC, HTTPS, RESP over TLS (empty: clear text)")
	f.Var(sizeOf(&c.Storage.CacheBytes), "cache-size", "block cache size, the memtables included: Pebble charges the one filling and the one flushing"+
		" or kept for reuse to it, so with the default 32MiB memtables a 128MiB cache holds 64MiB of blocks;"+
		" a --profile sizes it as its shares of --memory-budget for blocks and memtables together")
	f.StringVar(&c.Storage.Profile, "profile", "", "engine preset for the node's workload: "+strings.Join(storage.Profiles(), ", ")+
		" (read: 55% of --memory-budget to the block cache, 10% to memtables, 32KiB blocks; write: 10%, 55%, 64KiB; readwrite: 45%, 20%, 32KiB; scan: 55%, 10%, 128KiB); --cache-size wins over it")
	f.Var(sizeOf(&c.Storage.MemoryBytes), "memory-budget", "the engine's memory a --profile divides between block cache and memtables (default 256MiB)")
	f.Var(sizeOf(&c.KV.MaxKeyBytes), "max-key-bytes", "largest key accepted")
	f.Var(sizeOf(&c.KV.MaxValueBytes), "max-value-bytes", "largest value accepted")
	f.Var(sizeOf(&c.KV.RangeMaxBytes), "range-max-bytes", "range size that triggers a split")
	f.Var(onOff{&c.KV.ChangeStreams.Off, true}, "change-streams", "keep each replica's recent changes for watches (shoal watch, RangeFeed) (on|off; off: watches of this node's ranges fail over to other replicas or fail)")
	f.Var(sizeOf(&c.KV.ChangeStreams.RangeBufferBytes), "change-stream-buffer", "recent changes each replica keeps for watches that resume (a watch further behind must re-read)")
	f.Var(sizeOf(&c.Transport.SnapshotRateBytesPerSec), "snapshot-rate", "bytes per second this node sends in snapshots (replica moves, catch-up), e.g. 32MiB")
	f.Var(sizeOf(&c.Transport.SnapshotRecvRateBytesPerSec), "snapshot-recv-rate", "bytes per second this node receives in snapshots from all senders together, e.g. 32MiB (0: unlimited)")
	f.DurationVar(&c.Raft.TickInterval, "tick-interval", c.Raft.TickInterval, "raft tick")
	f.DurationVar(&c.DeadNodeTimeout, "dead-node-timeout", c.DeadNodeTimeout, "a node silent this long is considered dead")
	f.Var(sizeOf(&c.Background.HeavyCompactionBytes), "heavy-compaction-bytes", "an automatic compaction with at least this much input counts as heavy (its node sheds its leaderships)")
	f.DurationVar(&c.Background.MaxPostpone, "max-postpone", c.Background.MaxPostpone, "longest a heavy background task waits for this node's leaderships to move before it runs anyway")
	pc := &c.Autopilot.Policies
	f.StringVar(&startFlags.usageModel, "usage-model", "", "the resource-usage model file that shoal bench usage-train wrote (usage_balance and the predicted usage in admin nodes); empty: the built-in default")
	f.StringVar(&pc.Shed.Ranking, "shed-ranking", pc.Shed.Ranking, "who takes over a busy node's leaderships: mrc (most recently completed task), lsp (longest served), preferred (and give them back after)")
	f.StringVar(&pc.Join.Strategy, "join-strategy", pc.Join.Strategy, "how a new node receives its share: incremental (one range at a time, serving each at once) or parallel (all at once, serving at the end); also how decommission empties a node")
	f.StringVar(&pc.Join.Sender, "join-sender", pc.Join.Sender, "incremental joins: next sender round-robin or least-loaded")
	f.StringVar(&pc.Join.Order, "join-order", pc.Join.Order, "incremental joins: ranges hottest first, or in key order")
	f.StringVar((*string)(&c.Jobs.Strategy), "jobs-strategy", "demand-reads", "how scan jobs meet the disks when this node runs them: demand-reads (each run reads its span when due), demand-caching (a run keeps a copy for later runs of the same data, evicted largest first) or planner (spans read ahead at a planned rate, jobs that no longer fit refused)")
	f.Var(sizeOf(&c.Jobs.DiskBytesPerSec), "jobs-disk-rate", "a node's disk read bandwidth the scan jobs' plan shares out (default 200MiB)")
	f.Var(sizeOf(&c.Jobs.CacheBytes), "jobs-cache-size", "per node, the copies of spans the scan jobs' plan may hold (default 64MiB)")
	f.DurationVar(&c.Background.CompactInterval, "compact-interval", 0, "run a full compaction about this often, jittered per node (0: never)")
	f.DurationVar(&c.Background.BackupInterval, "backup-interval", 0, "write a backup into --backup-dir about this often, jittered per node (0: never)")
	f.StringVar(&c.Background.BackupDir, "backup-dir", "", "absolute directory for periodic backups (one subdirectory per backup)")
	f.Var(onOff{&c.Background.Backup.NoJournal, true}, "backup-journal", "journal written keys once the node has backed up, so an incremental reads only what changed since the node's newest backup (on|off; off deletes the journal at the next backup and every incremental reads every key)")
	f.Var(onOff{&h.Off, true}, "read-hints", "read hints: the leader of a range ships the reads it serves to the other replicas, which replay them to keep their caches warm for a leadership change (on|off; the cluster-wide switch is the read_hints policy)")
	f.Var((*hintsTarget)(&h.Target), "read-hints-target", "read hints go to every other replica (all), to the first voter only (one), or to one replica in each other region (region-one, by --locality's region tier)")
	f.Float64Var(&h.Fraction, "read-hints-fraction", h.Fraction, "fraction of received read hints this node replays, in (0, 1]")
	f.Var(onOff{&h.FixedFraction, true}, "read-hints-adaptive", "lower the replayed fraction as the load rises from 70 % (to 10 % at 90 %, where replaying stops); the load is the CPU's, or on a node leading ranges its disk's utilization × --read-hints-disk-weight when higher (on|off)")
	f.Float64Var(&h.DiskWeight, "read-hints-disk-weight", h.DiskWeight, "what a saturated disk counts for in the load replays adapt to, on a node leading ranges: 0.85 cuts replays to about a third and never stops them; in (0, 1], or negative to ignore the disk")
	f.DurationVar(&h.SwitchInterval, "read-hints-switch-interval", h.SwitchInterval, "how often this node reads the cluster-wide read_hints switch (admin policy set read_hints on|off): a switch takes effect here within that long; each read is one read of the meta range")
	f.DurationVar(&h.Tuning.Shipper.FlushInterval, "read-hints-interval", h.Tuning.Shipper.FlushInterval, "how often a leader ships the reads it recorded to the other replicas (the journal's 90 ms; a batch also ships early at 10 000 reads); longer means fewer, larger messages")
	f.Float64Var(&h.DiskReadShare, "read-hints-disk-read-share", h.DiskReadShare, "on a node leading ranges whose disk is saturated, the most of its disk reads (block-cache misses) that replays may cause; the applied fraction is scaled down to keep to it (with --read-hints-adaptive on; in (0, 1], or negative for no budget)")
	ac := &c.Admission
	f.Var(onOff{&ac.Disabled, true}, "admission", "admission control: beyond the in-flight limits below, clients get OVERLOADED (retryable) at once instead of the node queueing without bound (on|off; off only for comparisons)")
	f.Int64Var(&ac.Requests.Count, "max-inflight-requests", ac.Requests.Count, "client requests this node serves at once")
	f.Var(sizeOf(&ac.Requests.Bytes), "max-inflight-request-bytes", "bytes of client requests (and scan results) this node holds at once")
	f.Int64Var(&ac.Proposals.Count, "max-inflight-writes", ac.Proposals.Count, "client writes this node's leaders hold in raft at once (proposed, not yet applied)")
	f.Var(sizeOf(&ac.Proposals.Bytes), "max-inflight-write-bytes", "bytes of client writes this node's leaders hold in raft at once")
	f.BoolVar(&startFlags.printConfig, "print-config", false, "print the effective configuration as JSON (token redacted) and exit")
	clientFlagsHidden(startCmd)
	rootCmd.AddCommand(startCmd)
}

// startConfig checks what the flags gave and returns the configuration, defaults applied and validated.
func startConfig(flags *pflag.FlagSet) (server.Config, error) {
	cfg := startCfg
	if cfg.Node.AuthToken != "" && startFlags.authTokenFile != "" {
		return cfg, cli.Usage(errors.New("give --auth-token or --auth-token-file, not both"))
	}
	if startFlags.authTokenFile != "" {
		tok, err := readTokenFile(startFlags.authTokenFile)
		if err != nil {
			return cfg, err
		}
		cfg.Node.AuthToken = tok
	}
	if cfg.HTTP == "" {
		return cfg, cli.Usage(fmt.Errorf(`--http is empty: give an address, or "off" to disable HTTP`))
	}
	if path := startFlags.usageModel; path != "" {
		if _, err := os.Stat(path); err != nil {
			return cfg, cli.Usage(fmt.Errorf("--usage-model: %w", err))
		}
		m, err := usage.LoadModel(path)
		if err != nil {
			return cfg, cli.Usage(fmt.Errorf("--usage-model: %w", err))
		}
		cfg.Node.Autopilot.Policies.UsageBalance.Model = m
	}
	// A profile sizes the cache and memtables that were not given: the defaults filled in before the
	// flags were parsed make way for it.
	if st := &cfg.Node.Storage; st.Profile != "" && st.Profile != storage.ProfileDefault {
		if err := st.Validate(); err != nil {
			return cfg, cli.Usage(fmt.Errorf("--profile: %w", err))
		}
		if f := flags.Lookup("cache-size"); f == nil || !f.Changed {
			st.CacheBytes = 0
		}
		st.MemTableBytes = 0
		*st = st.WithDefaults()
	}
	if cfg.Listen == "" {
		return cfg, cli.Usage(errors.New("--listen is empty"))
	}
	// Zero means "the default" in the configuration; given on the command line it is a mistake.
	h := cfg.Node.Hints
	for _, c := range []struct {
		flag string
		bad  bool
		want string
	}{
		{"read-hints-fraction", !(h.Fraction > 0 && h.Fraction <= 1), "must be in (0, 1]"},
		{"read-hints-disk-weight", h.DiskWeight == 0 || h.DiskWeight > 1, "must be in (0, 1], or negative to ignore the disk"},
		{"read-hints-disk-read-share", h.DiskReadShare == 0 || h.DiskReadShare > 1, "must be in (0, 1], or negative for no budget"},
		{"read-hints-interval", h.Tuning.Shipper.FlushInterval <= 0 || h.Tuning.Shipper.FlushInterval > time.Minute, "must be in (0, 1m]"},
		{"read-hints-switch-interval", h.SwitchInterval < 10*time.Millisecond || h.SwitchInterval > time.Hour, "must be in [10ms, 1h]"},
		{"max-inflight-requests", cfg.Node.Admission.Requests.Count <= 0, "must be positive (turn admission control off with --admission off)"},
		{"max-inflight-request-bytes", cfg.Node.Admission.Requests.Bytes <= 0, "must be positive (turn admission control off with --admission off)"},
		{"max-inflight-writes", cfg.Node.Admission.Proposals.Count <= 0, "must be positive (turn admission control off with --admission off)"},
		{"max-inflight-write-bytes", cfg.Node.Admission.Proposals.Bytes <= 0, "must be positive (turn admission control off with --admission off)"},
	} {
		if f := flags.Lookup(c.flag); f != nil && f.Changed && c.bad {
			return cfg, cli.Usage(fmt.Errorf("--%s %s: %s", c.flag, f.Value, c.want))
		}
	}
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return cfg, cli.Usage(err)
	}
	return cfg, nil
}

func runStart(cmd *cobra.Command, _ []string) error {
	cfg, err := startConfig(cmd.Flags())
	if err != nil {
		return err
	}
	if startFlags.printConfig {
		b, err := json.MarshalIndent(cfg, "", "  ")
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(cmd.OutOrStdout(), "%s\n", b)
		return err
	}
	if st := cfg.Node.Storage.WithDefaults(); st.BlockRoomBytes() < st.CacheBytes/4 {
		fmt.Fprintf(cmd.ErrOrStderr(), "warning: --cache-size %s leaves %s for blocks beside two memtables of %s (Pebble charges them to the cache); raise --cache-size\n",
			formatSize(st.CacheBytes), formatSize(st.BlockRoomBytes()), formatSize(int64(st.MemTableBytes)))
	}
	parent := cmd.Context()
	if parent == nil {
		parent = context.Background()
	}
	ctx, stop := signal.NotifyContext(parent, os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() {
		<-ctx.Done()
		stop() // a second Ctrl-C during shutdown kills the process at once
	}()
	return server.Run(ctx, cfg, cmd.OutOrStdout())
}

// onOff is an on|off flag over a bool; with negate the bool means "off" (Hints.Off, Admission.Disabled).
type onOff struct {
	p      *bool
	negate bool
}

func (o onOff) String() string {
	switch {
	case o.p == nil:
		return "" // the zero value, which help output compares the default with
	case *o.p == o.negate:
		return "off"
	}
	return "on"
}

func (o onOff) Set(s string) error {
	switch s {
	case "on":
		*o.p = o.negate == false
	case "off":
		*o.p = o.negate
	default:
		return fmt.Errorf("%q: use on or off", s)
	}
	return nil
}

func (o onOff) Type() string { return "on|off" }

// hintsTarget is the --read-hints-target flag.
type hintsTarget hints.Target

func (t *hintsTarget) String() string { return hints.Target(*t).String() }

func (t *hintsTarget) Set(s string) error {
	switch s {
	case "all":
		*t = hintsTarget(hints.TargetAll)
	case "one":
		*t = hintsTarget(hints.TargetOne)
	case "region-one":
		*t = hintsTarget(hints.TargetRegionOne)
	default:
		return fmt.Errorf("%q: use all, one or region-one", s)
	}
	return nil
}

func (t *hintsTarget) Type() string { return "all|one|region-one" }

// addrList is a flag of addresses, given comma-separated or by repeating the flag. Setting it to ""
// clears it (so its default, "", restores it).
type addrList []string

// String joins the addresses with commas.
func (l *addrList) String() string { return strings.Join(*l, ",") }

// Set appends the comma-separated addresses of s, or clears the list when s is empty.
func (l *addrList) Set(s string) error {
	if strings.TrimSpace(s) == "" {
		*l = nil
		return nil
	}
	for _, a := range strings.Split(s, ",") {
		if a = strings.TrimSpace(a); a != "" {
			*l = append(*l, a)
		}
	}
	return nil
}

// Type names the flag's value in help output.
func (l *addrList) Type() string { return "addrs" }

// sizeFlag is a size flag over any integer field: it accepts human units (see parseSize) and prints
// itself with them.
type sizeFlag[T int | int64 | uint64] struct{ p *T }

func sizeOf[T int | int64 | uint64](p *T) sizeFlag[T] { return sizeFlag[T]{p} }

// String prints the size with the largest binary unit that divides it exactly.
func (b sizeFlag[T]) String() string {
	if b.p == nil {
		return "0"
	}
	return formatSize(int64(*b.p))
}

// Set parses a size with parseSize.
func (b sizeFlag[T]) Set(s string) error {
	n, err := parseSize(s)
	if err != nil {
		return err
	}
	if T(n) < 0 || int64(T(n)) != n {
		return fmt.Errorf("invalid size %q: too large", s)
	}
	*b.p = T(n)
	return nil
}

// Type names the flag's value in help output.
func (b sizeFlag[T]) Type() string { return "size" }

// sizeUnits are the multipliers parseSize accepts, by lower-case unit.
var sizeUnits = map[string]float64{
	"": 1, "b": 1,
	"k": 1 << 10, "ki": 1 << 10, "kib": 1 << 10,
	"m": 1 << 20, "mi": 1 << 20, "mib": 1 << 20,
	"g": 1 << 30, "gi": 1 << 30, "gib": 1 << 30,
	"t": 1 << 40, "ti": 1 << 40, "tib": 1 << 40,
	"kb": 1e3, "mb": 1e6, "gb": 1e9, "tb": 1e12,
}

// parseSize parses a byte size: a non-negative number (decimals allowed) optionally followed by a unit,
// case-insensitive, with optional space: B; K, Ki, KiB, M, Mi, MiB, G, Gi, GiB, T, Ti, TiB (powers of
// 1024); kB, MB, GB, TB (powers of 1000). The result must be a whole number of bytes.
func parseSize(s string) (int64, error) {
	t := strings.TrimSpace(s)
	i := strings.IndexFunc(t, func(r rune) bool { return (r < '0' || r > '9') && r != '.' })
	if i < 0 {
		i = len(t)
	}
	num, unit := t[:i], strings.ToLower(strings.TrimSpace(t[i:]))
	mult, ok := sizeUnits[unit]
	if num == "" || !ok {
		return 0, fmt.Errorf("invalid size %q: use bytes or a number with a unit such as 64MiB, 1GiB, 500MB", s)
	}
	if !strings.Contains(num, ".") {
		n, err := strconv.ParseInt(num, 10, 64)
		if err != nil || (mult > 1 && n > math.MaxInt64/int64(mult)) {
			return 0, fmt.Errorf("invalid size %q: too large", s)
		}
		return n * int64(mult), nil
	}
	f, err := strconv.ParseFloat(num, 64)
	if err != nil {
		return 0, fmt.Errorf("invalid size %q: %q is not a number", s, num)
	}
	v := f * mult
	if v >= math.MaxInt64 {
		return 0, fmt.Errorf("invalid size %q: too large", s)
	}
	if v != math.Trunc(v) {
		return 0, fmt.Errorf("invalid size %q: not a whole number of bytes", s)
	}
	return int64(v), nil
}

// formatSize prints n with the largest binary unit that divides it exactly (64MiB, 1536KiB, 100).
func formatSize(n int64) string {
	for _, u := range []struct {
		name string
		size int64
	}{{"TiB", 1 << 40}, {"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}} {
		if n != 0 && n%u.size == 0 {
			return strconv.FormatInt(n/u.size, 10) + u.name
		}
	}
	return strconv.FormatInt(n, 10)
}
