package kv

import (
	"context"
	"errors"
	"fmt"
	"time"

	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/proto"

	"github.com/shoaldb/shoal/pb"
	"github.com/shoaldb/shoal/replica"
	"github.com/shoaldb/shoal/storage"
)

// forwardedKey marks a node-to-node call that was already forwarded once: the receiver serves it
// locally or answers NOT_LEADER, but never forwards again (no forwarding loops).
const forwardedKey = "x-shoal-forwarded"

func isForwarded(ctx context.Context) bool {
	return len(metadata.ValueFromIncomingContext(ctx, forwardedKey)) > 0
}

// errNoForward is what a remote closure returns for a request that was itself forwarded here: it is
// never forwarded again (no loops), and onLeader answers NOT_LEADER with a hint instead.
var errNoForward = errors.New("request already forwarded once")

// forwardedNotLeader answers a forwarded request for a range this node does not lead, with the leader
// it knows of as a hint, so the forwarding node goes there instead of probing.
func (s *Service) forwardedNotLeader(rangeID uint64) *pb.Error {
	var hint uint64
	if r := s.store.Replica(rangeID); r != nil {
		hint = r.LeaderNode()
	}
	if hint == 0 {
		hint = s.cluster.LeaderOf(rangeID)
	}
	if hint == s.nodeID {
		hint = 0
	}
	return &pb.Error{Code: pb.ErrorCode_NOT_LEADER, Message: fmt.Sprintf("node %d does not lead range %d", s.nodeID, rangeID), LeaderNodeId: hint}
}

func markForwarded(ctx context.Context) context.Context {
	return metadata.AppendToOutgoingContext(ctx, forwardedKey, "1")
}

// readSourceKey labels a scan job's reads on their way to the range's leader, so that its engine
// counts their blocks apart from the foreground's (storage.ReadJobs).
const readSourceKey = "x-shoal-read-source"

type jobReadKey struct{}

// readSourceNames are the values of readSourceKey on the wire.
var readSourceNames = map[storage.ReadSource]string{storage.ReadJobs: "jobs", storage.ReadPrefetch: "prefetch"}

// JobRead marks the reads made with ctx as a scan job's run (storage.ReadJobs), both when this node
// serves them and when they are forwarded to another.
func JobRead(ctx context.Context) context.Context { return markRead(ctx, storage.ReadJobs) }

// PrefetchRead marks the reads made with ctx as a scan job's prefetch (storage.ReadPrefetch: the
// disk's idle class), here and where they are forwarded.
func PrefetchRead(ctx context.Context) context.Context { return markRead(ctx, storage.ReadPrefetch) }

func markRead(ctx context.Context, src storage.ReadSource) context.Context {
	return metadata.AppendToOutgoingContext(context.WithValue(ctx, jobReadKey{}, src), readSourceKey, readSourceNames[src])
}

// readSource is whom a read made with ctx serves: a scan job's run or prefetch if JobRead or
// PrefetchRead marked it here or on the node that forwarded it (the last mark wins), else the
// foreground.
func readSource(ctx context.Context) storage.ReadSource {
	if v, ok := ctx.Value(jobReadKey{}).(storage.ReadSource); ok {
		return v
	}
	// One key, not the whole metadata copied (FromIncomingContext): this runs on every scan.
	if v := metadata.ValueFromIncomingContext(ctx, readSourceKey); len(v) > 0 {
		switch v[len(v)-1] {
		case readSourceNames[storage.ReadJobs]:
			return storage.ReadJobs
		case readSourceNames[storage.ReadPrefetch]:
			return storage.ReadPrefetch
		}
	}
	return storage.ReadForeground
}

