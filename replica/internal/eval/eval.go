// Package eval applies the data part of a range's command (a condition, writes and deletes, a
// counter increment) to an engine batch. It is deterministic, as raft's apply must be on every
// replica: the outcome depends only on the command and what the batch reads.
//
// It owns no range state. It must never decide whether a key belongs to the range (the replica
// checks every key first) nor touch raft's keys, descriptors or the applied index.
package eval

import (
	"bytes"
	"encoding/binary"

	"github.com/shoaldb/shoal/pb"
	"github.com/shoaldb/shoal/storage"
)

// Outcome is what a command's data part found and did.
type Outcome struct {
	// Swapped: the command had a condition and it held (its writes were made).
	Swapped bool
	// Found and Current: the condition's key (or a lone delete's key) existed, with this value.
	Found   bool
	Current []byte
	// Counter: the incremented counter's new value.
	Counter uint64
}

// Apply writes cmd's mutations into b unless its condition fails, then increments its counter key.
// dataKey maps a user key to the engine key of the range's keyspace.
func Apply(b *storage.Batch, cmd *pb.Command, dataKey func([]byte) []byte) (Outcome, error) {
	var out Outcome
	if c := cmd.Condition; c != nil {
		cur, found, err := b.Get(dataKey(c.Key))
		if err != nil {
			return out, err
		}
		out.Found, out.Current = found, cur
		if c.ExpectAbsent && found || !c.ExpectAbsent && (!found || !bytes.Equal(cur, c.Expected)) {
			return out, nil
		}
		out.Swapped = true
	}
	for _, m := range cmd.Mutations {
		k := dataKey(m.Key)
		if cmd.Condition == nil && len(cmd.Mutations) == 1 && m.Delete {
			// A lone delete reports whether it deleted something (DEL's reply).
			_, found, err := b.Get(k)
			if err != nil {
				return out, err
			}
			out.Found = found
		}
		var err error
		if m.Delete {
			err = b.Delete(k)
		} else {
			err = b.Set(k, m.Value)
		}
		if err != nil {
			return out, err
		}
	}
	if len(cmd.IncrementKey) > 0 {
		k := dataKey(cmd.IncrementKey)
		cur, found, err := b.Get(k)
		if err != nil {
			return out, err
		}
		var n uint64
		if found && len(cur) == 8 {
			n = binary.BigEndian.Uint64(cur)
		}
		n++
		if err := b.Set(k, binary.BigEndian.AppendUint64(nil, n)); err != nil {
			return out, err
		}
		out.Counter = n
	}
	return out, nil
}
