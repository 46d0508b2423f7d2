package ycsb

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/magiconair/properties"
	"github.com/pingcap/go-ycsb/pkg/prop"
	// go-ycsb's own etcd binding (clientv3), registered as "etcd".
	_ "github.com/pingcap/go-ycsb/db/etcd"
	// go-ycsb's own redis binding (go-redis v9), registered as "redis".
	_ "github.com/pingcap/go-ycsb/db/redis"
	goycsb "github.com/pingcap/go-ycsb/pkg/ycsb"
)

// Targets a benchmark can run against.
const (
	TargetGRPC = "grpc" // Shoal through its gRPC API and Go client (ShoalDB)
	TargetRESP = "resp" // a RESP server (Shoal's RESP front end, or a redis-server) through go-ycsb's redis binding
	TargetEtcd = "etcd" // an etcd cluster through go-ycsb's etcd binding, as a peer to compare with
	// TargetTable is Shoal's table layer (TableDB): a YCSB table is a Shoal table, a record a row.
	TargetTable = "table"
)

// Redis modes of TargetRESP (Config.RedisMode).
const (
	// RedisModeCluster uses go-redis's ClusterClient: it reads the slot map with CLUSTER SLOTS from
	// the given nodes and sends each command to its slot's owner (following MOVED). Shoal's default.
	RedisModeCluster = "cluster"
	// RedisModePlain uses one go-redis Client on one address (a standalone redis-server, or one Shoal
	// node, which forwards what it does not lead).
	RedisModePlain = "plain"
)

// Properties of go-ycsb's redis binding that Config.Properties and Open set.
const (
	propRedisMode     = "redis.mode"     // "cluster" or "single" (go-ycsb's name for plain)
	propRedisDatatype = "redis.datatype" // "string", "hash" or "json"
	propRedisAddr     = "redis.addr"     // one address, or several separated by ';' in cluster mode
	propRedisPassword = "redis.password"
)

// ErrUnsupported is returned for a workload a target's binding cannot run.
var ErrUnsupported = errors.New("not supported")

// DefaultHosts returns the hosts used when none are given.
func DefaultHosts(target string) []string {
	switch target {
	case TargetEtcd:
		return []string{"127.0.0.1:2379"}
	case TargetRESP:
		return []string{"127.0.0.1:6379"}
	default:
		return []string{"127.0.0.1:26257"}
	}
}

// System names the system behind a target, as reports and comparisons show it (Config.System
// overrides it, e.g. "redis" for TargetRESP against a redis-server).
func System(target string) string {
	switch target {
	case TargetGRPC, TargetRESP, TargetTable:
		return "shoal"
	default:
		return target
	}
}

// checkSupported rejects what a target's binding cannot do, before anything runs: go-ycsb's redis
// binding has no range scans (Redis keys are not ordered; its Scan always fails), so workload E, or
// any mix with scans, cannot run on TargetRESP.
func checkSupported(target string, p *properties.Properties) error {
	if target == TargetRESP && p.GetFloat64(prop.ScanProportion, 0) > 0 {
		return fmt.Errorf("target %s: scans (workload e) are %w: go-ycsb's redis binding has no ordered range scan "+
			"(Redis keys are unordered; Shoal's RESP SCAN walks hash slots, not key order); run workload e with --target grpc", target, ErrUnsupported)
	}
	return nil
}

// Open returns the go-ycsb DB for target at hosts, configured from p (the workload's properties, to
// which it adds the binding's own). authToken is used by the Shoal targets only (for TargetRESP it
// is sent with AUTH).
//
// TargetRESP runs go-ycsb's redis binding unchanged, in the mode p's redis.mode names (Properties
// sets it from Config.RedisMode): cluster mode with every host as a seed, plain mode with exactly
// one host. Its records are strings (redis.datatype=string, set by Properties): one key per record
// holding the JSON of the field map (base64 values), so a read is one GET and an insert or a
// whole-record update one SET, as in the other bindings.
func Open(target string, hosts []string, authToken string, p *properties.Properties) (goycsb.DB, error) {
	if err := checkSupported(target, p); err != nil {
		return nil, err
	}
	name := ""
	switch target {
	case TargetGRPC, TargetTable:
		name = shoalDBName
		if target == TargetTable {
			name = tableDBName
		}
		mustSet(p, PropShoalHosts, strings.Join(hosts, ","))
		if authToken != "" {
			mustSet(p, PropShoalAuthToken, authToken)
		}
	case TargetEtcd:
		name = "etcd"
		mustSet(p, "etcd.endpoints", strings.Join(hosts, ","))
	case TargetRESP:
		name = "redis"
		mode := p.GetString(propRedisMode, "cluster")
		switch mode {
		case "cluster":
			mustSet(p, propRedisAddr, strings.Join(hosts, ";"))
		case "single":
			if len(hosts) != 1 {
				return nil, fmt.Errorf("target %s in %s mode takes one host, not %d (%s)", target, RedisModePlain, len(hosts), strings.Join(hosts, ","))
			}
			mustSet(p, propRedisAddr, hosts[0])
		default:
			return nil, fmt.Errorf("target %s: %s=%q: use cluster or single", target, propRedisMode, mode)
		}
		if authToken != "" {
			mustSet(p, propRedisPassword, authToken)
		}
	default:
		return nil, fmt.Errorf("unknown target %q: use %s, %s, %s or %s", target, TargetGRPC, TargetTable, TargetRESP, TargetEtcd)
	}
	creator := goycsb.GetDBCreator(name)
	if creator == nil {
		return nil, fmt.Errorf("go-ycsb binding %q is not registered", name)
	}
	db, err := createQuietly(creator, p)
	if err != nil {
		return nil, fmt.Errorf("open %s at %s: %w", target, strings.Join(hosts, ","), err)
	}
	return db, nil
}

// createQuietly creates a DB with os.Stdout pointing at stderr: go-ycsb's redis binding prints its
// settings on stdout, which would corrupt a JSON report.
func createQuietly(creator goycsb.DBCreator, p *properties.Properties) (goycsb.DB, error) {
	stdoutMu.Lock()
	defer stdoutMu.Unlock()
	saved := os.Stdout
	os.Stdout = os.Stderr
	defer func() { os.Stdout = saved }()
	return creator.Create(p)
}

// mustSet sets a property; it fails only on a circular ${} reference, which our keys never hold.
func mustSet(p *properties.Properties, k, v string) {
	if _, _, err := p.Set(k, v); err != nil {
		panic(fmt.Sprintf("set property %s: %v", k, err))
	}
}