// OnLeader runs local on this node's replica of rangeID if it leads the range; otherwise it calls
// remote on the node believed to lead it, following NOT_LEADER hints, with bounded backoff until ctx
// ends. remote returns the pb.Error of its response.
func (s *Service) OnLeader(ctx context.Context, rangeID uint64, local func(*replica.Replica) error,
	remote func(context.Context, pb.ShoalClient) (*pb.Error, error)) error {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
	}
	backoff := 20 * time.Millisecond
	var hint uint64
	var lastErr error
	tried := map[uint64]int{}
	for rounds := 0; ; rounds++ {
		r := s.store.Replica(rangeID)
		if r != nil && r.IsLeader() {
			err := local(r)
			if err == nil {
				return nil
			}
			lastErr = err
			pe := ToPBError(err)
			if pe.Code != pb.ErrorCode_NOT_LEADER && pe.Code != pb.ErrorCode_UNAVAILABLE {
				return err
			}
			hint = pe.LeaderNodeId
		} else {
			target := hint
			if target == 0 && r != nil {
				target = r.LeaderNode()
			}
			if target == 0 {
				target = s.cluster.LeaderOf(rangeID)
			}
			if target == 0 && rangeID == replica.MetaRangeID {
				target = s.cluster.MetaLeader()
			}
			if target == 0 || target == s.nodeID || tried[target] > 2 {
				target = s.pickProbeNode(tried)
			}
			hint = 0
			if target != 0 && target != s.nodeID {
				tried[target]++
				done, err, last, named := s.forward(ctx, rangeID, r, target, rounds, remote)
				if done {
					return err
				}
				if last != nil {
					lastErr, hint = last, named
				}
			} else if r != nil {
				// Nobody is known to lead: make sure this replica's group is campaigning.
				lastErr = errCode(pb.ErrorCode_UNAVAILABLE, fmt.Sprintf("range %d has no known leader", rangeID))
			}
			// A group whose members all lost track of the leader (e.g. a split's new range whose first
			// leader stepped down while its peers were quiesced) would otherwise wait for a tick-driven
			// election that quiesced members never start: campaign from here.
			if r != nil && r.LeaderNode() == 0 && rounds >= 2 {
				r.Campaign()
			}
		}
		select {
		case <-ctx.Done():
			return noLeaderReachable(ctx, rangeID, lastErr)
		case <-s.loops.Stopping():
			return errCode(pb.ErrorCode_UNAVAILABLE, "node stopping")
		case <-time.After(backoff):
		}
		if backoff < 500*time.Millisecond {
			backoff *= 2
		}
	}
}

// forward sends a request for range rangeID to node target once (r: this node's replica, nil for
// none; rounds: OnLeader's rounds so far). done says OnLeader returns err; otherwise last is the
// failure to remember (nil: no attempt was made) and hint the leader the answer named (0: none).
func (s *Service) forward(ctx context.Context, rangeID uint64, r *replica.Replica, target uint64, rounds int,
	remote func(context.Context, pb.ShoalClient) (*pb.Error, error)) (done bool, err, last error, hint uint64) {
	addr, ok := s.cluster.Resolve(target)
	if !ok {
		return false, nil, nil, 0
	}
	c, err := s.cluster.Client(addr)
	if err != nil {
		return false, nil, nil, 0
	}
	pe, err := remote(markForwarded(ctx), c)
	switch {
	case errors.Is(err, errNoForward):
		// This request was forwarded here already: answer it with what this node knows of the
		// leader rather than hold the forwarding node's call (after a few short rounds when no
		// leader is known, for a local election).
		if !(r != nil && r.LeaderNode() == 0 && rounds < 3) {
			return true, &pbError{s.forwardedNotLeader(rangeID)}, nil, 0
		}
		return false, nil, &pbError{s.forwardedNotLeader(rangeID)}, 0
	case err != nil:
		return false, nil, fmt.Errorf("node %d (%s): %w", target, addr, err), 0
	case pe == nil:
		if rangeID != replica.MetaRangeID {
			s.cluster.SetLeader(rangeID, target)
		}
		return true, nil, nil, 0
	case pe.Code == pb.ErrorCode_NOT_LEADER || pe.Code == pb.ErrorCode_UNAVAILABLE:
		return false, nil, &pbError{pe}, pe.LeaderNodeId
	default:
		return true, &pbError{pe}, nil, 0
	}
}

// noLeaderReachable is OnLeader's error once ctx ended with last the last failure (nil: none).
func noLeaderReachable(ctx context.Context, rangeID uint64, last error) error {
	if last == nil {
		last = ctx.Err()
	}
	var typed *pbError
	var re *replica.Error
	if errors.As(last, &typed) || errors.As(last, &re) {
		return fmt.Errorf("range %d: no leader reachable: %w", rangeID, last)
	}
	// A transport failure or our own deadline: nothing reached a leader, so the caller may retry
	// (INTERNAL would tell it a server bug happened and a write's outcome is unknown).
	return errCode(pb.ErrorCode_UNAVAILABLE, fmt.Sprintf("range %d: no leader reachable: %v", rangeID, last))
}

