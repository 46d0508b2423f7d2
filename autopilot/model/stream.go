package model

import (
	"fmt"
	"strconv"
	"strings"
)

// parseStream reads a range's stream load in the text form: stream=Q (events/s its leader's tasks
// applied) and stream-keys=KEY*COUNT,... (the sample of their keys; COUNT defaults to 1). The
// sample's window ends at the cluster's now (set by cluster()).
func parseStream(r *Range, k, v string) error {
	switch k {
	case "stream":
		q, err := strconv.ParseFloat(v, 64)
		if err != nil {
			return fmt.Errorf("stream: %v", err)
		}
		r.StreamQPS = q
	case "stream-keys":
		var keys [][]byte
		for _, kc := range strings.Split(v, ",") {
			key, count, ok := strings.Cut(kc, "*")
			n := uint64(1)
			if ok {
				var err error
				if n, err = strconv.ParseUint(count, 10, 32); err != nil {
					return fmt.Errorf("stream-keys: want KEY*COUNT,... got %q", kc)
				}
			}
			for range n {
				keys = append(keys, []byte(key))
			}
		}
		r.StreamSample = NewKeySample(TextEpoch, uint64(len(keys)), keys)
	}
	return nil
}
