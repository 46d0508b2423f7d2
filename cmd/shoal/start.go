package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/shoaldb/shoal/admission"
	"math"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/shoaldb/shoal/autopilot/policy"
	"github.com/shoaldb/shoal/hints"
	"github.com/shoaldb/shoal/kv"
	"github.com/shoaldb/shoal/server"
)

// startFlags are the flags of `shoal start`.
var startFlags struct {
	dataDir          string
	listen           string
	advertise        string
	http             string
	resp             string
	join             addrList
	bootstrap        bool
	authToken        string
	authTokenFile    string
	certsDir         string
	cacheSize        byteSize
	maxKeyBytes      byteSize
	maxValueBytes    byteSize
	rangeMaxBytes    byteSize
	snapshotRate     byteSize
	snapshotRecvRate byteSize
	heavyCompaction  byteSize
	maxPostpone      time.Duration
	shedRanking      string
	joinStrategy     string
	joinSender       string
	joinOrder        string
	compactInterval  time.Duration
	backupInterval   time.Duration
	backupDir        string
	tickInterval     time.Duration
	deadNodeTimeout  time.Duration
	readHints        string
	hintsTarget      string
	hintsFraction    float64
	hintsAdaptive    string
	hintsDiskWeight  float64
	hintsDiskShare   float64
	hintsInterval    time.Duration
	hintsSwitch      time.Duration
	admission        string
	maxRequests      int64
	maxRequestBytes  byteSize
	maxWrites        int64
	maxWriteBytes    byteSize
	printConfig      bool
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
	Args: args(cobra.NoArgs),
	RunE: runStart,
}

