package kv

import "bytes"

// RESP keeps every Redis key under 0xFE 'R' | slot (2 bytes, big-endian) | … (server/resp), so the
// keys of one hash slot, and with them every {tag} group a MULTI/EXEC may touch, are one contiguous
// interval. A split never cuts inside one: a split key in that space moves to a slot's first key.
var respPrefix = []byte{0xFE, 'R'}

// slotAlignedSplitKey returns the split key to use instead of key for a range [start, end): key
// itself outside the RESP space, else the start of key's slot, or of the next slot when that one
// starts the range. ok is false when no slot boundary lies inside the range.
func slotAlignedSplitKey(key, start, end []byte) (aligned []byte, ok bool) {
	if !bytes.HasPrefix(key, respPrefix) || len(key) <= len(respPrefix)+2 {
		return key, true // outside, or a slot's first key already
	}
	slotStart := key[:len(respPrefix)+2]
	if bytes.Compare(slotStart, start) > 0 {
		return append([]byte(nil), slotStart...), true
	}
	next := nextSlotStart(slotStart)
	if len(end) > 0 && bytes.Compare(next, end) >= 0 {
		return nil, false
	}
	return next, true
}

// nextSlotStart is the first key of the slot after the one slotStart begins (for the last slot, the
// end of the RESP space).
func nextSlotStart(slotStart []byte) []byte {
	s := int(slotStart[2])<<8 | int(slotStart[3])
	if s+1 >= 16384 {
		return []byte{respPrefix[0], respPrefix[1] + 1}
	}
	return []byte{respPrefix[0], respPrefix[1], byte((s + 1) >> 8), byte(s + 1)}
}
