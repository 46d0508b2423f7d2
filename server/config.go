package server

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/shoaldb/shoal/autopilot/policy"
	"github.com/shoaldb/shoal/hints"
	"github.com/shoaldb/shoal/kv"
	"github.com/shoaldb/shoal/transport"
)

// Defaults of Config. They are applied by Config.WithDefaults (and so by Run) and passed to the node
// explicitly, so that what `shoal start --print-config` prints is what the node runs with.
const (
	// DefaultListen is the default gRPC listen address.
	DefaultListen = "127.0.0.1:26257"
	// DefaultHTTP is the default HTTP listen address.
	DefaultHTTP = "127.0.0.1:8080"
	// HTTPOff as Config.HTTP disables the HTTP listener.
	HTTPOff = "off"
	// DefaultCacheBytes is the default block cache size (the storage layer's default).
	DefaultCacheBytes int64 = 128 << 20
	// DefaultMaxKeyBytes is the default bound on a key's size.
	DefaultMaxKeyBytes = 4 << 10
	// DefaultMaxValueBytes is the default bound on a value's size.
	DefaultMaxValueBytes = 8 << 20
	// DefaultRangeMaxBytes is the default size at which a range splits.
	DefaultRangeMaxBytes int64 = 64 << 20
	// DefaultTickInterval is the default raft tick.
	DefaultTickInterval = 100 * time.Millisecond
	// DefaultSnapshotRate is the snapshot bandwidth per node (replica moves and catch-up).
	DefaultSnapshotRate = 32 << 20
	// DefaultHeavyCompactionBytes is the input size from which an automatic compaction is heavy.
	DefaultHeavyCompactionBytes = 128 << 20
	// DefaultMaxPostpone bounds how long a heavy task waits for the node's leaderships to move.
	DefaultMaxPostpone = 5 * time.Minute
	// DefaultDeadNodeTimeout is how long a node may be silent before it is considered dead.
	DefaultDeadNodeTimeout = 60 * time.Second
	// MinGRPCMsgBytes is the lower bound of the gRPC server's message size limit for the public API; the
	// limit is also at least transport.MaxRecvMessageBytes, for raft traffic.
	MinGRPCMsgBytes = 16 << 20
)

// Config configures one node process: its listeners, its store and the node it runs. Zero values take
// the defaults above (see WithDefaults).
type Config struct {
	// DataDir is the directory of the node's store (required).
	DataDir string
	// Listen is the gRPC listen address (default DefaultListen). Port 0 picks a free port.
	Listen string
	// Advertise is the gRPC address other nodes and clients dial. Default: the actual listen address
	// (port 0 resolved to the real port; an unspecified host such as 0.0.0.0 replaced by the hostname).
	Advertise string
	// HTTP is the HTTP listen address (default DefaultHTTP); HTTPOff disables the listener.
	HTTP string
	// RESP is the listen address of the RESP (Redis Cluster protocol) listener, package server/resp;
	// its advertised form goes into the node's descriptor. Empty disables it.
	RESP string
	// Bootstrap creates a new cluster if the store has no identity yet.
	Bootstrap bool
	// Join lists gRPC addresses of existing nodes to join through if the store has no identity yet.
	Join []string
	// AuthToken, when set, is required as "authorization: Bearer <token>" on every gRPC call and on the
	// HTTP /api/ and /debug/ endpoints; /healthz, /metrics and the dashboard page stay open.
	AuthToken string
	// CertsDir, when set, turns on TLS (see docs/design/tls.md): it holds ca.crt, node.crt and node.key
	// (`shoal cert create-ca`, `create-node`). The gRPC listener then requires client certificates signed
	// by the CA (mutual TLS; nodes present node.crt to each other), node-to-node dials verify the peer
	// against the CA, HTTP is served over HTTPS and RESP over TLS (client certificates optional on both).
	// Empty: everything in clear text.
	CertsDir string
	// CacheBytes is the block cache size (default DefaultCacheBytes).
	CacheBytes int64
	// MaxKeyBytes and MaxValueBytes bound request sizes (defaults DefaultMaxKeyBytes, DefaultMaxValueBytes).
	MaxKeyBytes, MaxValueBytes int
	// RangeMaxBytes triggers an automatic split (default DefaultRangeMaxBytes).
	RangeMaxBytes int64
	// TickInterval is the raft tick (default DefaultTickInterval).
	TickInterval time.Duration
	// DeadNodeTimeout: a node silent for this long is considered dead (default DefaultDeadNodeTimeout).
	DeadNodeTimeout time.Duration
	// SnapshotRate limits the snapshot bytes per second this node sends (default DefaultSnapshotRate).
	SnapshotRate int64
	// SnapshotRecvRate limits the snapshot bytes per second this node receives from all senders
	// together (0: unlimited).
	SnapshotRecvRate int64
	// Background: what counts as a heavy background task, how long one may wait for the node's
	// leaderships to move, periodic compactions and backups (docs/design/shed-leadership.md).
	Background kv.BackgroundConfig
	// ShedRanking picks the new leader when shed_leadership moves leaderships off a busy node: "mrc"
	// (default), "lsp" or "preferred".
	ShedRanking string
	// Joins configures how nodes join (and leave): the incremental_join policy's strategy, sender and
	// order (docs/design/incremental-join.md).
	Joins policy.JoinConfig
	// Hints configures read hints (docs/design/read-hints.md): on by default, to every other
	// replica, the applied fraction adapted to the CPU load; Hints.Off turns them off on this node.
	Hints kv.HintsConfig
	// Admission bounds the client work a node holds; beyond it clients get OVERLOADED
	// (docs/design/admission.md). Zero limits take DefaultAdmission's.
	Admission kv.AdmissionConfig
}