func init() {
	startFlags.cacheSize = byteSize(server.DefaultCacheBytes)
	startFlags.maxKeyBytes = byteSize(server.DefaultMaxKeyBytes)
	startFlags.maxValueBytes = byteSize(server.DefaultMaxValueBytes)
	startFlags.rangeMaxBytes = byteSize(server.DefaultRangeMaxBytes)
	startFlags.snapshotRate = byteSize(server.DefaultSnapshotRate)
	startFlags.heavyCompaction = byteSize(server.DefaultHeavyCompactionBytes)
	startFlags.maxRequestBytes = byteSize(server.DefaultAdmission.Requests.Bytes)
	startFlags.maxWriteBytes = byteSize(server.DefaultAdmission.Proposals.Bytes)

	f := startCmd.Flags()
	f.SortFlags = false
	f.StringVar(&startFlags.dataDir, "data-dir", "", "directory of the node's store (required)")
	f.StringVar(&startFlags.listen, "listen", server.DefaultListen, "gRPC listen address (port 0 picks a free port)")
	f.StringVar(&startFlags.advertise, "advertise", "", "gRPC address other nodes and clients dial (default: the listen address)")
	f.StringVar(&startFlags.http, "http", server.DefaultHTTP, `HTTP listen address, or "off"`)
	f.StringVar(&startFlags.resp, "resp", "", "RESP (Redis Cluster protocol) listen address; empty: off")
	f.Var(&startFlags.join, "join", "gRPC addresses of existing nodes to join through (comma-separated or repeated)")
	f.BoolVar(&startFlags.bootstrap, "bootstrap", false, "create a new cluster (first node only)")
	// Shadows the root's client --auth-token with the server meaning of the same flag.
	f.StringVar(&startFlags.authToken, "auth-token", "", "require this token on gRPC and HTTP admin requests")
	f.StringVar(&startFlags.authTokenFile, "auth-token-file", "", "read the required token from this file")
	// Shadows the root's client --certs-dir with the server meaning of the same flag.
	f.StringVar(&startFlags.certsDir, "certs-dir", "", "TLS: ca.crt, node.crt, node.key; mutual TLS on gRPC, HTTPS, RESP over TLS (empty: clear text)")
	f.Var(&startFlags.cacheSize, "cache-size", "block cache size")
	f.Var(&startFlags.maxKeyBytes, "max-key-bytes", "largest key accepted")
	f.Var(&startFlags.maxValueBytes, "max-value-bytes", "largest value accepted")
	f.Var(&startFlags.rangeMaxBytes, "range-max-bytes", "range size that triggers a split")
	f.Var(&startFlags.snapshotRate, "snapshot-rate", "bytes per second this node sends in snapshots (replica moves, catch-up), e.g. 32MiB")
	f.Var(&startFlags.snapshotRecvRate, "snapshot-recv-rate", "bytes per second this node receives in snapshots from all senders together, e.g. 32MiB (default unlimited)")
	f.DurationVar(&startFlags.tickInterval, "tick-interval", server.DefaultTickInterval, "raft tick")
	f.DurationVar(&startFlags.deadNodeTimeout, "dead-node-timeout", server.DefaultDeadNodeTimeout, "a node silent this long is considered dead")
	f.Var(&startFlags.heavyCompaction, "heavy-compaction-bytes", "an automatic compaction with at least this much input counts as heavy (its node sheds its leaderships)")
	f.DurationVar(&startFlags.maxPostpone, "max-postpone", server.DefaultMaxPostpone, "longest a heavy background task waits for this node's leaderships to move before it runs anyway")
	f.StringVar(&startFlags.shedRanking, "shed-ranking", "mrc", "who takes over a busy node's leaderships: mrc (most recently completed task), lsp (longest served), preferred (and give them back after)")
	f.StringVar(&startFlags.joinStrategy, "join-strategy", "incremental", "how a new node receives its share: incremental (one range at a time, serving each at once) or parallel (all at once, serving at the end); also how decommission empties a node")
	f.StringVar(&startFlags.joinSender, "join-sender", "round-robin", "incremental joins: next sender round-robin or least-loaded")
	f.StringVar(&startFlags.joinOrder, "join-order", "hottest", "incremental joins: ranges hottest first, or in key order")
	f.DurationVar(&startFlags.compactInterval, "compact-interval", 0, "run a full compaction about this often, jittered per node (0: never)")
	f.DurationVar(&startFlags.backupInterval, "backup-interval", 0, "write a backup into --backup-dir about this often, jittered per node (0: never)")
	f.StringVar(&startFlags.backupDir, "backup-dir", "", "absolute directory for periodic backups (one subdirectory per backup)")
	f.StringVar(&startFlags.readHints, "read-hints", "on", "read hints: the leader of a range ships the reads it serves to the other replicas, which replay them to keep their caches warm for a leadership change (on|off; the cluster-wide switch is the read_hints policy)")
	f.StringVar(&startFlags.hintsTarget, "read-hints-target", "all", "read hints go to every other replica (all) or to the first voter only (one)")
	f.Float64Var(&startFlags.hintsFraction, "read-hints-fraction", 1, "fraction of received read hints this node replays, in (0, 1]")
	f.StringVar(&startFlags.hintsAdaptive, "read-hints-adaptive", "on", "lower the replayed fraction as the load rises from 70 % (to 10 % at 90 %, where replaying stops); the load is the CPU's, or on a node leading ranges its disk's utilization × --read-hints-disk-weight when higher (on|off)")
	f.Float64Var(&startFlags.hintsDiskWeight, "read-hints-disk-weight", kv.DefaultHintsDiskWeight, "what a saturated disk counts for in the load replays adapt to, on a node leading ranges: 0.85 cuts replays to about a third and never stops them; in (0, 1], or negative to ignore the disk")
	f.DurationVar(&startFlags.hintsSwitch, "read-hints-switch-interval", kv.DefaultHintsSwitchInterval, "how often this node reads the cluster-wide read_hints switch (admin policy set read_hints on|off): a switch takes effect here within that long; each read is one read of the meta range")
	f.DurationVar(&startFlags.hintsInterval, "read-hints-interval", 90*time.Millisecond, "how often a leader ships the reads it recorded to the other replicas (the journal's 90 ms; a batch also ships early at 10 000 reads); longer means fewer, larger messages")
	f.Float64Var(&startFlags.hintsDiskShare, "read-hints-disk-read-share", kv.DefaultHintsDiskReadShare, "on a node leading ranges whose disk is saturated, the most of its disk reads (block-cache misses) that replays may cause; the applied fraction is scaled down to keep to it (with --read-hints-adaptive on; in (0, 1], or negative for no budget)")
	f.StringVar(&startFlags.admission, "admission", "on", "admission control: beyond the in-flight limits below, clients get OVERLOADED (retryable) at once instead of the node queueing without bound (on|off; off only for comparisons)")
	f.Int64Var(&startFlags.maxRequests, "max-inflight-requests", server.DefaultAdmission.Requests.Count, "client requests this node serves at once")
	f.Var(&startFlags.maxRequestBytes, "max-inflight-request-bytes", "bytes of client requests (and scan results) this node holds at once")
	f.Int64Var(&startFlags.maxWrites, "max-inflight-writes", server.DefaultAdmission.Proposals.Count, "client writes this node's leaders hold in raft at once (proposed, not yet applied)")
	f.Var(&startFlags.maxWriteBytes, "max-inflight-write-bytes", "bytes of client writes this node's leaders hold in raft at once")
	f.BoolVar(&startFlags.printConfig, "print-config", false, "print the effective configuration as JSON (token redacted) and exit")
	rootCmd.AddCommand(startCmd)
}

