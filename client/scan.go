package client

import (
	"bytes"
	"context"
	"fmt"

	"github.com/shoaldb/shoal/pb"
)

// Scan returns the key-value pairs with start <= key < end in key order (descending with reverse), at
// most limit of them (0: no limit). An empty end means +inf and an empty start -inf. The scan crosses
// range boundaries: each range is read linearizably on its own, one after another, so the result is not
// a snapshot of the whole span.
func (c *Client) Scan(ctx context.Context, start, end []byte, limit int, reverse bool) ([]*pb.KeyValue, error) {
	return c.ScanWith(ctx, start, end, limit, reverse)
}

// ScanWith is Scan with read options (ReplicaRead, BoundedStaleness, FollowerRead), which choose
// the replicas that may serve each range as for Get.
func (c *Client) ScanWith(ctx context.Context, start, end []byte, limit int, reverse bool, opts ...ReadOption) ([]*pb.KeyValue, error) {
	if limit < 0 {
		return nil, invalid(fmt.Sprintf("scan: limit %d is negative", limit))
	}
	if len(end) > 0 {
		switch bytes.Compare(start, end) {
		case 1:
			return nil, invalid(fmt.Sprintf("scan: start %q is after end %q", start, end))
		case 0:
			return []*pb.KeyValue{}, nil
		}
	}
	var ro readOptions
	for _, o := range opts {
		o(&ro)
	}
	s := &scanner{c: c, start: start, end: end, limit: limit, out: []*pb.KeyValue{}, op: ro.op("scan")}
	if reverse {
		return s.reverse(ctx)
	}
	return s.forward(ctx)
}

// scanner walks a scan's span range by range.
type scanner struct {
	c          *Client
	start, end []byte
	limit      int
	out        []*pb.KeyValue
	op         opKind
}

// remaining is the limit to send with the next request (0: none).
func (s *scanner) remaining() int64 {
	if s.limit == 0 {
		return 0
	}
	return int64(s.limit - len(s.out))
}

func (s *scanner) full() bool { return s.limit > 0 && len(s.out) >= s.limit }

// minEnd returns the smaller of two exclusive end keys, where empty is +inf.
func minEnd(a, b []byte) []byte {
	switch {
	case len(a) == 0:
		return b
	case len(b) == 0:
		return a
	case bytes.Compare(a, b) <= 0:
		return a
	default:
		return b
	}
}

// maxStart returns the larger of two start keys.
func maxStart(a, b []byte) []byte {
	if bytes.Compare(a, b) >= 0 {
		return a
	}
	return b
}

// step reads one range: the one locate finds, with the request build makes. It returns the response
// and the descriptor of the range that served it.
func (s *scanner) step(ctx context.Context, locate locateFunc, build func(e rangeEntry) *pb.ScanRequest) (*pb.ScanResponse, *pb.ScanRequest, *pb.RangeDescriptor, error) {
	var (
		resp   *pb.ScanResponse
		req    *pb.ScanRequest
		routed *pb.RangeDescriptor
	)
	err := s.c.run(ctx, s.op, locate, "",
		func(ctx context.Context, sc pb.ShoalClient, hdr *pb.RequestHeader, t target) (*pb.Error, error) {
			req = build(t.entry)
			req.Header = hdr
			routed = t.entry.desc
			r, err := sc.Scan(ctx, req)
			resp = r
			return r.GetError(), err
		})
	if err != nil {
		return nil, nil, nil, err
	}
	served := resp.GetRange()
	if served == nil || served.GetRangeId() == 0 {
		served = routed
	}
	return resp, req, served, nil
}

// redo records that the range that served a step does not match the routing, so that the step is
// repeated with a fresh view (the caller drops the stale entry). It bounds the repeats by MaxAttempts.
func (s *scanner) redo(served *pb.RangeDescriptor, redos *int) error {
	*redos++
	if *redos > s.c.cfg.MaxAttempts {
		return newError(pb.ErrorCode_RANGE_MOVED, fmt.Sprintf("scan: range %s answered for a span it does not hold, %d times", spanString(served), *redos), nil)
	}
	s.c.cache.insert(served, 0, nil)
	return nil
}

