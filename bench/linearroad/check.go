package linearroad

import (
	"bytes"
	"context"
	"fmt"

	"github.com/shoaldb/shoal/pb"
	"github.com/shoaldb/shoal/stream"
)

// Check is the exactly-once checker's verdict over every event of a run (warm-up included). Each
// producer keeps, for the segments it owns, a model of the segment's statistics advanced by each
// acknowledged event in position order: an APPLIED event's output (its toll notification) must be
// the model's, and at the end each segment's stored position and statistics must be the model's
// after the acknowledged events and a prefix of those sent but not acknowledged when the run ended.
// An event lost or applied twice changes the stored report count (and the rest) from the model's.
type Check struct {
	Keys         int    `json:"keys"`
	Acknowledged uint64 `json:"acknowledged"`
	// Duplicates were answered DUPLICATE: applied before, their first answer lost (no output).
	Duplicates uint64 `json:"duplicates"`
	// Outputs are the APPLIED events whose outputs were compared with the model's.
	Outputs uint64 `json:"outputs_checked"`
	// InFlight were sent but not acknowledged when the run ended; InFlightApplied of them were
	// found applied in the state.
	InFlight        uint64 `json:"in_flight"`
	InFlightApplied uint64 `json:"in_flight_applied"`
	Violations      int    `json:"violations"`
	First           string `json:"first_violation,omitempty"`
	OK              bool   `json:"ok"`
}

// keyCheck is one segment's expectation.
type keyCheck struct {
	acked uint64   // events 1..acked are acknowledged
	model Segment  // the statistics after them
	tail  []Report // events after acked sent but never acknowledged
}

// checker holds the keys of one producer; it is used by that producer only, then merged.
type checker struct {
	keys map[string]*keyCheck
	Check
}

func newChecker() *checker { return &checker{keys: map[string]*keyCheck{}} }

func (c *checker) violate(format string, args ...any) {
	if c.Violations == 0 {
		c.First = fmt.Sprintf(format, args...)
	}
	c.Violations++
}

// record takes a sent batch: its events, their reports and the acknowledgements (an unacknowledged
// event's is zero, without a key).
func (c *checker) record(evs []stream.Event, reps []Report, acks []stream.Ack) {
	for i, ev := range evs {
		k := c.keys[string(ev.Key)]
		if k == nil {
			k = &keyCheck{}
			c.keys[string(ev.Key)] = k
		}
		a := acks[i]
		if a.Key == nil {
			k.tail = append(k.tail, reps[i])
			c.InFlight++
			continue
		}
		if len(k.tail) > 0 || a.Position != k.acked+1 || ev.Position != a.Position {
			c.violate("key %q: event %d acknowledged after %d (%d not acknowledged)", ev.Key, a.Position, k.acked, len(k.tail))
		}
		k.acked = a.Position
		want := k.model.step(reps[i])
		c.Acknowledged++
		switch a.Status {
		case pb.IngestResult_APPLIED:
			c.Outputs++
			if !bytes.Equal(a.Output, want) {
				c.violate("key %q event %d: output %x, the model's %x", ev.Key, a.Position, a.Output, want)
			}
		case pb.IngestResult_DUPLICATE:
			c.Duplicates++
		default:
			c.violate("key %q event %d: %s %s", ev.Key, a.Position, a.Status, a.Err)
		}
	}
}

// merge adds another producer's keys (disjoint from c's).
func (c *checker) merge(o *checker) {
	for k, v := range o.keys {
		c.keys[k] = v
	}
	c.Acknowledged += o.Acknowledged
	c.Duplicates += o.Duplicates
	c.Outputs += o.Outputs
	c.InFlight += o.InFlight
	if o.Violations > 0 && c.Violations == 0 {
		c.First = o.First
	}
	c.Violations += o.Violations
}

// getter reads a key's stored value.
type getter func(ctx context.Context, key []byte) (raw []byte, found bool, err error)

// verify reads every key's state with get and compares it with the model.
func (c *checker) verify(ctx context.Context, get getter) (Check, error) {
	for key, k := range c.keys {
		raw, found, err := get(ctx, []byte(key))
		if err != nil {
			return c.Check, fmt.Errorf("read segment %q: %w", key, err)
		}
		var pos uint64
		var data []byte
		if found {
			if pos, data, _, err = stream.DecodeValue(raw); err != nil {
				return c.Check, fmt.Errorf("segment %q: %w", key, err)
			}
		}
		if pos < k.acked || pos > k.acked+uint64(len(k.tail)) {
			c.violate("key %q: stored position %d, acknowledged %d, %d more sent", key, pos, k.acked, len(k.tail))
			continue
		}
		if pos == 0 {
			continue // nothing applied yet
		}
		for _, r := range k.tail[:pos-k.acked] {
			k.model.step(r)
		}
		c.InFlightApplied += pos - k.acked
		if want := k.model.encode(); !bytes.Equal(data, want) {
			got, _ := decodeSegment(data)
			c.violate("key %q at position %d: %d reports, %d in tolls stored; the model: %d, %d", key, pos,
				got.TotalCount, got.Tolls, k.model.TotalCount, k.model.Tolls)
		}
	}
	c.Keys = len(c.keys)
	c.OK = c.Violations == 0 && c.Keys > 0
	return c.Check, nil
}
