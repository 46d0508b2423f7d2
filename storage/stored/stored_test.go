package stored

import (
	"bytes"
	"testing"
)

func TestRoundTrip(t *testing.T) {
	for _, v := range []Value{
		{Data: []byte("x")},
		{Data: nil, ExpireAtMs: 1_700_000_000_123, Version: 3, ModIndex: 99},
		{Data: []byte{0xFE, 'V', 0x01, 7}, Version: 1, ModIndex: 1},
	} {
		got, err := Decode(Encode(nil, v))
		if err != nil || !bytes.Equal(got.Data, v.Data) || got.ExpireAtMs != v.ExpireAtMs || got.Version != v.Version || got.ModIndex != v.ModIndex {
			t.Errorf("round trip of %+v: %+v, %v", v, got, err)
		}
	}
}

func TestPlainAndCorrupt(t *testing.T) {
	v, err := Decode([]byte("plain"))
	if err != nil || string(v.Data) != "plain" || v.ExpireAtMs != 0 || v.Version != 0 {
		t.Errorf("plain value decoded as %+v, %v", v, err)
	}
	if _, err := Decode([]byte{0xFE, 'V', 0x01, 0x80}); err != ErrCorrupt {
		t.Errorf("truncated varint: %v, want ErrCorrupt", err)
	}
}

func TestExpiredAt(t *testing.T) {
	for _, tc := range []struct {
		exp, now int64
		want     bool
	}{{0, 1 << 60, false}, {100, 99, false}, {100, 100, true}, {100, 101, true}} {
		if got := (Value{ExpireAtMs: tc.exp}).ExpiredAt(tc.now); got != tc.want {
			t.Errorf("expire %d at %d: %v, want %v", tc.exp, tc.now, got, tc.want)
		}
	}
}