// keep adds the pairs of resp to the result, up to the limit. For a truncated answer it returns the
// key of the last pair, where the next step goes on; an answer truncated without a pair is an error.
func (s *scanner) keep(resp *pb.ScanResponse, served *pb.RangeDescriptor) (last []byte, truncated bool, err error) {
	kvs := resp.GetKvs()
	if s.limit > 0 && len(kvs) > int(s.remaining()) {
		kvs = kvs[:s.remaining()]
	}
	s.out = append(s.out, kvs...)
	if !resp.GetTruncated() {
		return nil, false, nil
	}
	if len(kvs) == 0 {
		return nil, false, newError(pb.ErrorCode_INTERNAL, fmt.Sprintf("scan: range %s truncated its answer without returning a key", spanString(served)), nil)
	}
	return kvs[len(kvs)-1].GetKey(), true, nil
}

func (s *scanner) forward(ctx context.Context) ([]*pb.KeyValue, error) {
	cur := s.start
	redos := 0
	for !s.full() && (len(s.end) == 0 || bytes.Compare(cur, s.end) < 0) {
		from := cur
		resp, req, served, err := s.step(ctx,
			func(ctx context.Context) (rangeEntry, error) { return s.c.locate(ctx, from) },
			func(e rangeEntry) *pb.ScanRequest {
				return &pb.ScanRequest{Start: from, End: minEnd(s.end, e.desc.GetEndKey()), Limit: s.remaining()}
			})
		if err != nil {
			return nil, err
		}
		if !contains(served, from) {
			// A lenient server served some other range: refresh and read this part again.
			if err := s.redo(served, &redos); err != nil {
				return nil, err
			}
			if e, ok := s.c.cache.get(from); ok && e.desc != served {
				s.c.cache.evict(e.desc)
			}
			continue
		}
		last, truncated, err := s.keep(resp, served)
		if err != nil {
			return nil, err
		}
		if truncated {
			if bytes.Compare(last, from) < 0 {
				return nil, newError(pb.ErrorCode_INTERNAL, fmt.Sprintf("scan: range %s returned key %q before the scan position %q", spanString(served), last, from), nil)
			}
			cur = append(append(make([]byte, 0, len(last)+1), last...), 0) // the key right after last
			continue
		}
		next := minEnd(req.GetEnd(), served.GetEndKey())
		if len(next) == 0 {
			break // served through +inf
		}
		cur = next
	}
	return s.out, nil
}

func (s *scanner) reverse(ctx context.Context) ([]*pb.KeyValue, error) {
	cur := s.end // exclusive upper bound of what is left; empty: +inf
	redos := 0
	for !s.full() && (len(cur) == 0 || bytes.Compare(cur, s.start) > 0) {
		upto := cur
		resp, req, served, err := s.step(ctx,
			func(ctx context.Context) (rangeEntry, error) { return s.c.locateBefore(ctx, s.start, upto) },
			func(e rangeEntry) *pb.ScanRequest {
				return &pb.ScanRequest{Start: maxStart(s.start, e.desc.GetStartKey()), End: upto, Limit: s.remaining(), Reverse: true}
			})
		if err != nil {
			return nil, err
		}
		// served must hold the keys just below upto: start < upto <= end.
		holds := (len(upto) == 0 || bytes.Compare(served.GetStartKey(), upto) < 0) &&
			(len(served.GetEndKey()) == 0 || (len(upto) > 0 && bytes.Compare(upto, served.GetEndKey()) <= 0))
		if !holds {
			if err := s.redo(served, &redos); err != nil {
				return nil, err
			}
			if e, ok := s.c.cache.getBefore(upto); ok && e.desc != served {
				s.c.cache.evict(e.desc)
			}
			continue
		}
		smallest, truncated, err := s.keep(resp, served)
		if err != nil {
			return nil, err
		}
		if truncated {
			if len(upto) > 0 && bytes.Compare(smallest, upto) >= 0 {
				return nil, newError(pb.ErrorCode_INTERNAL, fmt.Sprintf("scan: range %s returned key %q at or after the reverse scan position %q", spanString(served), smallest, upto), nil)
			}
			cur = smallest // continue below it
			continue
		}
		next := maxStart(req.GetStart(), served.GetStartKey())
		if bytes.Compare(next, s.start) <= 0 {
			break
		}
		cur = next
	}
	return s.out, nil
}