// startConfig builds the node's configuration from the flags, defaults applied and validated.
func startConfig() (server.Config, error) {
	token := startFlags.authToken
	if token != "" && startFlags.authTokenFile != "" {
		return server.Config{}, usageError{errors.New("give --auth-token or --auth-token-file, not both")}
	}
	if startFlags.authTokenFile != "" {
		b, err := os.ReadFile(startFlags.authTokenFile)
		if err != nil {
			return server.Config{}, usageError{fmt.Errorf("read --auth-token-file: %w", err)}
		}
		if token = strings.TrimSpace(string(b)); token == "" {
			return server.Config{}, usageError{fmt.Errorf("--auth-token-file %s is empty", startFlags.authTokenFile)}
		}
	}
	cfg := server.Config{
		DataDir:               startFlags.dataDir,
		Listen:                startFlags.listen,
		Advertise:             startFlags.advertise,
		HTTP:                  startFlags.http,
		RESP:                  startFlags.resp,
		Bootstrap:             startFlags.bootstrap,
		Join:                  []string(startFlags.join),
		AuthToken:             token,
		CertsDir:              startFlags.certsDir,
		CacheBytes:            int64(startFlags.cacheSize),
		RangeMaxBytes:         int64(startFlags.rangeMaxBytes),
		SnapshotRate:          int64(startFlags.snapshotRate),
		SnapshotRecvRate:      int64(startFlags.snapshotRecvRate),
		TickInterval:          startFlags.tickInterval,
		DeadNodeTimeout:       startFlags.deadNodeTimeout,
		ShedRanking:           startFlags.shedRanking,
		Joins:                 policy.JoinConfig{Strategy: startFlags.joinStrategy, Sender: startFlags.joinSender, Order: startFlags.joinOrder},
	}
	if err := setHintsFlags(&cfg); err != nil {
		return cfg, err
	}
	if err := setAdmissionFlags(&cfg); err != nil {
		return cfg, err
	}
	cfg.Background.HeavyCompactionBytes = uint64(startFlags.heavyCompaction)
	cfg.Background.MaxPostpone = startFlags.maxPostpone
	cfg.Background.CompactInterval = startFlags.compactInterval
	cfg.Background.BackupInterval = startFlags.backupInterval
	cfg.Background.BackupDir = startFlags.backupDir
	var err error
	if cfg.MaxKeyBytes, err = startFlags.maxKeyBytes.int("--max-key-bytes"); err != nil {
		return cfg, err
	}
	if cfg.MaxValueBytes, err = startFlags.maxValueBytes.int("--max-value-bytes"); err != nil {
		return cfg, err
	}
	if startFlags.http == "" {
		return cfg, usageError{fmt.Errorf(`--http is empty: give an address, or "off" to disable HTTP`)}
	}
	if startFlags.listen == "" {
		return cfg, usageError{errors.New("--listen is empty")}
	}
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return cfg, usageError{err}
	}
	return cfg, nil
}

