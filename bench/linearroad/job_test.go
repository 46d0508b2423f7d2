package linearroad

import (
	"context"
	"testing"

	"github.com/shoaldb/shoal/pb"
	"github.com/shoaldb/shoal/stream"
)

func TestReportRoundTrip(t *testing.T) {
	r := Report{Vehicle: 70000, Xway: 1, Dir: 1, Seg: 99, Pos: 99 * SegmentFeet, Speed: 55, Minute: 1234, Crossing: true}
	got, err := DecodeReport(r.Encode())
	if err != nil || got != r {
		t.Fatalf("round trip: %+v, %v", got, err)
	}
	if _, err := DecodeReport(r.Encode()[:3]); err == nil {
		t.Fatal("a truncated report decoded")
	}
}

func TestTollAndAccident(t *testing.T) {
	if Toll(60, 30, false) != 200 || Toll(60, 45, false) != 0 || Toll(40, 30, false) != 0 || Toll(60, 30, true) != 0 {
		t.Fatal("toll formula")
	}
	var st Segment
	for minute := uint32(0); minute < 2; minute++ {
		for v := uint32(0); v < 60; v++ {
			st.observe(Report{Vehicle: v, Speed: 30, Minute: minute})
		}
	}
	if st.PrevCars != 60 || st.PrevAvg != 30 {
		t.Fatalf("previous minute: %d cars at %d mph", st.PrevCars, st.PrevAvg)
	}
	for i := 0; i < 4; i++ {
		st.observe(Report{Vehicle: 1, Pos: 400, Minute: 1})
		st.observe(Report{Vehicle: 2, Pos: 400, Minute: 1})
	}
	if !st.Accident || st.Accidents != 1 {
		t.Fatalf("two vehicles stopped four times at one spot: accident %v (%d)", st.Accident, st.Accidents)
	}
	st.observe(Report{Vehicle: 1, Pos: 500, Speed: 10, Minute: 1})
	if st.Accident {
		t.Fatal("accident not cleared when a vehicle moved on")
	}
	back, err := decodeSegment(st.encode())
	if err != nil || back.TotalCount != st.TotalCount || len(back.Cars) != len(st.Cars) || len(back.Stopped) != len(st.Stopped) {
		t.Fatalf("segment round trip: %+v %v", back, err)
	}
}

// memState is enough of a store to run the handler through stream.Apply.
type memState map[string][]byte

func (m memState) Get(_ context.Context, key []byte, _ bool) (stream.Entry, error) {
	v, ok := m[string(key)]
	return stream.Entry{Raw: v, Found: ok, Version: uint64(len(v))}, nil
}

func (m memState) Commit(_ context.Context, req *pb.TxnRequest) (bool, error) {
	for _, c := range req.Compares {
		if uint64(len(m[string(c.Key)])) != c.Number {
			return false, nil
		}
	}
	for _, op := range req.Success {
		m[string(op.Key)] = op.Value
	}
	return true, nil
}

func TestGeneratorThroughTheJob(t *testing.T) {
	g := NewGenerator(1, 500, 1, 10)
	st := memState{}
	pos := map[string]uint64{}
	tolls := 0
	for tick := 0; tick < 6; tick++ {
		for _, r := range g.Tick() {
			k := SegmentKey(r.Xway, r.Dir, r.Seg)
			pos[string(k)]++
			res := stream.Apply(context.Background(), Job, st, stream.Event{Key: k, Position: pos[string(k)], Value: r.Encode()})
			if res.Status != pb.IngestResult_APPLIED {
				t.Fatalf("report %+v: %v %v", r, res.Status, res.Error)
			}
			if r.Crossing != (len(res.Output) > 0) {
				t.Fatalf("report %+v: output %x", r, res.Output)
			}
			if r.Crossing {
				tolls++
			}
		}
	}
	var reports uint64
	for k, raw := range st {
		_, data, _, err := stream.DecodeValue(raw)
		if err != nil {
			t.Fatal(err)
		}
		seg, err := DecodeSegment(data)
		if err != nil {
			t.Fatal(k, err)
		}
		reports += seg.TotalCount
	}
	if reports != 6*500 || tolls < 500 {
		t.Fatalf("%d reports counted (want 3000), %d toll notifications", reports, tolls)
	}
}