// DefaultAdmission holds the default admission limits.
var DefaultAdmission = func() kv.AdmissionConfig {
	var c kv.AdmissionConfig
	c.SetDefaults()
	return c
}()

// WithDefaults returns a copy of c with every zero field set to its default.
func (c Config) WithDefaults() Config {
	if c.Listen == "" {
		c.Listen = DefaultListen
	}
	if c.HTTP == "" {
		c.HTTP = DefaultHTTP
	}
	if c.CacheBytes == 0 {
		c.CacheBytes = DefaultCacheBytes
	}
	if c.MaxKeyBytes == 0 {
		c.MaxKeyBytes = DefaultMaxKeyBytes
	}
	if c.MaxValueBytes == 0 {
		c.MaxValueBytes = DefaultMaxValueBytes
	}
	if c.RangeMaxBytes == 0 {
		c.RangeMaxBytes = DefaultRangeMaxBytes
	}
	if c.TickInterval == 0 {
		c.TickInterval = DefaultTickInterval
	}
	if c.DeadNodeTimeout == 0 {
		c.DeadNodeTimeout = DefaultDeadNodeTimeout
	}
	if c.SnapshotRate == 0 {
		c.SnapshotRate = DefaultSnapshotRate
	}
	if c.Background.HeavyCompactionBytes == 0 {
		c.Background.HeavyCompactionBytes = DefaultHeavyCompactionBytes
	}
	if c.Background.MaxPostpone == 0 {
		c.Background.MaxPostpone = DefaultMaxPostpone
	}
	if c.ShedRanking == "" {
		c.ShedRanking = policy.RankMRC
	}
	if c.Hints.Fraction == 0 {
		c.Hints.Fraction = 1
	}
	if c.Hints.TransferWait == 0 {
		c.Hints.TransferWait = hints.DefaultTransferWait
	}
	if c.Hints.RestartWarm == 0 {
		c.Hints.RestartWarm = kv.DefaultRestartWarm
	}
	if c.Hints.SwitchInterval == 0 {
		c.Hints.SwitchInterval = kv.DefaultHintsSwitchInterval
	}
	if c.Hints.DiskWeight == 0 {
		c.Hints.DiskWeight = kv.DefaultHintsDiskWeight
	}
	if c.Hints.DiskReadShare == 0 {
		c.Hints.DiskReadShare = kv.DefaultHintsDiskReadShare
	}
	return c
}

func onOff(on bool) string {
	if on {
		return "on"
	}
	return "off"
}

