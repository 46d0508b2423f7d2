package stream

import (
	"bytes"
	"context"
	"fmt"
	"hash/fnv"
	"sort"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	"github.com/shoaldb/shoal/pb"
)

// routeEntry is a range as the producer last saw it, and its leader's address.
type routeEntry struct {
	start, end []byte
	leader     string
}

// routeCache maps keys to their range's leader, refreshed as the client's range cache is: a
// NOT_LEADER answer names the new leader, a RANGE_MOVED drops the entry.
type routeCache struct {
	mu      sync.Mutex
	entries []*routeEntry // by start key
}

// leader is the cached leader address of key's range ("" if none). It copies the address under
// the lock: setLeader changes an entry in place while other senders read it.
func (rc *routeCache) leader(key []byte) string {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	i := sort.Search(len(rc.entries), func(i int) bool { return bytes.Compare(rc.entries[i].start, key) > 0 }) - 1
	if i < 0 {
		return ""
	}
	e := rc.entries[i]
	if len(e.end) != 0 && bytes.Compare(key, e.end) >= 0 {
		return ""
	}
	return e.leader
}

// insert adds e, dropping the entries it overlaps (older views of a split or merge).
func (rc *routeCache) insert(e *routeEntry) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	kept := rc.entries[:0:0]
	for _, o := range rc.entries {
		if (len(e.end) == 0 || bytes.Compare(o.start, e.end) < 0) && (len(o.end) == 0 || bytes.Compare(e.start, o.end) < 0) {
			continue
		}
		kept = append(kept, o)
	}
	kept = append(kept, e)
	sort.Slice(kept, func(i, j int) bool { return bytes.Compare(kept[i].start, kept[j].start) < 0 })
	rc.entries = kept
}

func (rc *routeCache) evict(key []byte) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	for i, e := range rc.entries {
		if bytes.Compare(e.start, key) <= 0 && (len(e.end) == 0 || bytes.Compare(key, e.end) < 0) {
			rc.entries = append(rc.entries[:i], rc.entries[i+1:]...)
			return
		}
	}
}

func (rc *routeCache) setLeader(key []byte, addr string) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	for _, e := range rc.entries {
		if bytes.Compare(e.start, key) <= 0 && (len(e.end) == 0 || bytes.Compare(key, e.end) < 0) {
			e.leader = addr
		}
	}
}

// leaderOf returns the address of the node leading key's range, looking it up when not cached.
func (in *Ingester) leaderOf(ctx context.Context, key []byte) (string, error) {
	if l := in.routes.leader(key); l != "" {
		return l, nil
	}
	resp, err := in.cfg.Client.Lookup(ctx, key)
	if err != nil {
		return "", fmt.Errorf("look up the range of %q: %w", key, err)
	}
	e := &routeEntry{start: resp.GetRange().GetStartKey(), end: resp.GetRange().GetEndKey()}
	for _, n := range resp.GetNodes() {
		if n.GetNodeId() == resp.GetLeaderNodeId() || e.leader == "" {
			e.leader = n.GetAddr() // the leader, or (none known) a replica that names it
		}
	}
	if e.leader == "" {
		return "", fmt.Errorf("range of %q: no replica address", key)
	}
	leader := e.leader // e is shared once inserted
	in.routes.insert(e)
	return leader, nil
}

// nodeFor returns the unaligned target of key: a hash of the key among the live nodes.
func (in *Ingester) nodeFor(ctx context.Context, key []byte) (string, error) {
	in.mu.Lock()
	nodes := in.nodes
	in.mu.Unlock()
	if len(nodes) == 0 {
		st, err := in.cfg.Client.Nodes(ctx)
		if err != nil {
			return "", fmt.Errorf("list nodes: %w", err)
		}
		sort.Slice(st, func(i, j int) bool { return st[i].GetDesc().GetNodeId() < st[j].GetDesc().GetNodeId() })
		for _, n := range st {
			if n.GetLive() {
				nodes = append(nodes, n.GetDesc().GetAddr())
			}
		}
		if len(nodes) == 0 {
			return "", fmt.Errorf("no live node")
		}
		in.mu.Lock()
		in.nodes = nodes
		in.mu.Unlock()
	}
	h := fnv.New64a()
	h.Write(key)
	return nodes[h.Sum64()%uint64(len(nodes))], nil
}

