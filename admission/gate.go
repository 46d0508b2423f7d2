// Package admission owns a node's admission gates: bounds on the count and bytes of work a node
// holds on behalf of clients. A gate admits or refuses at once. It never queues (a queue is the very
// memory it exists to bound) and never decides what counts as work: its callers do.
package admission

import (
	"fmt"
	"sync/atomic"
)

// Limits bound a gate. Zero means unlimited.
type Limits struct {
	// Count is the most pieces of work in flight.
	Count int64
	// Bytes is the most bytes in flight.
	Bytes int64
}

// Gate counts work in flight against Limits. Safe for concurrent use; the zero value is not usable.
type Gate struct {
	name   string
	limits Limits

	count, bytes       atomic.Int64
	admitted, refused  atomic.Uint64
	peakCount, peakByt atomic.Int64
}

// NewGate returns a gate named name (it appears in refusals and metrics).
func NewGate(name string, l Limits) *Gate {
	return &Gate{name: name, limits: l}
}

// Refusal says why a gate refused: which bound and how full it was.
type Refusal struct {
	Gate          string
	Count, Bytes  int64 // in flight when refused
	Limits        Limits
	RequestedSize int64
}

func (r *Refusal) Error() string {
	return fmt.Sprintf("node overloaded: %d %s in flight (%d bytes; limits %d and %d bytes); retry with backoff",
		r.Count, r.Gate, r.Bytes, r.Limits.Count, r.Limits.Bytes)
}

// TryAcquire admits one piece of work of size bytes, or refuses it. An admitted piece must be
// given back with Release(size) exactly once. A piece bigger than the byte limit on its own is
// admitted when nothing else is in flight, so that a legal but large request is never refused forever.
func (g *Gate) TryAcquire(size int64) *Refusal {
	c := g.count.Add(1)
	b := g.bytes.Add(size)
	overCount := g.limits.Count > 0 && c > g.limits.Count
	overBytes := g.limits.Bytes > 0 && b > g.limits.Bytes && c > 1
	if overCount || overBytes {
		g.count.Add(-1)
		g.bytes.Add(-size)
		g.refused.Add(1)
		return &Refusal{Gate: g.name, Count: c - 1, Bytes: b - size, Limits: g.limits, RequestedSize: size}
	}
	g.admitted.Add(1)
	raise(&g.peakCount, c)
	raise(&g.peakByt, b)
	return nil
}

// Grow adds size bytes to work already admitted (a scan's result once read). It never refuses:
// the work is done already, and refusing now would only waste it. Release then takes the admitted
// size plus everything grown.
func (g *Gate) Grow(size int64) {
	raise(&g.peakByt, g.bytes.Add(size))
}

// Release gives back one admitted piece of work of size bytes (its admitted size plus any Grow).
func (g *Gate) Release(size int64) {
	g.count.Add(-1)
	g.bytes.Add(-size)
}

func raise(peak *atomic.Int64, v int64) {
	for {
		p := peak.Load()
		if v <= p || peak.CompareAndSwap(p, v) {
			return
		}
	}
}

// Stats is a reading of a gate.
type Stats struct {
	Name                string
	Limits              Limits
	InFlight, Bytes     int64
	PeakCount, PeakByte int64 // the highest in flight since the gate was made
	Admitted, Refused   uint64
}

// Stats reads the gate's counters.
func (g *Gate) Stats() Stats {
	return Stats{Name: g.name, Limits: g.limits, InFlight: g.count.Load(), Bytes: g.bytes.Load(),
		PeakCount: g.peakCount.Load(), PeakByte: g.peakByt.Load(), Admitted: g.admitted.Load(), Refused: g.refused.Load()}
}
