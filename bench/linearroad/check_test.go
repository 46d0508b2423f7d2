package linearroad

import (
	"context"
	"strings"
	"testing"

	"github.com/shoaldb/shoal/pb"
	"github.com/shoaldb/shoal/stream"
)

// checkedRun applies a generator's reports through the job to a memState, acknowledging them to a
// checker as a producer would, the last batch's second half never acknowledged but applied.
func checkedRun(t *testing.T) (*checker, memState) {
	t.Helper()
	g := NewGenerator(2, 300, 1, 6)
	st, c, pos := memState{}, newChecker(), map[string]uint64{}
	for tick := 0; tick < 4; tick++ {
		reps := g.Tick()
		evs := make([]stream.Event, len(reps))
		acks := make([]stream.Ack, len(reps))
		for i, r := range reps {
			k := SegmentKey(r.Xway, r.Dir, r.Seg)
			pos[string(k)]++
			evs[i] = stream.Event{Key: k, Position: pos[string(k)], Value: r.Encode()}
			res := stream.Apply(context.Background(), Job, st, evs[i])
			if tick < 3 || i < len(reps)/2 {
				acks[i] = stream.Ack{Key: k, Position: evs[i].Position, Status: res.Status, Output: res.Output}
			}
		}
		c.record(evs, reps, acks)
	}
	return c, st
}

func (m memState) get(_ context.Context, key []byte) ([]byte, bool, error) {
	v, ok := m[string(key)]
	return v, ok, nil
}

func TestCheckerPassesAnExactRun(t *testing.T) {
	c, st := checkedRun(t)
	got, err := c.verify(context.Background(), st.get)
	if err != nil || !got.OK || got.InFlight == 0 || got.InFlightApplied != got.InFlight || got.Outputs == 0 {
		t.Fatalf("%+v %v", got, err)
	}
}

func TestCheckerFindsAnEventAppliedTwice(t *testing.T) {
	c, st := checkedRun(t)
	for k, raw := range st { // one segment's last report counted twice
		p, data, _, _ := stream.DecodeValue(raw)
		seg, _ := DecodeSegment(data)
		seg.TotalCount++
		st[k] = stream.EncodeValue(p, seg.encode())
		break
	}
	got, _ := c.verify(context.Background(), st.get)
	if got.OK || got.Violations != 1 || !strings.Contains(got.First, "reports") {
		t.Fatalf("a segment counted one report twice, the checker says %+v", got)
	}
}

func TestCheckerFindsAWrongOutputAndAGap(t *testing.T) {
	c := newChecker()
	r := Report{Vehicle: 1, Crossing: true}
	k := SegmentKey(0, 0, 0)
	c.record([]stream.Event{{Key: k, Position: 1}}, []Report{r}, []stream.Ack{{Key: k, Position: 1, Output: []byte{9}}})
	c.record([]stream.Event{{Key: k, Position: 3}}, []Report{r}, []stream.Ack{{Key: k, Position: 3, Status: pb.IngestResult_DUPLICATE}})
	if c.Violations != 2 || !strings.Contains(c.First, "output") {
		t.Fatalf("%+v", c.Check)
	}
}
