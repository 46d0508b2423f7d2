package resp

import (
	"bytes"
	"encoding/binary"
	"sort"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// NumSlots is the number of Redis Cluster hash slots.
const NumSlots = 16384

// Key layout (see the package comment):
//
//	0xFE 'R' | slot (2 bytes, big-endian) | uvarint(len(key)) | key | tag | [field]
//
// tagString marks a string's value; tagHashField is followed by the field name and holds the field's
// value. tagString sorts before tagHashField, so the first Shoal key of a Redis key's group is its
// string value when there is one.
const (
	prefix0      = 0xFE
	prefix1      = 'R'
	tagString    = 0x01
	tagHashField = 0x02
)

// Prefix is the start of the RESP key space inside Shoal's key space; PrefixEnd is its exclusive end.
var (
	Prefix    = []byte{prefix0, prefix1}
	PrefixEnd = []byte{prefix0, prefix1 + 1}
)

// crc16tab is CRC16-CCITT (XModem: polynomial 0x1021, initial value 0), the checksum Redis Cluster uses.
var crc16tab = func() (t [256]uint16) {
	for i := range t {
		c := uint16(i) << 8
		for j := 0; j < 8; j++ {
			if c&0x8000 != 0 {
				c = c<<1 ^ 0x1021
			} else {
				c <<= 1
			}
		}
		t[i] = c
	}
	return t
}()

func crc16(b []byte) uint16 {
	var c uint16
	for _, x := range b {
		c = c<<8 ^ crc16tab[byte(c>>8)^x]
	}
	return c
}

// Slot is the Redis Cluster hash slot of key: CRC16 of the key (or of its hash tag, the part between
// the first '{' and the first '}' after it, when that part is not empty) modulo 16384.
func Slot(key []byte) int {
	if i := bytes.IndexByte(key, '{'); i >= 0 {
		if j := bytes.IndexByte(key[i+1:], '}'); j > 0 {
			key = key[i+1 : i+1+j]
		}
	}
	return int(crc16(key) & (NumSlots - 1))
}

// SlotStart is the first Shoal key of slot s (0 <= s <= NumSlots); SlotStart(NumSlots) is PrefixEnd.
// Splitting a range at SlotStart(s) makes the range boundary a slot boundary.
func SlotStart(s int) []byte {
	if s >= NumSlots {
		return append([]byte(nil), PrefixEnd...)
	}
	return []byte{prefix0, prefix1, byte(s >> 8), byte(s)}
}

// groupPrefix is the prefix shared by every Shoal key of the Redis key k (all in one slot).
func groupPrefix(k []byte) []byte {
	return appendGroup(make([]byte, 0, 4+binary.MaxVarintLen64+len(k)+1), Slot(k), k)
}

func appendGroup(b []byte, slot int, k []byte) []byte {
	b = append(b, prefix0, prefix1, byte(slot>>8), byte(slot))
	b = binary.AppendUvarint(b, uint64(len(k)))
	return append(b, k...)
}

// stringKey is the Shoal key holding the value of the string k.
func stringKey(k []byte) []byte { return append(groupPrefix(k), tagString) }

// fieldKey is the Shoal key holding field f of the hash k.
func fieldKey(k, f []byte) []byte {
	return append(append(groupPrefix(k), tagHashField), f...)
}

// fieldsSpan is [start, end) of the fields of hash k.
func fieldsSpan(k []byte) (start, end []byte) {
	g := groupPrefix(k)
	return append(append([]byte(nil), g...), tagHashField), append(g, tagHashField+1)
}

// groupSpan is [start, end) of every Shoal key of k.
func groupSpan(k []byte) (start, end []byte) {
	g := groupPrefix(k)
	return g, prefixEnd(g)
}

// prefixEnd is the smallest key greater than every key with prefix p (p never ends in 0xFF here:
// its last byte is a key byte, a varint byte or a tag, and a 0xFF byte is carried over).
func prefixEnd(p []byte) []byte {
	end := append([]byte(nil), p...)
	for i := len(end) - 1; i >= 0; i-- {
		if end[i] < 0xFF {
			end[i]++
			return end[:i+1]
		}
	}
	return nil // all 0xFF: no end (never happens: the prefix starts with 0xFE)
}

// decodedKey is a Shoal key of the RESP key space taken apart.
type decodedKey struct {
	slot  int
	key   []byte // the Redis key
	tag   byte
	field []byte // hash field (tagHashField only)
	group int    // length of the group prefix in the Shoal key
}

// decodeKey parses a Shoal key of the RESP key space. It reports false for anything malformed: a key
// outside the prefix, a bad length, a slot that does not match the key, an unknown tag or trailing bytes.
func decodeKey(b []byte) (decodedKey, bool) {
	var d decodedKey
	if len(b) < 4 || b[0] != prefix0 || b[1] != prefix1 {
		return d, false
	}
	d.slot = int(b[2])<<8 | int(b[3])
	if d.slot >= NumSlots {
		return d, false
	}
	n, w := binary.Uvarint(b[4:])
	if w <= 0 || n > uint64(len(b)) || n > uint64(len(b)-4-w) {
		return d, false
	}
	off := 4 + w
	d.key = b[off : off+int(n)]
	off += int(n)
	d.group = off
	if off >= len(b) || Slot(d.key) != d.slot {
		return d, false
	}
	// A canonical uvarint only: the encoding must round-trip, so that every Redis key has one group.
	if binary.PutUvarint(make([]byte, binary.MaxVarintLen64), n) != w {
		return d, false
	}
	d.tag = b[off]
	switch d.tag {
	case tagString:
		if off+1 != len(b) {
			return d, false
		}
	case tagHashField:
		d.field = b[off+1:]
	default:
		return d, false
	}
	return d, true
}

// firstSlotAtOrAfter is the smallest slot s with SlotStart(s) >= k, or NumSlots if there is none.
func firstSlotAtOrAfter(k []byte) int {
	return sort.Search(NumSlots, func(s int) bool { return bytes.Compare(SlotStart(s), k) >= 0 })
}

// SlotsOf returns the slots [first, last] a range [start, end) owns: those whose first key it holds
// (an empty end is +inf). ok is false when it owns none. Every slot is owned by exactly one range, the
// one holding its first key, even when a range boundary falls inside the slot.
func SlotsOf(start, end []byte) (first, last int, ok bool) {
	first = firstSlotAtOrAfter(start)
	stop := NumSlots
	if len(end) > 0 {
		stop = firstSlotAtOrAfter(end)
	}
	if first >= stop {
		return 0, 0, false
	}
	return first, stop - 1, true
}

// KeyFor is the Shoal key that holds the value of the Redis string key name: what GET name reads and
// SET name writes. Written or read through gRPC (package client, `shoal put/get --redis`), it is the
// value redis-cli sees.
func KeyFor(name []byte) []byte { return stringKey(name) }

// FieldKeyFor is the Shoal key that holds field of the Redis hash name (what HGET name field reads).
func FieldKeyFor(name, field []byte) []byte { return fieldKey(name, field) }

// Name is a Shoal key of the RESP key space taken apart.
type Name struct {
	// Slot is the Redis Cluster hash slot of Key, the key's place in the Shoal key space.
	Slot int
	// Key is the Redis key.
	Key []byte
	// Hash is set when the Shoal key holds a field of a hash; else it holds a string's value.
	Hash bool
	// Field is the hash field (Hash only).
	Field []byte
}

// NameOf takes a Shoal key of the RESP key space apart; ok is false for every other key.
func NameOf(key []byte) (n Name, ok bool) {
	d, ok := decodeKey(key)
	if !ok {
		return Name{}, false
	}
	return Name{Slot: d.slot, Key: d.key, Hash: d.tag == tagHashField, Field: d.field}, true
}

// String is the name as people read it: "redis:" and the Redis key, followed by "[field]" for a hash
// field, e.g. redis:user:1 and redis:profile[email]. A key or field with spaces, quotes, brackets or
// bytes that are not printable UTF-8 is shown Go-quoted: redis:"a b".
func (n Name) String() string {
	s := "redis:" + quoteName(n.Key)
	if n.Hash {
		s += "[" + quoteName(n.Field) + "]"
	}
	return s
}

// quoteName returns b as is when it reads unambiguously, else Go-quoted.
func quoteName(b []byte) string {
	s := string(b)
	if s == "" || !utf8.ValidString(s) || strings.ContainsFunc(s, func(r rune) bool {
		return !unicode.IsPrint(r) || unicode.IsSpace(r) || strings.ContainsRune(`"[]\`, r)
	}) {
		return strconv.Quote(s)
	}
	return s
}
