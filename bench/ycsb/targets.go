package ycsb

import (
	"errors"
	"fmt"
	"strings"

	"github.com/magiconair/properties"
	// go-ycsb's own etcd binding (clientv3), registered as "etcd".
	_ "github.com/pingcap/go-ycsb/db/etcd"
	goycsb "github.com/pingcap/go-ycsb/pkg/ycsb"
)

// Targets a benchmark can run against.
const (
	TargetGRPC = "grpc" // Shoal through its gRPC API and Go client (ShoalDB)
	TargetRESP = "resp" // Shoal through its RESP front end: not yet implemented
	TargetEtcd = "etcd" // an etcd cluster through go-ycsb's etcd binding, as a peer to compare with
)

// ErrNotImplemented is returned for a target that does not exist yet.
var ErrNotImplemented = errors.New("not yet implemented")

// DefaultHosts returns the hosts used when none are given.
func DefaultHosts(target string) []string {
	if target == TargetEtcd {
		return []string{"127.0.0.1:2379"}
	}
	return []string{"127.0.0.1:26257"}
}

// System names the system behind a target, as reports and comparisons show it.
func System(target string) string {
	switch target {
	case TargetGRPC, TargetRESP:
		return "shoal"
	default:
		return target
	}
}

// Open returns the go-ycsb DB for target at hosts, configured from p (the workload's properties, to
// which it adds the binding's own). authToken is used by the Shoal targets only.
func Open(target string, hosts []string, authToken string, p *properties.Properties) (goycsb.DB, error) {
	name := ""
	switch target {
	case TargetGRPC:
		name = shoalDBName
		mustSet(p, PropShoalHosts, strings.Join(hosts, ","))
		if authToken != "" {
			mustSet(p, PropShoalAuthToken, authToken)
		}
	case TargetEtcd:
		name = "etcd"
		mustSet(p, "etcd.endpoints", strings.Join(hosts, ","))
	case TargetRESP:
		return nil, fmt.Errorf("target %q: %w: RESP front end lands with the measurement issue", target, ErrNotImplemented)
	default:
		return nil, fmt.Errorf("unknown target %q: use %s, %s or %s", target, TargetGRPC, TargetEtcd, TargetRESP)
	}
	creator := goycsb.GetDBCreator(name)
	if creator == nil {
		return nil, fmt.Errorf("go-ycsb binding %q is not registered", name)
	}
	db, err := creator.Create(p)
	if err != nil {
		return nil, fmt.Errorf("open %s at %s: %w", target, strings.Join(hosts, ","), err)
	}
	return db, nil
}

// mustSet sets a property; it fails only on a circular ${} reference, which our keys never hold.
func mustSet(p *properties.Properties, k, v string) {
	if _, _, err := p.Set(k, v); err != nil {
		panic(fmt.Sprintf("set property %s: %v", k, err))
	}
}
