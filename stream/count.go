package stream

import (
	"context"
	"fmt"
	"strconv"
)

// CountPrefix is the state span of the count job: one counter per event payload under it.
const CountPrefix = "/s/count/"

// CountJob counts events by payload: its state key is CountPrefix+payload, its value the decimal
// count, its output the count after the event. After a producer's events of a key are acknowledged,
// the counter equals their number: the job checks exactly-once effects in tests and in `shoal stream`.
var CountJob = &Job{
	Name:  "count",
	Start: []byte(CountPrefix),
	End:   []byte("/s/count0"), // '0' follows '/'
	Key: func(v []byte) ([]byte, error) {
		if len(v) == 0 {
			return nil, fmt.Errorf("empty payload")
		}
		return append([]byte(CountPrefix), v...), nil
	},
	Handle: func(ctx context.Context, s *State, e Event) ([]byte, error) {
		cur, found, err := s.Get(ctx, e.Key)
		if err != nil {
			return nil, err
		}
		n := int64(0)
		if found {
			if n, err = strconv.ParseInt(string(cur), 10, 64); err != nil {
				return nil, Refuse(fmt.Errorf("counter %q holds %q", e.Key, cur))
			}
		}
		out := []byte(strconv.FormatInt(n+1, 10))
		s.Put(e.Key, out)
		return out, nil
	},
}

func init() { Register(CountJob) }
