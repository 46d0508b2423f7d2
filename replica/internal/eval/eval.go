// Package eval applies the data part of a range's command (a condition, writes and deletes, a
// transaction, a counter increment) to an engine batch. It is deterministic, as raft's apply must be
// on every replica: the outcome depends only on the command (its raft index and the clock its leader
// stamped on it) and what the batch reads.
//
// User values are stored with their expiry, version and modification index (package stored); a key
// whose expiry is at or before the command's clock is absent for every condition and operation.
//
// It owns no range state. It must never decide whether a key belongs to the range (the replica
// checks every key first) nor touch raft's keys, descriptors or the applied index.
package eval

import (
	"bytes"
	"encoding/binary"
	"fmt"

	"github.com/shoaldb/shoal/pb"
	"github.com/shoaldb/shoal/storage"
	"github.com/shoaldb/shoal/storage/stored"
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
	// Txn: the transaction's outcome, if the command carried one.
	Txn *pb.TxnResponse
	// Wrote: the command wrote something.
	Wrote bool
}

// Env is where the command applies.
type Env struct {
	// DataKey maps a user key to the engine key of the range's keyspace.
	DataKey func([]byte) []byte
	// Index is the command's raft index (the modification index of what it writes).
	Index uint64
	// Plain: store values as written, with no expiry or version (the meta range's records).
	Plain bool
	// Record, if set, is told every change the command makes to a user key, in order: a PUT with the
	// value as stored, a DELETE of a live key, an EXPIRE when an expired key is removed or overwritten.
	Record func(kind pb.RangeFeedEvent_Kind, key []byte, v stored.Value)
}

// state is one key's current value as a command sees it.
type state struct {
	v     stored.Value
	found bool
	// present: the engine holds the key, live or expired.
	present bool
}

type applier struct {
	b     *storage.Batch
	env   Env
	clock int64
	wrote bool
}

func (a *applier) read(key []byte) (state, error) {
	raw, found, err := a.b.Get(a.env.DataKey(key))
	if err != nil || !found {
		return state{}, err
	}
	if a.env.Plain {
		return state{v: stored.Value{Data: raw}, found: true, present: true}, nil
	}
	v, live, err := stored.Live(raw, a.clock)
	if err != nil {
		return state{}, fmt.Errorf("key %q: %w", key, err)
	}
	return state{v: v, found: live, present: true}, nil
}

// record tells env.Record that key's old value expired, if it did.
func (a *applier) recordExpired(key []byte, old state) {
	if a.env.Record != nil && old.present && !old.found {
		a.env.Record(pb.RangeFeedEvent_EXPIRE, key, stored.Value{})
	}
}

// write stores data under key with expireAt, one version past old's.
func (a *applier) write(key []byte, old state, data []byte, expireAt int64) error {
	a.wrote = true
	if a.env.Plain {
		return a.b.Set(a.env.DataKey(key), data)
	}
	ver := uint64(1)
	if old.found {
		ver = old.v.Version + 1
	}
	nv := stored.Value{Data: data, ExpireAtMs: expireAt, Version: ver, ModIndex: a.env.Index}
	if a.env.Record != nil {
		a.recordExpired(key, old)
		a.env.Record(pb.RangeFeedEvent_PUT, key, nv)
	}
	return a.b.Set(a.env.DataKey(key), stored.Encode(nil, nv))
}

// delete removes key, whose value was old.
func (a *applier) delete(key []byte, old state) error {
	a.wrote = true
	if a.env.Record != nil {
		a.recordExpired(key, old)
		if old.found {
			a.env.Record(pb.RangeFeedEvent_DELETE, key, stored.Value{})
		}
	}
	return a.b.Delete(a.env.DataKey(key))
}

// Apply writes cmd's mutations into b unless its condition fails, runs its transaction, then
// increments its counter key.
func Apply(b *storage.Batch, cmd *pb.Command, env Env) (Outcome, error) {
	a := &applier{b: b, env: env, clock: cmd.ClockUnixMs}
	var out Outcome
	if c := cmd.Condition; c != nil {
		st, err := a.read(c.Key)
		if err != nil {
			return out, err
		}
		out.Found, out.Current = st.found, st.v.Data
		if c.ExpectAbsent && st.found || !c.ExpectAbsent && (!st.found || !bytes.Equal(st.v.Data, c.Expected)) {
			return out, nil
		}
		out.Swapped = true
	}
	for _, m := range cmd.Mutations {
		st, err := a.read(m.Key)
		if err != nil {
			return out, err
		}
		if cmd.Condition == nil && len(cmd.Mutations) == 1 && m.Delete {
			out.Found = st.found // a lone delete reports whether it deleted something (DEL's reply)
		}
		if m.Delete {
			err = a.delete(m.Key, st)
		} else {
			err = a.write(m.Key, st, m.Value, m.ExpireAtUnixMs)
		}
		if err != nil {
			return out, err
		}
	}
	if t := cmd.Txn; t != nil {
		resp, err := a.txn(t)
		if err != nil {
			return out, err
		}
		out.Txn = resp
	}
	if len(cmd.IncrementKey) > 0 {
		k := env.DataKey(cmd.IncrementKey)
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
		a.wrote = true
		out.Counter = n
	}
	out.Wrote = a.wrote
	return out, nil
}