// Validate reports every problem of c at once. It accepts zero values (they take defaults), so it may
// be called before or after WithDefaults.
func (c *Config) Validate() error {
	var errs []error
	add := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }

	if strings.TrimSpace(c.DataDir) == "" {
		add("missing data directory: set --data-dir")
	}
	if c.Listen != "" {
		if err := checkAddr(c.Listen); err != nil {
			add("invalid listen address %q: %v", c.Listen, err)
		}
	}
	if c.Advertise != "" {
		if err := checkAddr(c.Advertise); err != nil {
			add("invalid advertise address %q: %v", c.Advertise, err)
		} else if host, port, _ := net.SplitHostPort(c.Advertise); port == "0" || isUnspecified(host) {
			add("invalid advertise address %q: other nodes must be able to dial it (give a real host and a non-zero port)", c.Advertise)
		}
	}
	if c.HTTP != "" && c.HTTP != HTTPOff {
		if err := checkAddr(c.HTTP); err != nil {
			add("invalid HTTP address %q (use %q to disable HTTP): %v", c.HTTP, HTTPOff, err)
		}
	}
	if c.RESP != "" {
		if err := checkAddr(c.RESP); err != nil {
			add("invalid RESP address %q: %v", c.RESP, err)
		}
	}
	for _, j := range c.Join {
		if err := checkAddr(j); err != nil {
			add("invalid join address %q: %v", j, err)
		}
	}
	if c.Bootstrap && len(c.Join) > 0 {
		add("--bootstrap and --join are exclusive: bootstrap the first node of a new cluster, join the others through it")
	}
	if c.CacheBytes < 0 {
		add("cache size must not be negative (got %d)", c.CacheBytes)
	}
	if c.MaxKeyBytes < 0 {
		add("max key bytes must not be negative (got %d)", c.MaxKeyBytes)
	}
	if c.MaxValueBytes < 0 {
		add("max value bytes must not be negative (got %d)", c.MaxValueBytes)
	}
	if c.MaxValueBytes > 1<<30 {
		add("max value bytes must be at most 1 GiB (got %d)", c.MaxValueBytes)
	}
	if c.RangeMaxBytes < 0 {
		add("range max bytes must not be negative (got %d)", c.RangeMaxBytes)
	}
	if c.TickInterval < 0 {
		add("tick interval must not be negative (got %s)", c.TickInterval)
	}
	if c.DeadNodeTimeout < 0 {
		add("dead node timeout must not be negative (got %s)", c.DeadNodeTimeout)
	}
	if c.SnapshotRate < 0 || (c.SnapshotRate > 0 && c.SnapshotRate < 64<<10) {
		add("snapshot rate must be at least 64KiB per second (got %d)", c.SnapshotRate)
	}
	if c.SnapshotRecvRate < 0 || (c.SnapshotRecvRate > 0 && c.SnapshotRecvRate < 64<<10) {
		add("snapshot receive rate must be 0 (unlimited) or at least 64KiB per second (got %d)", c.SnapshotRecvRate)
	}
	switch c.ShedRanking {
	case "", policy.RankMRC, policy.RankLSP, policy.RankPreferred:
	default:
		add("shed ranking %q unknown: use mrc, lsp or preferred", c.ShedRanking)
	}
	if err := (policy.Config{Join: c.Joins}).Validate(); err != nil {
		add("%v", err)
	}
	if c.Hints.Fraction < 0 || c.Hints.Fraction > 1 {
		add("read hints fraction %v must be in (0, 1]", c.Hints.Fraction)
	} else if err := c.Hints.Validate(); err != nil {
		add("%v", err)
	}
	if c.Background.MaxPostpone < 0 || c.Background.CompactInterval < 0 || c.Background.BackupInterval < 0 {
		add("background durations must not be negative")
	}
	if c.Background.BackupInterval > 0 && !filepath.IsAbs(c.Background.BackupDir) {
		add("a backup interval needs an absolute --backup-dir (got %q)", c.Background.BackupDir)
	}
	if c.CertsDir != "" && strings.TrimSpace(c.CertsDir) == "" {
		add("certs directory is blank")
	}
	if strings.ContainsAny(c.AuthToken, " \t\r\n") {
		add("auth token must not contain whitespace")
	}
	return errors.Join(errs...)
}

// checkAddr accepts host:port with a numeric port in [0, 65535]; the host may be empty (all interfaces).
func checkAddr(addr string) error {
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return err
	}
	p, err := strconv.Atoi(port)
	if err != nil || p < 0 || p > 65535 {
		return fmt.Errorf("port %q is not a number in 0..65535", port)
	}
	return nil
}

func isUnspecified(host string) bool {
	if host == "" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsUnspecified()
}

// grpcMaxMsgBytes is the gRPC server's message size limit: room for the largest value plus its key and
// envelope, at least MinGRPCMsgBytes, and at least what the raft transport needs.
func (c Config) grpcMaxMsgBytes() int {
	return max(c.MaxValueBytes+c.MaxKeyBytes+1<<20, MinGRPCMsgBytes, transport.MaxRecvMessageBytes)
}

