// Package stored is the encoding of a user key's stored value: the bytes a client wrote, with its
// expiry, version and modification index beside them in the same engine value, so that everything
// that copies values (raft entries, snapshots, backups) carries them with no work of its own.
//
//	0xFE 'V' 0x01 | uvarint(expire_at_unix_ms) | uvarint(version) | uvarint(mod_index) | data
//
// A value without that header is a plain value written before the encoding existed (no expiry,
// version 0). Every write through a range's state machine encodes, so a plain value starting with
// the header bytes can only come from an older store.
//
// It owns the byte layout only. It must never judge time itself: callers pass the clock.
package stored

import (
	"encoding/binary"
	"errors"
)

var header = [3]byte{0xFE, 'V', 0x01}

// Value is one decoded stored value.
type Value struct {
	Data []byte
	// ExpireAtMs is the wall-clock time (Unix ms) at which the key expires; 0: never.
	ExpireAtMs int64
	// Version counts writes since the key was created (1 after its first); ModIndex is the raft index
	// of its last write.
	Version, ModIndex uint64
}

// Encode appends v's encoding to dst.
func Encode(dst []byte, v Value) []byte {
	dst = append(dst, header[:]...)
	dst = binary.AppendUvarint(dst, uint64(max(v.ExpireAtMs, 0)))
	dst = binary.AppendUvarint(dst, v.Version)
	dst = binary.AppendUvarint(dst, v.ModIndex)
	return append(dst, v.Data...)
}

// ErrCorrupt: a value carries the header but its fields do not decode.
var ErrCorrupt = errors.New("stored value: corrupt header")

// Decode takes b apart; Data aliases b.
func Decode(b []byte) (Value, error) {
	if len(b) < len(header) || b[0] != header[0] || b[1] != header[1] || b[2] != header[2] {
		return Value{Data: b}, nil
	}
	rest := b[len(header):]
	var f [3]uint64
	for i := range f {
		x, n := binary.Uvarint(rest)
		if n <= 0 {
			return Value{}, ErrCorrupt
		}
		f[i], rest = x, rest[n:]
	}
	return Value{Data: rest, ExpireAtMs: int64(f[0]), Version: f[1], ModIndex: f[2]}, nil
}

// ExpiredAt reports whether v has expired at nowMs (Unix ms). A key expires at its expiry time
// exactly, as in Redis.
func (v Value) ExpiredAt(nowMs int64) bool { return v.ExpireAtMs != 0 && v.ExpireAtMs <= nowMs }

// Live decodes b and reports whether it holds a key that has not expired at nowMs.
func Live(b []byte, nowMs int64) (Value, bool, error) {
	v, err := Decode(b)
	if err != nil {
		return v, false, err
	}
	return v, !v.ExpiredAt(nowMs), nil
}
