package resp

import (
	"bytes"
	"testing"
)

func TestCRC16AndSlots(t *testing.T) {
	if got := crc16([]byte("123456789")); got != 0x31C3 {
		t.Fatalf("crc16 check value = %#x, want 0x31c3", got)
	}
	// Values from Redis Cluster (CLUSTER KEYSLOT).
	for k, want := range map[string]int{
		"foo": 12182, "bar": 5061, "hello": 866, "somekey": 11058, "foo{hash_tag}": 2515, "bar{hash_tag}": 2515,
		"{user1000}.following": Slot([]byte("user1000")), "{user1000}.followers": Slot([]byte("user1000")),
		"foo{}{bar}":  Slot([]byte("foo{}{bar}")), // empty tag: the whole key
		"foo{{bar}}":  Slot([]byte("{bar")),
		"foo{bar}{z}": Slot([]byte("bar")),
		"{}":          int(crc16([]byte("{}")) & 16383),
	} {
		if got := Slot([]byte(k)); got != want {
			t.Errorf("Slot(%q) = %d, want %d", k, got, want)
		}
	}
	if Slot([]byte("foo{}{bar}")) != int(crc16([]byte("foo{}{bar}"))&16383) {
		t.Error("an empty hash tag must hash the whole key")
	}
}

func TestKeyEncoding(t *testing.T) {
	for _, k := range []string{"a", "foo", "{tag}x", string(bytes.Repeat([]byte{0xFF}, 200)), "with\x00nul"} {
		sk := stringKey([]byte(k))
		d, ok := decodeKey(sk)
		if !ok || string(d.key) != k || d.tag != tagString || d.slot != Slot([]byte(k)) {
			t.Fatalf("string key %q: decoded %+v %v", k, d, ok)
		}
		fk := fieldKey([]byte(k), []byte("f\x00"))
		d, ok = decodeKey(fk)
		if !ok || string(d.key) != k || d.tag != tagHashField || string(d.field) != "f\x00" {
			t.Fatalf("field key %q: decoded %+v %v", k, d, ok)
		}
		gs, ge := groupSpan([]byte(k))
		fs, fe := fieldsSpan([]byte(k))
		for _, x := range [][]byte{sk, fk} {
			if bytes.Compare(x, gs) < 0 || bytes.Compare(x, ge) >= 0 {
				t.Fatalf("%q outside its group span", x)
			}
		}
		if bytes.Compare(sk, fs) >= 0 {
			t.Fatal("the string key must sort before the fields")
		}
		if bytes.Compare(fk, fs) < 0 || bytes.Compare(fk, fe) >= 0 {
			t.Fatal("field outside the fields span")
		}
		s := Slot([]byte(k))
		if bytes.Compare(sk, SlotStart(s)) < 0 || bytes.Compare(sk, SlotStart(s+1)) >= 0 {
			t.Fatal("key outside its slot")
		}
	}
	// Keys whose encodings could be confused: one key a prefix of another.
	a, b := stringKey([]byte("ab")), fieldKey([]byte("a"), []byte("b"))
	if bytes.Equal(a, b) {
		t.Fatal("collision")
	}
	ga, _ := groupSpan([]byte("a"))
	if d, ok := decodeKey(stringKey([]byte("ab"))); !ok || bytes.HasPrefix(stringKey([]byte("ab")), ga) && string(d.key) == "a" {
		t.Fatal("key ab decoded as a")
	}
}

func TestDecodeKeyRejects(t *testing.T) {
	good := stringKey([]byte("foo"))
	bad := [][]byte{
		nil,
		{0xFE},
		{0xFE, 'R', 0x40, 0},           // slot 16384
		append([]byte("/t/"), good...), // another prefix
		append(append([]byte(nil), good...), 'x'),   // trailing bytes after a string tag
		append(append([]byte(nil), good[:7]...), 9), // unknown tag
		{0xFE, 'R', 0, 0, 0x80, 0x00, tagString},    // non-canonical varint
		{0xFE, 'R', 0, 0, 50, 'a', tagString},       // length beyond the key
	}
	// wrong slot
	ws := append([]byte(nil), good...)
	ws[3] ^= 1
	bad = append(bad, ws)
	for _, b := range bad {
		if d, ok := decodeKey(b); ok {
			t.Errorf("decodeKey(%q) accepted: %+v", b, d)
		}
	}
}

func TestSlotsOf(t *testing.T) {
	cases := []struct {
		start, end  []byte
		first, last int
		ok          bool
	}{
		{nil, nil, 0, NumSlots - 1, true},
		{nil, SlotStart(100), 0, 99, true},
		{SlotStart(100), nil, 100, NumSlots - 1, true},
		{SlotStart(100), SlotStart(200), 100, 199, true},
		{append(SlotStart(100), 5), SlotStart(200), 101, 199, true}, // boundary inside slot 100
		{append(SlotStart(100), 5), append(SlotStart(100), 9), 0, 0, false},
		{[]byte("/t/1"), []byte("/t/2"), 0, 0, false},
		{[]byte{0xFE, 'R', 0x10}, nil, 0x1000, NumSlots - 1, true},
		{PrefixEnd, nil, 0, 0, false},
		{nil, Prefix, 0, 0, false},
		{nil, append(Prefix, 0), 0, 0, false}, // slot 0 starts at FE 52 00 00 > FE 52 00
	}
	for _, tc := range cases {
		f, l, ok := SlotsOf(tc.start, tc.end)
		if ok != tc.ok || (ok && (f != tc.first || l != tc.last)) {
			t.Errorf("SlotsOf(%x, %x) = %d, %d, %v; want %d, %d, %v", tc.start, tc.end, f, l, ok, tc.first, tc.last, tc.ok)
		}
	}
}

// TestNames: the exported helpers give the Shoal keys the RESP commands use, and take them apart.
func TestNames(t *testing.T) {
	if !bytes.Equal(KeyFor([]byte("foo")), stringKey([]byte("foo"))) || !bytes.Equal(FieldKeyFor([]byte("h"), []byte("f")), fieldKey([]byte("h"), []byte("f"))) {
		t.Fatal("KeyFor/FieldKeyFor differ from the keys GET and HGET read")
	}
	for _, tc := range []struct {
		key  []byte
		want string
	}{
		{KeyFor([]byte("foo")), "redis:foo"},
		{KeyFor([]byte("user:1/name{x}")), "redis:user:1/name{x}"},
		{FieldKeyFor([]byte("profile"), []byte("email")), "redis:profile[email]"},
		{KeyFor([]byte("a b")), `redis:"a b"`},
		{KeyFor([]byte("")), `redis:""`},
		{KeyFor([]byte("x\x00\xff")), `redis:"x\x00\xff"`},
		{FieldKeyFor([]byte("h"), []byte("a]b")), `redis:h["a]b"]`},
	} {
		n, ok := NameOf(tc.key)
		if !ok || n.String() != tc.want {
			t.Errorf("NameOf(%q) = %+v %v, String %q; want %q", tc.key, n, ok, n.String(), tc.want)
		}
		if ok && n.Slot != Slot(n.Key) {
			t.Errorf("NameOf(%q).Slot = %d, want %d", tc.key, n.Slot, Slot(n.Key))
		}
	}
	if n, ok := NameOf([]byte("user/0001")); ok {
		t.Errorf("a key outside the RESP key space was named %v", n)
	}
}
