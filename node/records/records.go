// Package records owns what the node layer keeps in the meta range besides range descriptors: the
// autopilot's policy switches, nodes' admin states (drain, decommission), join records, the saved
// decision log, scan jobs and leadership zone preferences. Each lives under its own one-byte prefix
// of the meta keyspace; this package is the only place that knows those keys.
//
// It reads and writes through the range layer (MetaStore); it must never touch the engine.
package records

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/shoaldb/shoal/autopilot/model"
	"github.com/shoaldb/shoal/autopilot/policy"
	"github.com/shoaldb/shoal/pb"
	"github.com/shoaldb/shoal/replica"
)

// MetaStore reads and writes the meta range linearizably (kv.Service implements it).
type MetaStore interface {
	ScanMeta(ctx context.Context, start, end []byte, limit int) ([]*pb.KeyValue, error)
	ProposeMeta(ctx context.Context, cmd *pb.Command) (replica.Result, error)
}

// Prefixes of the meta keyspace.
const (
	policyPrefix    = 'p'
	nodeStatePrefix = 's'
	joinPrefix      = 'j'
	decisionPrefix  = 'D'
)

// Decommissioned is stored for a node the autopilot emptied (beyond the public enum's values).
const Decommissioned = pb.NodeAdminState(100)

// PolicyKey is the meta key of a policy's switch.
func PolicyKey(name string) []byte { return append([]byte{policyPrefix}, name...) }

// NodeStateKey is the meta key of a node's admin state.
func NodeStateKey(node uint64) []byte {
	return append([]byte{nodeStatePrefix}, strconv.FormatUint(node, 10)...)
}

// JoinKey is the meta key of a node's join record.
func JoinKey(node uint64) []byte { return append([]byte{joinPrefix}, strconv.FormatUint(node, 10)...) }

// DecisionKey is the meta key of a saved decision.
func DecisionKey(id uint64) []byte {
	k := make([]byte, 1+8)
	k[0] = decisionPrefix
	binary.BigEndian.PutUint64(k[1:], id)
	return k
}

// DecisionSpan is the meta span of the saved decision log.
func DecisionSpan() (start, end []byte) { return []byte{decisionPrefix}, []byte{decisionPrefix + 1} }

// Switches reads every stored policy switch (name → on).
func Switches(ctx context.Context, m MetaStore) (map[string]bool, error) {
	kvs, err := m.ScanMeta(ctx, []byte{policyPrefix}, []byte{policyPrefix + 1}, 0)
	if err != nil {
		return nil, fmt.Errorf("read the policy switches from the meta range: %w", err)
	}
	out := make(map[string]bool, len(kvs))
	for _, kv := range kvs {
		out[string(kv.Key[1:])] = string(kv.Value) == "on"
	}
	return out, nil
}

// SwitchOn reads one policy's switch: the stored one, else the registry's default (policy.DefaultOn).
func SwitchOn(ctx context.Context, m MetaStore, name string) (bool, error) {
	key := PolicyKey(name)
	kvs, err := m.ScanMeta(ctx, key, append(key[:len(key):len(key)], 0), 1)
	if err != nil {
		return false, err
	}
	if len(kvs) == 0 {
		return policy.DefaultOn(name), nil
	}
	return string(kvs[0].Value) == "on", nil
}

// SetSwitch stores a policy's switch.
func SetSwitch(ctx context.Context, m MetaStore, name string, on bool) error {
	v := "off"
	if on {
		v = "on"
	}
	_, err := m.ProposeMeta(ctx, &pb.Command{Mutations: []*pb.Mutation{{Key: PolicyKey(name), Value: []byte(v)}}})
	return err
}

// SetNodeState stores a node's admin state; NODE_ACTIVE deletes it.
func SetNodeState(ctx context.Context, m MetaStore, node uint64, state pb.NodeAdminState) error {
	mut := &pb.Mutation{Key: NodeStateKey(node), Value: []byte{byte(state)}}
	if state == pb.NodeAdminState_NODE_ACTIVE {
		mut = &pb.Mutation{Key: NodeStateKey(node), Delete: true}
	}
	_, err := m.ProposeMeta(ctx, &pb.Command{Mutations: []*pb.Mutation{mut}})
	return err
}

// AdminStates reads the drain/decommission marks of every node.
func AdminStates(ctx context.Context, m MetaStore) (map[uint64]pb.NodeAdminState, error) {
	kvs, err := m.ScanMeta(ctx, []byte{nodeStatePrefix}, []byte{nodeStatePrefix + 1}, 0)
	if err != nil {
		return nil, fmt.Errorf("read the nodes' admin states from the meta range: %w", err)
	}
	states := map[uint64]pb.NodeAdminState{}
	for _, kv := range kvs {
		id, err := strconv.ParseUint(string(kv.Key[1:]), 10, 64)
		if err == nil && len(kv.Value) == 1 {
			states[id] = pb.NodeAdminState(kv.Value[0])
		}
	}
	return states, nil
}

// RecordJoin stores node's join record.
func RecordJoin(ctx context.Context, m MetaStore, node uint64, j model.Join) error {
	b, err := json.Marshal(j)
	if err != nil {
		return err
	}
	if _, err := m.ProposeMeta(ctx, &pb.Command{Mutations: []*pb.Mutation{{Key: JoinKey(node), Value: b}}}); err != nil {
		return fmt.Errorf("record join of node %d: %w", node, err)
	}
	return nil
}

// Joins reads every node's join record.
func Joins(ctx context.Context, m MetaStore) (map[uint64]*model.Join, error) {
	kvs, err := m.ScanMeta(ctx, []byte{joinPrefix}, []byte{joinPrefix + 1}, 0)
	if err != nil {
		return nil, fmt.Errorf("read the join records from the meta range: %w", err)
	}
	out := map[uint64]*model.Join{}
	for _, kv := range kvs {
		id, err := strconv.ParseUint(string(kv.Key[1:]), 10, 64)
		if err != nil {
			continue
		}
		j := &model.Join{}
		if json.Unmarshal(kv.Value, j) == nil {
			out[id] = j
		}
	}
	return out, nil
}

// NodeRecords reads what the meta range keeps per node: admin states and join records.
func NodeRecords(ctx context.Context, m MetaStore) (map[uint64]pb.NodeAdminState, map[uint64]*model.Join, error) {
	states, err := AdminStates(ctx, m)
	if err != nil {
		return nil, nil, err
	}
	joins, err := Joins(ctx, m)
	if err != nil {
		return nil, nil, err
	}
	return states, joins, nil
}
