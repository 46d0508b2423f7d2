// Package validate checks the raft messages and snapshot headers that arrive from the network before
// they reach etcd raft, which panics on input no correct peer sends (it trusts its caller). A message
// that fails a check is dropped: raft retries what a real peer needs, so dropping is always safe.
//
// The checks here need no replica state; the checks against a replica's log are raftlog's
// (Log.CheckMessage). It must never change anything: it only answers.
package validate

import (
	"bytes"
	"fmt"
	"math"

	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/shoaldb/shoal/pb"
)

// fromNetwork lists the raft message types peers legitimately send (MsgSnap arrives with its data
// through HandleSnapshot). Proposals and transfer requests are never forwarded between Shoal nodes.
var fromNetwork = map[raftpb.MessageType]bool{
	raftpb.MsgApp: true, raftpb.MsgAppResp: true,
	raftpb.MsgVote: true, raftpb.MsgVoteResp: true, raftpb.MsgPreVote: true, raftpb.MsgPreVoteResp: true,
	raftpb.MsgHeartbeat: true, raftpb.MsgHeartbeatResp: true,
	raftpb.MsgTimeoutNow: true, raftpb.MsgReadIndex: true, raftpb.MsgReadIndexResp: true,
}

// Header validates what does not depend on replica state: ids, type, term and the shape of an
// append's entries.
func Header(rangeID uint64, m *raftpb.Message) error {
	switch {
	case rangeID == 0:
		return fmt.Errorf("range id 0")
	case m.GetFrom() == 0 || m.GetTo() == 0:
		return fmt.Errorf("zero replica id (from %d, to %d)", m.GetFrom(), m.GetTo())
	case m.GetFrom() == m.GetTo():
		return fmt.Errorf("self-addressed message from replica %d", m.GetFrom())
	case !fromNetwork[m.GetType()]:
		return fmt.Errorf("message type %s is not accepted from the network", m.GetType())
	case m.GetType() == raftpb.MsgReadIndex && len(m.GetEntries()) != 1:
		return fmt.Errorf("read index request with %d entries", len(m.GetEntries()))
	case m.GetType() != raftpb.MsgReadIndex && m.GetTerm() == 0:
		return fmt.Errorf("%s without a term", m.GetType())
	}
	if m.GetType() == raftpb.MsgApp {
		for i, e := range m.GetEntries() {
			if e.GetIndex() != m.GetIndex()+1+uint64(i) {
				return fmt.Errorf("append with entry %d at position %d after index %d", e.GetIndex(), i, m.GetIndex())
			}
			if e.GetTerm() > m.GetTerm() || (i > 0 && e.GetTerm() < m.GetEntries()[i-1].GetTerm()) || e.GetTerm() < m.GetLogTerm() {
				return fmt.Errorf("append with out-of-order entry terms")
			}
		}
	}
	return nil
}

// SnapshotHeader decodes the header of a snapshot that arrived from the network and checks it:
// a MsgSnap whose descriptor names the header's range, with a valid header (Header) and
// snapshot (Snapshot).
func SnapshotHeader(header *pb.RaftMessage) (*raftpb.Message, *pb.RangeDescriptor, error) {
	msg := &raftpb.Message{}
	if err := proto.Unmarshal(header.Message, msg); err != nil {
		return nil, nil, fmt.Errorf("range %d: decode snapshot header: %w", header.RangeId, err)
	}
	desc := &pb.RangeDescriptor{}
	if err := proto.Unmarshal(msg.GetSnapshot().GetData(), desc); err != nil {
		return nil, nil, fmt.Errorf("range %d: decode snapshot descriptor: %w", header.RangeId, err)
	}
	if desc.RangeId != header.RangeId {
		return nil, nil, fmt.Errorf("snapshot for range %d carries descriptor of range %d", header.RangeId, desc.RangeId)
	}
	if msg.GetType() != raftpb.MsgSnap {
		return nil, nil, fmt.Errorf("range %d: snapshot header is a %s", header.RangeId, msg.GetType())
	}
	if err := Header(header.RangeId, &raftpb.Message{Type: raftpb.MsgApp.Enum(), From: msg.From, To: msg.To, Term: msg.Term}); err != nil {
		return nil, nil, fmt.Errorf("range %d: bad snapshot header: %w", header.RangeId, err)
	}
	if err := Snapshot(msg, desc); err != nil {
		return nil, nil, fmt.Errorf("range %d: bad snapshot: %w", header.RangeId, err)
	}
	return msg, desc, nil
}

// Snapshot validates a received snapshot header against its descriptor: the snapshot's index and
// term, the descriptor's span and replicas, and a configuration raft can take.
func Snapshot(m *raftpb.Message, desc *pb.RangeDescriptor) error {
	meta := m.GetSnapshot().GetMetadata()
	if meta.GetIndex() == 0 || meta.GetIndex() == math.MaxUint64 || meta.GetTerm() == 0 {
		return fmt.Errorf("snapshot at index %d term %d", meta.GetIndex(), meta.GetTerm())
	}
	if len(desc.EndKey) > 0 && bytes.Compare(desc.StartKey, desc.EndKey) >= 0 {
		return fmt.Errorf("snapshot descriptor with start %q not before end %q", desc.StartKey, desc.EndKey)
	}
	mine := false
	ids := map[uint64]bool{}
	for _, rd := range desc.Replicas {
		if rd.ReplicaId == 0 || rd.NodeId == 0 || ids[rd.ReplicaId] {
			return fmt.Errorf("snapshot descriptor has a zero or repeated replica id")
		}
		ids[rd.ReplicaId] = true
		if rd.ReplicaId == m.GetTo() {
			mine = true
		}
	}
	if !mine {
		return fmt.Errorf("snapshot descriptor has no replica %d", m.GetTo())
	}
	cs := meta.GetConfState()
	if len(cs.GetVoters()) == 0 {
		return fmt.Errorf("snapshot without voters")
	}
	if cs.GetAutoLeave() && len(cs.GetVotersOutgoing()) == 0 {
		return fmt.Errorf("snapshot conf state: auto-leave without a joint configuration")
	}
	sets := map[string]map[uint64]bool{}
	for name, list := range map[string][]uint64{"voters": cs.GetVoters(), "learners": cs.GetLearners(),
		"outgoing": cs.GetVotersOutgoing(), "learners-next": cs.GetLearnersNext()} {
		set := map[uint64]bool{}
		for _, id := range list {
			if id == 0 || set[id] || !ids[id] {
				return fmt.Errorf("snapshot conf state: %s has a zero, repeated or unknown id %d", name, id)
			}
			set[id] = true
		}
		sets[name] = set
	}
	disjoint := func(a, b string) bool {
		for id := range sets[a] {
			if sets[b][id] {
				return false
			}
		}
		return true
	}
	if !disjoint("voters", "learners") || !disjoint("voters", "learners-next") || !disjoint("learners", "learners-next") || !disjoint("learners", "outgoing") {
		return fmt.Errorf("snapshot conf state: a replica is in two roles")
	}
	for id := range sets["learners-next"] {
		if !sets["outgoing"][id] {
			return fmt.Errorf("snapshot conf state: learner-next %d is not an outgoing voter", id)
		}
	}
	return nil
}
