// Package linearroad is a Linear-Road-style stream job and its benchmark (Papaioannou's thesis,
// ch. 5 §5.3, after Arasu et al.'s Linear Road): vehicles on expressways send position reports; each
// segment's task keeps the segment's statistics (vehicles and average speed per minute, stopped
// vehicles and accidents, tolls assessed) as Shoal state, and answers a report that enters the
// segment with a toll notification. The statistics table is the thesis's Table 5.1 "segment stats",
// partitioned by segment like the stream: aligned, every access is local.
//
// Scaled down from the benchmark: a vehicle's previous segment (the VehicleStatus operator's
// ephemeral state) is kept by the generator, which marks a report that crosses into a new segment;
// accidents count only in the report's own segment (not the four downstream); account balances and
// historical queries are not built. The package owns the job, the generator and the run; it never
// changes the cluster's placement beyond the splits and leaderships its set-up asks for.
package linearroad

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"

	"github.com/shoaldb/shoal/stream"
)

// JobName is the job's name in the stream registry.
const JobName = "linear-road"

// SegPrefix is the segment statistics' span: SegPrefix + "XXDSSS" (expressway, direction, segment).
const SegPrefix = "/s/lr/seg/"

// Report is a vehicle's position report.
type Report struct {
	Vehicle  uint32
	Xway     uint8
	Dir      uint8
	Seg      uint8
	Pos      uint32 // feet from the expressway's start
	Speed    uint8  // miles per hour
	Minute   uint32 // simulated minute
	Crossing bool   // the vehicle's first report in this segment
}

// Encode is the report's wire form (an event's payload).
func (r Report) Encode() []byte {
	b := make([]byte, 0, 20)
	b = binary.AppendUvarint(b, uint64(r.Vehicle))
	b = append(b, r.Xway, r.Dir, r.Seg, r.Speed)
	b = binary.AppendUvarint(b, uint64(r.Pos))
	b = binary.AppendUvarint(b, uint64(r.Minute))
	if r.Crossing {
		return append(b, 1)
	}
	return append(b, 0)
}

// DecodeReport reads a report's wire form.
func DecodeReport(b []byte) (Report, error) {
	var r Report
	d := decoder{b: b}
	r.Vehicle = uint32(d.uvarint())
	r.Xway, r.Dir, r.Seg, r.Speed = d.byte(), d.byte(), d.byte(), d.byte()
	r.Pos = uint32(d.uvarint())
	r.Minute = uint32(d.uvarint())
	r.Crossing = d.byte() == 1
	if d.err != nil || len(d.b) != 0 {
		return r, errors.New("malformed position report")
	}
	return r, nil
}

// SegmentKey is the state key of a segment.
func SegmentKey(xway, dir, seg uint8) []byte {
	return fmt.Appendf([]byte(SegPrefix), "%02d%d%03d", xway, dir, seg)
}

// Job is the Linear-Road-style job: key = the report's segment; output = a toll notification
// (vehicle, toll) for a report entering the segment, none otherwise.
var Job = &stream.Job{
	Name:  JobName,
	Start: []byte(SegPrefix),
	End:   []byte("/s/lr/seg0"),
	Key: func(v []byte) ([]byte, error) {
		r, err := DecodeReport(v)
		if err != nil {
			return nil, err
		}
		return SegmentKey(r.Xway, r.Dir, r.Seg), nil
	},
	Handle: handle,
}

func init() { stream.Register(Job) }

// Toll is the variable toll of Linear Road: 2·(cars − 50)² when the segment's last minute averaged
// under 40 mph with over 50 vehicles and no accident, else 0.
func Toll(prevCars, prevAvgSpeed uint32, accident bool) uint32 {
	if prevAvgSpeed >= 40 || prevCars <= 50 || accident {
		return 0
	}
	return 2 * (prevCars - 50) * (prevCars - 50)
}

func handle(ctx context.Context, s *stream.State, e stream.Event) ([]byte, error) {
	r, err := DecodeReport(e.Value)
	if err != nil {
		return nil, stream.Refuse(err)
	}
	raw, _, err := s.Get(ctx, e.Key)
	if err != nil {
		return nil, err
	}
	st, err := decodeSegment(raw)
	if err != nil {
		return nil, stream.Refuse(fmt.Errorf("segment %q: %w", e.Key, err))
	}
	out := st.step(r)
	s.Put(e.Key, st.encode())
	return out, nil
}

// step applies a report to its segment's statistics and returns the event's output: a toll
// notification (vehicle, toll) for a report entering the segment, none otherwise.
func (st *Segment) step(r Report) []byte {
	st.observe(r)
	if !r.Crossing {
		return nil
	}
	toll := Toll(st.PrevCars, st.PrevAvg, st.Accident)
	st.Tolls += uint64(toll)
	return binary.AppendUvarint(binary.AppendUvarint(nil, uint64(r.Vehicle)), uint64(toll))
}

