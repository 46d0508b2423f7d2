package kv

import (
	"bytes"
	"testing"
)

func TestSlotAlignedSplitKey(t *testing.T) {
	k := func(slot int, rest string) []byte {
		return append([]byte{0xFE, 'R', byte(slot >> 8), byte(slot)}, rest...)
	}
	for _, tc := range []struct {
		name            string
		key, start, end []byte
		want            []byte
		ok              bool
	}{
		{"outside the RESP space", []byte("user42"), nil, nil, []byte("user42"), true},
		{"a slot's first key", k(7, ""), nil, nil, k(7, ""), true},
		{"inside a slot: its start", k(7, "\x03foo\x01"), nil, nil, k(7, ""), true},
		{"slot starts the range: the next slot", k(7, "\x03foo\x01"), k(7, ""), nil, k(8, ""), true},
		{"one slot only: no split", k(7, "\x03foo\x01"), k(7, ""), k(8, ""), nil, false},
		{"last slot: the end of the space", k(16383, "\x01a\x01"), k(16383, ""), nil, []byte{0xFE, 'S'}, true},
	} {
		got, ok := slotAlignedSplitKey(tc.key, tc.start, tc.end)
		if ok != tc.ok || !bytes.Equal(got, tc.want) {
			t.Errorf("%s: %x %v, want %x %v", tc.name, got, ok, tc.want, tc.ok)
		}
	}
}
