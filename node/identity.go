package node

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/shoaldb/shoal/pb"
	"github.com/shoaldb/shoal/replica"
	"github.com/shoaldb/shoal/storage"
)

// identity is the node's persisted identity.
type identity struct {
	ClusterID string `json:"cluster_id"`
	NodeID    uint64 `json:"node_id"`
}

var identityKey = storage.LocalKey("identity")
var directoryKey = storage.LocalKey("directory")

// loadIdentity reads the node's identity and its last directory from the engine (nothing on a new store).
func (n *Node) loadIdentity() error {
	if v, ok, err := n.eng.Get(identityKey); err != nil {
		return err
	} else if ok {
		if err := json.Unmarshal(v, &n.ident); err != nil {
			return fmt.Errorf("store identity is corrupt: %w", err)
		}
	}
	if v, ok, err := n.eng.Get(directoryKey); err != nil {
		return err
	} else if ok {
		var nodes []*pb.NodeDescriptor
		if err := json.Unmarshal(v, &nodes); err == nil {
			for _, d := range nodes {
				n.dir.Upsert(d)
			}
		}
	}
	return nil
}

func u64(v uint64) []byte {
	b := make([]byte, 8)
	binary.BigEndian.PutUint64(b, v)
	return b
}

func (n *Node) selfDesc() *pb.NodeDescriptor {
	return &pb.NodeDescriptor{NodeId: n.ident.NodeID, Addr: n.cfg.Addr, HttpAddr: n.cfg.HTTPAddr, RespAddr: n.cfg.RESPAddr, Locality: n.cfg.Locality}
}

func (n *Node) saveIdentity() error {
	v, _ := json.Marshal(n.ident)
	b := n.eng.NewBatch()
	defer b.Close()
	if err := b.Set(identityKey, v); err != nil {
		return err
	}
	return b.Commit(true)
}

func (n *Node) saveDirectory() {
	v, _ := json.Marshal(n.dir.All())
	b := n.eng.NewBatch()
	defer b.Close()
	_ = b.Set(directoryKey, v)
	if err := b.Commit(true); err != nil {
		n.log.Warn("persist node directory", "err", err)
	}
}

// bootstrap creates the first node of a new cluster: the meta range and one user range covering the
// whole key space, both with this node as their only voter.
func (n *Node) bootstrap() error {
	id := make([]byte, 16)
	if _, err := rand.Read(id); err != nil {
		return err
	}
	n.ident = identity{ClusterID: hex.EncodeToString(id), NodeID: 1}
	st := replica.NewStore(replica.Config{NodeID: 1, Engine: n.eng, Transport: n.transport})
	metaDesc := &pb.RangeDescriptor{RangeId: replica.MetaRangeID, Replicas: []*pb.ReplicaDescriptor{{NodeId: 1, ReplicaId: 1}}, NextReplicaId: 2, Generation: 1}
	userDesc := &pb.RangeDescriptor{RangeId: replica.FirstUserRangeID, Replicas: []*pb.ReplicaDescriptor{{NodeId: 1, ReplicaId: 1}}, NextReplicaId: 2, Generation: 1}
	userData, err := proto.Marshal(userDesc)
	if err != nil {
		return err
	}
	nodeData, err := proto.Marshal(n.selfDesc())
	if err != nil {
		return err
	}
	metaData := []*pb.KeyValue{
		{Key: replica.MetaDescKey(nil), Value: userData},
		{Key: replica.MetaNodeKey(1), Value: nodeData},
		{Key: replica.MetaCounterKey("range-id"), Value: u64(replica.FirstUserRangeID)},
		{Key: replica.MetaCounterKey("node-id"), Value: u64(1)},
	}
	if err := st.Bootstrap(metaDesc, metaData); err != nil {
		return err
	}
	if err := st.Bootstrap(userDesc, nil); err != nil {
		return err
	}
	return n.saveIdentity()
}

// join asks an existing node of the --join list for a node id and records the cluster's identity. Until
// one admits it, it also waits for `shoal init` (the Init RPC): then it bootstraps a new cluster
// instead, which the other waiting nodes join.
func (n *Node) join(ctx context.Context) error {
	g := n.initGate
	g.setPhase(phaseWaiting)
	defer g.setPhase(phaseStarting) // no effect once the node has its identity
	peers := n.joinPeers()
	n.log.Info("new store: joining a cluster through --join; if none of these nodes belongs to a cluster yet, create one with `shoal init --host <one of them>`",
		"join", peers)
	backoff := 200 * time.Millisecond
	for round := 0; ; round++ {
		failures := map[string]string{}
		for _, addr := range peers {
			if done, ok := g.takeRequest(); ok {
				return n.initBootstrap(done)
			}
			c, err := n.peers.Client(addr)
			if err != nil {
				failures[addr] = err.Error()
				continue
			}
			rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			g.setAttempt(cancel) // an accepted Init cuts the attempt short
			resp, err := c.Join(rctx, &pb.JoinRequest{Node: n.selfDesc()})
			g.setAttempt(nil)
			cancel()
			if err == nil && resp.Error == nil {
				n.ident = identity{ClusterID: resp.ClusterId, NodeID: resp.NodeId}
				for _, d := range resp.Nodes {
					n.dir.Upsert(d)
				}
				if err := n.saveIdentity(); err != nil {
					return err
				}
				n.saveDirectory()
				g.joined(n.ident.ClusterID, n.ident.NodeID)
				return nil
			}
			if err == nil {
				err = errors.New(resp.Error.Message)
			}
			failures[addr] = err.Error()
		}
		if round%10 == 9 && len(peers) > 0 {
			n.log.Warn("no node of --join admits this node yet; retrying (a new cluster needs `shoal init` on one node)", "errors", failures)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("could not join through %v: %w", n.cfg.Join, ctx.Err())
		case done := <-g.requests:
			return n.initBootstrap(done)
		case <-time.After(backoff):
		}
		if backoff < 2*time.Second {
			backoff *= 2
		}
	}
}

// regionOf is a node's region: its locality's first tier value ("" when unknown).
func (n *Node) regionOf(nodeID uint64) string {
	loc := n.cfg.Locality
	if nodeID != n.ident.NodeID {
		loc = n.dir.Get(nodeID).GetLocality()
	}
	first, _, _ := strings.Cut(loc, ",")
	_, v, _ := strings.Cut(first, "=")
	return v
}
