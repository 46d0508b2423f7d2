package client

import (
	"bytes"
	"context"
	"fmt"

	"github.com/shoaldb/shoal/pb"
)

// FenceSpan sets (or, with retired, retires) span fence id over [start, end) on every range the
// span covers (pb.SpanFence): writes there wait until LiftFence, or fail with ErrSpanRetired once
// retired. It returns, per range, the raft index at which the fence applied: no write to the span
// applies after it there. Writes carrying the fence id (WithFenceOwner) pass.
func (c *Client) FenceSpan(ctx context.Context, start, end []byte, id uint64, retired bool) (map[uint64]uint64, error) {
	return c.fenceRanges(ctx, start, end, &pb.SpanFence{StartKey: start, EndKey: end, Id: id, Retired: retired}, false)
}

// LiftFence removes fence id from every range over [start, end); held writes go ahead.
func (c *Client) LiftFence(ctx context.Context, start, end []byte, id uint64) error {
	_, err := c.fenceRanges(ctx, start, end, &pb.SpanFence{StartKey: start, EndKey: end, Id: id}, true)
	return err
}

// fenceRanges sends the fence to the range holding each part of [start, end) in turn.
func (c *Client) fenceRanges(ctx context.Context, start, end []byte, f *pb.SpanFence, lift bool) (map[uint64]uint64, error) {
	if f.Id == 0 {
		return nil, invalid("fence: the id must not be 0")
	}
	if len(start) == 0 || len(end) > 0 && bytes.Compare(start, end) >= 0 {
		return nil, invalid(fmt.Sprintf("fence: span [%q, %q) is empty or starts at the first key", start, end))
	}
	out := map[uint64]uint64{}
	key := start
	for {
		var resp *pb.FenceResponse
		err := c.run(ctx, opKind{name: "fence"}, c.locator(key), "", // idempotent: retried when its outcome is unknown
			func(ctx context.Context, sc pb.ShoalClient, _ *pb.RequestHeader, _ target) (*pb.Error, error) {
				r, err := sc.Fence(ctx, &pb.FenceRequest{Key: key, Fence: f, Lift: lift})
				resp = r
				return r.GetError(), err
			})
		if err != nil {
			return out, err
		}
		d := resp.GetRange()
		out[d.GetRangeId()] = resp.GetIndex()
		if len(d.GetEndKey()) == 0 || len(end) > 0 && bytes.Compare(d.GetEndKey(), end) >= 0 {
			return out, nil
		}
		key = d.GetEndKey()
	}
}