// Segment is a segment's statistics as stored.
type Segment struct {
	Minute     uint32
	Cars       []uint32 // distinct vehicles reporting this minute, sorted
	SpeedSum   uint64
	Reports    uint32
	PrevCars   uint32 // last minute's distinct vehicles
	PrevAvg    uint32 // last minute's average speed, mph
	Stopped    []stop // vehicles whose last reports had speed 0
	Accident   bool
	Tolls      uint64 // tolls assessed so far
	Accidents  uint32 // accidents detected so far
	TotalCount uint64 // reports so far
}

type stop struct {
	vehicle, pos, repeats uint32
}

// observe adds a report: the minute's statistics roll over first; a vehicle reporting the same
// position four times with speed 0 is stopped, two stopped at one position are an accident, which
// clears when none is stopped any more.
func (st *Segment) observe(r Report) {
	if r.Minute > st.Minute {
		st.PrevCars, st.PrevAvg = 0, 0
		if r.Minute == st.Minute+1 {
			st.PrevCars = uint32(len(st.Cars))
			if st.Reports > 0 {
				st.PrevAvg = uint32(st.SpeedSum / uint64(st.Reports))
			}
		}
		st.Minute, st.Cars, st.SpeedSum, st.Reports = r.Minute, st.Cars[:0], 0, 0
	}
	if i, found := slices.BinarySearch(st.Cars, r.Vehicle); !found {
		st.Cars = slices.Insert(st.Cars, i, r.Vehicle)
	}
	st.SpeedSum += uint64(r.Speed)
	st.Reports++
	st.TotalCount++
	i := slices.IndexFunc(st.Stopped, func(s stop) bool { return s.vehicle == r.Vehicle })
	switch {
	case r.Speed > 0 && i >= 0:
		st.Stopped = slices.Delete(st.Stopped, i, i+1)
	case r.Speed == 0 && i >= 0 && st.Stopped[i].pos == r.Pos:
		st.Stopped[i].repeats++
	case r.Speed == 0 && i >= 0:
		st.Stopped[i] = stop{r.Vehicle, r.Pos, 1}
	case r.Speed == 0:
		st.Stopped = append(st.Stopped, stop{r.Vehicle, r.Pos, 1})
	}
	st.Accident = st.accident()
	if st.Accident && r.Speed == 0 && i >= 0 && st.Stopped[i].repeats == 4 {
		st.Accidents++
	}
}

// accident: two vehicles stopped (four reports) at one position.
func (st *Segment) accident() bool {
	for i, a := range st.Stopped {
		for _, b := range st.Stopped[i+1:] {
			if a.repeats >= 4 && b.repeats >= 4 && a.pos == b.pos {
				return true
			}
		}
	}
	return false
}

func (st *Segment) encode() []byte {
	b := make([]byte, 0, 32+3*len(st.Cars)+10*len(st.Stopped))
	for _, v := range []uint64{uint64(st.Minute), st.SpeedSum, uint64(st.Reports), uint64(st.PrevCars), uint64(st.PrevAvg),
		st.Tolls, uint64(st.Accidents), st.TotalCount, uint64(len(st.Cars)), uint64(len(st.Stopped))} {
		b = binary.AppendUvarint(b, v)
	}
	for _, c := range st.Cars {
		b = binary.AppendUvarint(b, uint64(c))
	}
	for _, s := range st.Stopped {
		b = binary.AppendUvarint(binary.AppendUvarint(binary.AppendUvarint(b, uint64(s.vehicle)), uint64(s.pos)), uint64(s.repeats))
	}
	if st.Accident {
		return append(b, 1)
	}
	return append(b, 0)
}

// DecodeSegment reads a segment's statistics from a state value's data (stream.DecodeValue).
func DecodeSegment(b []byte) (Segment, error) { return decodeSegment(b) }

func decodeSegment(b []byte) (Segment, error) {
	var st Segment
	if len(b) == 0 {
		return st, nil
	}
	d := decoder{b: b}
	st.Minute, st.SpeedSum, st.Reports = uint32(d.uvarint()), d.uvarint(), uint32(d.uvarint())
	st.PrevCars, st.PrevAvg, st.Tolls = uint32(d.uvarint()), uint32(d.uvarint()), d.uvarint()
	st.Accidents, st.TotalCount = uint32(d.uvarint()), d.uvarint()
	cars, stopped := d.uvarint(), d.uvarint()
	if d.err != nil || cars > uint64(len(b)) || stopped > uint64(len(b)) {
		return st, errors.New("malformed segment statistics")
	}
	st.Cars = make([]uint32, cars)
	for i := range st.Cars {
		st.Cars[i] = uint32(d.uvarint())
	}
	st.Stopped = make([]stop, stopped)
	for i := range st.Stopped {
		st.Stopped[i] = stop{uint32(d.uvarint()), uint32(d.uvarint()), uint32(d.uvarint())}
	}
	st.Accident = d.byte() == 1
	if d.err != nil || len(d.b) != 0 {
		return st, errors.New("malformed segment statistics")
	}
	return st, nil
}

type decoder struct {
	b   []byte
	err error
}

func (d *decoder) uvarint() uint64 {
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.err = errors.New("short")
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) byte() byte {
	if len(d.b) == 0 {
		d.err = errors.New("short")
		return 0
	}
	c := d.b[0]
	d.b = d.b[1:]
	return c
}