// group sorts the pending events by target node.
func (in *Ingester) group(ctx context.Context, evs []Event, pending []int) (map[string][]int, error) {
	groups := map[string][]int{}
	for _, i := range pending {
		var addr string
		var err error
		if in.cfg.Mode == Unaligned {
			addr, err = in.nodeFor(ctx, evs[i].Key)
		} else {
			addr, err = in.leaderOf(ctx, evs[i].Key)
		}
		if err != nil {
			return nil, err
		}
		groups[addr] = append(groups[addr], i)
	}
	return groups, nil
}

func (in *Ingester) conn(addr string) (pb.StreamsClient, error) {
	in.mu.Lock()
	defer in.mu.Unlock()
	c, ok := in.conns[addr]
	if !ok {
		var err error
		if c, err = grpc.NewClient(addr, in.cfg.DialOptions...); err != nil {
			return nil, fmt.Errorf("dial %s: %w", addr, err)
		}
		in.conns[addr] = c
	}
	return pb.NewStreamsClient(c), nil
}

// sendTo sends events idx to addr in batches, records their acks and returns those to send again.
func (in *Ingester) sendTo(ctx context.Context, addr string, evs []Event, idx []int, acks []Ack) ([]int, error) {
	sc, err := in.conn(addr)
	if err != nil {
		return idx, err
	}
	if in.cfg.AuthToken != "" {
		ctx = metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+in.cfg.AuthToken)
	}
	var retry []int
	for len(idx) > 0 {
		n := min(len(idx), in.cfg.MaxBatch)
		batch := idx[:n]
		idx = idx[n:]
		// Placed events are applied where they land: a node answers them without checking that it
		// leads their range, so their routes are never corrected (no NOT_LEADER, no RANGE_MOVED).
		req := &pb.IngestRequest{Job: in.job.Name, Unaligned: in.cfg.Mode != Aligned}
		for _, i := range batch {
			req.Events = append(req.Events, &pb.StreamEvent{Key: evs[i].Key, Position: evs[i].Position, Value: evs[i].Value})
		}
		cctx, cancel := context.WithTimeout(ctx, in.cfg.CallTimeout)
		resp, err := sc.Ingest(cctx, req)
		cancel()
		if err == nil && resp.GetError() != nil {
			err = fmt.Errorf("node %s: %s", addr, resp.GetError().GetMessage())
		}
		if err == nil && len(resp.GetResults()) != len(batch) {
			err = fmt.Errorf("node %s answered %d results for %d events", addr, len(resp.GetResults()), len(batch))
		}
		if err != nil {
			// Sent or not, a replay is harmless: look the routes up again and resend.
			in.forget(evs, batch)
			return append(append(retry, batch...), idx...), fmt.Errorf("ingest at %s: %w", addr, err)
		}
		retry = append(retry, in.record(evs, batch, resp.GetResults(), acks)...)
	}
	return retry, nil
}

// record stores the acks of a batch and returns the events to send again, updating the routes.
func (in *Ingester) record(evs []Event, batch []int, res []*pb.IngestResult, acks []Ack) []int {
	var retry []int
	for j, i := range batch {
		r := res[j]
		switch r.GetStatus() {
		case pb.IngestResult_RETRY:
			retry = append(retry, i)
			switch e := r.GetError(); e.GetCode() {
			case pb.ErrorCode_NOT_LEADER:
				if e.GetLeaderAddr() != "" {
					in.routes.setLeader(evs[i].Key, e.GetLeaderAddr())
				} else {
					in.routes.evict(evs[i].Key)
				}
			case pb.ErrorCode_RANGE_MOVED:
				in.routes.evict(evs[i].Key)
			}
		default:
			acks[i] = Ack{Key: evs[i].Key, Position: evs[i].Position, Status: r.GetStatus(), Output: r.GetOutput(), Err: r.GetError().GetMessage()}
		}
	}
	return retry
}

// forget drops what the producer knew of the events' routes and of the nodes (after a failed call).
func (in *Ingester) forget(evs []Event, batch []int) {
	for _, i := range batch {
		in.routes.evict(evs[i].Key)
	}
	in.mu.Lock()
	in.nodes = nil
	in.mu.Unlock()
}