// MarshalJSON renders c for `shoal start --print-config`: durations as strings and the auth token
// redacted, so that a Config can never leak its token through JSON.
func (c Config) MarshalJSON() ([]byte, error) {
	token := ""
	if c.AuthToken != "" {
		token = "(redacted)"
	}
	join := c.Join
	if join == nil {
		join = []string{}
	}
	hd := c.WithDefaults().Hints
	ad := c.Admission
	ad.SetDefaults()
	return json.Marshal(struct {
		DataDir         string   `json:"data_dir"`
		Listen          string   `json:"listen"`
		Advertise       string   `json:"advertise"`
		HTTP            string   `json:"http"`
		RESP            string   `json:"resp"`
		Bootstrap       bool     `json:"bootstrap"`
		Join            []string `json:"join"`
		AuthToken       string   `json:"auth_token"`
		CertsDir        string   `json:"certs_dir"`
		CacheBytes      int64    `json:"cache_bytes"`
		MaxKeyBytes     int      `json:"max_key_bytes"`
		MaxValueBytes   int      `json:"max_value_bytes"`
		RangeMaxBytes   int64    `json:"range_max_bytes"`
		TickInterval    string   `json:"tick_interval"`
		DeadNodeTimeout string   `json:"dead_node_timeout"`
		SnapshotRate    int64    `json:"snapshot_rate_bytes_per_sec"`
		GRPCMaxMsgBytes int      `json:"grpc_max_msg_bytes"`
		HeavyCompaction uint64   `json:"heavy_compaction_bytes"`
		MaxPostpone     string   `json:"max_postpone"`
		ShedRanking     string   `json:"shed_ranking"`
		CompactInterval string   `json:"compact_interval"`
		BackupInterval  string   `json:"backup_interval"`
		BackupDir       string   `json:"backup_dir"`
		ReadHints       string   `json:"read_hints"`
		HintsTarget     string   `json:"read_hints_target"`
		HintsFraction   float64  `json:"read_hints_fraction"`
		HintsAdaptive   string   `json:"read_hints_adaptive"`
		HintsDiskWeight float64  `json:"read_hints_disk_weight"`
		HintsDiskShare  float64  `json:"read_hints_disk_read_share"`
		HintsWait       string   `json:"read_hints_transfer_wait"`
		HintsRestart    string   `json:"read_hints_restart_warm"`
		HintsSwitch     string   `json:"read_hints_switch_interval"`
		Admission       string   `json:"admission"`
		MaxRequests     int64    `json:"max_inflight_requests"`
		MaxRequestBytes int64    `json:"max_inflight_request_bytes"`
		MaxWrites       int64    `json:"max_inflight_writes"`
		MaxWriteBytes   int64    `json:"max_inflight_write_bytes"`
	}{
		DataDir: c.DataDir, Listen: c.Listen, Advertise: c.Advertise, HTTP: c.HTTP, RESP: c.RESP,
		Bootstrap: c.Bootstrap, Join: join, AuthToken: token, CertsDir: c.CertsDir, CacheBytes: c.CacheBytes,
		MaxKeyBytes: c.MaxKeyBytes, MaxValueBytes: c.MaxValueBytes, RangeMaxBytes: c.RangeMaxBytes,
		TickInterval: c.TickInterval.String(), DeadNodeTimeout: c.DeadNodeTimeout.String(), SnapshotRate: c.WithDefaults().SnapshotRate,
		GRPCMaxMsgBytes: c.WithDefaults().grpcMaxMsgBytes(),
		HeavyCompaction: c.WithDefaults().Background.HeavyCompactionBytes, MaxPostpone: c.WithDefaults().Background.MaxPostpone.String(),
		ShedRanking: c.WithDefaults().ShedRanking, CompactInterval: c.Background.CompactInterval.String(),
		BackupInterval: c.Background.BackupInterval.String(), BackupDir: c.Background.BackupDir,
		ReadHints: onOff(!c.Hints.Off), HintsTarget: c.Hints.Target.String(), HintsFraction: hd.Fraction,
		HintsAdaptive: onOff(!c.Hints.FixedFraction), HintsDiskWeight: hd.DiskWeight, HintsDiskShare: hd.DiskReadShare, HintsWait: hd.TransferWait.String(), HintsRestart: hd.RestartWarm.String(),
		HintsSwitch: hd.SwitchInterval.String(),
		Admission:   onOff(!c.Admission.Disabled), MaxRequests: ad.Requests.Count, MaxRequestBytes: ad.Requests.Bytes,
		MaxWrites: ad.Proposals.Count, MaxWriteBytes: ad.Proposals.Bytes,
	})
}

// String renders c as its JSON form, so that printing a Config (%v) never shows the auth token.
func (c Config) String() string {
	b, err := c.MarshalJSON()
	if err != nil {
		return fmt.Sprintf("server.Config{%v}", err)
	}
	return string(b)
}