// setAdmissionFlags copies the admission flags into cfg.
func setAdmissionFlags(cfg *server.Config) error {
	switch startFlags.admission {
	case "on":
	case "off":
		cfg.Admission.Disabled = true
	default:
		return usageError{fmt.Errorf("--admission %q: use on or off", startFlags.admission)}
	}
	for _, v := range []struct {
		flag string
		n    int64
	}{{"--max-inflight-requests", startFlags.maxRequests}, {"--max-inflight-request-bytes", int64(startFlags.maxRequestBytes)},
		{"--max-inflight-writes", startFlags.maxWrites}, {"--max-inflight-write-bytes", int64(startFlags.maxWriteBytes)}} {
		if v.n <= 0 {
			return usageError{fmt.Errorf("%s %d: must be positive (turn admission control off with --admission off)", v.flag, v.n)}
		}
	}
	cfg.Admission.Requests = admission.Limits{Count: startFlags.maxRequests, Bytes: int64(startFlags.maxRequestBytes)}
	cfg.Admission.Proposals = admission.Limits{Count: startFlags.maxWrites, Bytes: int64(startFlags.maxWriteBytes)}
	return nil
}

// setHintsFlags copies the --read-hints* flags into cfg.
func setHintsFlags(cfg *server.Config) error {
	onOff := func(flag, v string) (bool, error) {
		switch v {
		case "on":
			return true, nil
		case "off":
			return false, nil
		}
		return false, usageError{fmt.Errorf("%s %q: use on or off", flag, v)}
	}
	on, err := onOff("--read-hints", startFlags.readHints)
	if err != nil {
		return err
	}
	adaptive, err := onOff("--read-hints-adaptive", startFlags.hintsAdaptive)
	if err != nil {
		return err
	}
	cfg.Hints.Off, cfg.Hints.FixedFraction = !on, !adaptive
	switch startFlags.hintsTarget {
	case "all":
		cfg.Hints.Target = hints.TargetAll
	case "one":
		cfg.Hints.Target = hints.TargetOne
	default:
		return usageError{fmt.Errorf("--read-hints-target %q: use all or one", startFlags.hintsTarget)}
	}
	if f := startFlags.hintsFraction; !(f > 0 && f <= 1) {
		return usageError{fmt.Errorf("--read-hints-fraction %v: must be in (0, 1]", f)}
	}
	cfg.Hints.Fraction = startFlags.hintsFraction
	if w := startFlags.hintsDiskWeight; w == 0 || w > 1 {
		return usageError{fmt.Errorf("--read-hints-disk-weight %v: must be in (0, 1], or negative to ignore the disk", w)}
	}
	cfg.Hints.DiskWeight = startFlags.hintsDiskWeight
	if s := startFlags.hintsDiskShare; s == 0 || s > 1 {
		return usageError{fmt.Errorf("--read-hints-disk-read-share %v: must be in (0, 1], or negative for no budget", s)}
	}
	cfg.Hints.DiskReadShare = startFlags.hintsDiskShare
	if startFlags.hintsInterval <= 0 || startFlags.hintsInterval > time.Minute {
		return usageError{fmt.Errorf("--read-hints-interval %v: must be in (0, 1m]", startFlags.hintsInterval)}
	}
	cfg.Hints.Tuning.Shipper.FlushInterval = startFlags.hintsInterval
	if startFlags.hintsSwitch < 10*time.Millisecond || startFlags.hintsSwitch > time.Hour {
		return usageError{fmt.Errorf("--read-hints-switch-interval %v: must be in [10ms, 1h]", startFlags.hintsSwitch)}
	}
	cfg.Hints.SwitchInterval = startFlags.hintsSwitch
	return nil
}

func runStart(cmd *cobra.Command, _ []string) error {
	cfg, err := startConfig()
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

// byteSize is a size flag that accepts human units (see parseSize) and prints itself with them.
type byteSize int64

// String prints the size with the largest binary unit that divides it exactly.
func (b *byteSize) String() string { return formatSize(int64(*b)) }

// Set parses a size with parseSize.
func (b *byteSize) Set(s string) error {
	n, err := parseSize(s)
	if err != nil {
		return err
	}
	*b = byteSize(n)
	return nil
}

// Type names the flag's value in help output.
func (b *byteSize) Type() string { return "size" }

// int returns the size as an int, refusing what an int cannot hold.
func (b byteSize) int(flag string) (int, error) {
	if int64(b) > math.MaxInt {
		return 0, usageError{fmt.Errorf("%s %s is too large", flag, formatSize(int64(b)))}
	}
	return int(b), nil
}

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