// pickProbeNode returns a live node other than this one, preferring those tried least.
func (s *Service) pickProbeNode(tried map[uint64]int) uint64 {
	best, bestN := uint64(0), 1<<30
	for _, id := range s.cluster.ProbeNodes() {
		if id == s.nodeID {
			continue
		}
		if tried[id] < bestN {
			best, bestN = id, tried[id]
		}
	}
	return best
}

// ProposeMeta runs cmd on the meta range's leader (locally or forwarded).
func (s *Service) ProposeMeta(ctx context.Context, cmd *pb.Command) (replica.Result, error) {
	var res replica.Result
	err := s.OnLeader(ctx, replica.MetaRangeID, func(r *replica.Replica) error {
		var err error
		res, err = r.Propose(ctx, proto.Clone(cmd).(*pb.Command))
		return err
	}, func(ctx context.Context, c pb.ShoalClient) (*pb.Error, error) {
		resp, err := c.MetaCommand(ctx, &pb.MetaCommandRequest{Command: cmd})
		if err != nil {
			return nil, err
		}
		res.Counter = resp.Counter
		return resp.Error, nil
	})
	return res, err
}

// ScanMeta reads [start, end) of the meta keyspace linearizably.
func (s *Service) ScanMeta(ctx context.Context, start, end []byte, limit int) ([]*pb.KeyValue, error) {
	var out []*pb.KeyValue
	err := s.OnLeader(ctx, replica.MetaRangeID, func(r *replica.Replica) error {
		if err := r.ReadBarrier(ctx); err != nil {
			return err
		}
		kvs, _, _, err := r.ScanFor(readSource(ctx), start, end, limit, 0, false)
		out = kvs
		return err
	}, func(ctx context.Context, c pb.ShoalClient) (*pb.Error, error) {
		resp, err := c.Scan(ctx, &pb.ScanRequest{Header: &pb.RequestHeader{RangeId: replica.MetaRangeID}, Start: start, End: end, Limit: int64(limit)})
		if err != nil {
			return nil, err
		}
		out = resp.Kvs
		return resp.Error, nil
	})
	return out, err
}

// LookupRange returns the descriptor of the user range containing key, from the meta range.
func (s *Service) LookupRange(ctx context.Context, key []byte) (*pb.RangeDescriptor, error) {
	start := append(replica.MetaLookupKey(key), 0)
	_, end := replica.MetaDescSpan()
	kvs, err := s.ScanMeta(ctx, start, end, 1)
	if err != nil {
		return nil, err
	}
	if len(kvs) == 0 {
		return nil, errCode(pb.ErrorCode_UNAVAILABLE, fmt.Sprintf("meta range has no descriptor for key %q", key))
	}
	d := &pb.RangeDescriptor{}
	if err := proto.Unmarshal(kvs[0].Value, d); err != nil {
		return nil, fmt.Errorf("meta: decode descriptor: %w", err)
	}
	if string(d.StartKey) > string(key) {
		// A split's meta update is in flight (or being repaired): the caller retries.
		return nil, errCode(pb.ErrorCode_UNAVAILABLE, fmt.Sprintf("meta range is being updated around key %q", key))
	}
	return d, nil
}

// AllRanges returns every user range descriptor from the meta range.
func (s *Service) AllRanges(ctx context.Context) ([]*pb.RangeDescriptor, error) {
	start, end := replica.MetaDescSpan()
	kvs, err := s.ScanMeta(ctx, start, end, 0)
	if err != nil {
		return nil, err
	}
	out := make([]*pb.RangeDescriptor, 0, len(kvs)+1)
	for _, kv := range kvs {
		d := &pb.RangeDescriptor{}
		if err := proto.Unmarshal(kv.Value, d); err != nil {
			return nil, fmt.Errorf("meta: decode descriptor: %w", err)
		}
		out = append(out, d)
	}
	return out, nil
}

// MetaDesc returns this node's best view of the meta range descriptor.
func (s *Service) MetaDesc() *pb.RangeDescriptor {
	if r := s.store.Replica(replica.MetaRangeID); r != nil {
		return r.Desc()
	}
	return s.cluster.MetaDesc()
}
