package resp

import (
	"bytes"
	"testing"
)

// FuzzDecodeKey checks that decoding a Shoal key never panics and that whatever decodes re-encodes to
// the same bytes (one encoding per Redis key and field).
func FuzzDecodeKey(f *testing.F) {
	f.Add(stringKey([]byte("foo")))
	f.Add(fieldKey([]byte("{tag}h"), []byte("field")))
	f.Add([]byte{0xFE, 'R', 0, 0, 0x80, 0x00, tagString})
	f.Fuzz(func(t *testing.T, b []byte) {
		d, ok := decodeKey(b)
		if !ok {
			return
		}
		var re []byte
		if d.tag == tagString {
			re = stringKey(d.key)
		} else {
			re = fieldKey(d.key, d.field)
		}
		if !bytes.Equal(re, b) {
			t.Fatalf("decoded %+v from %x, which re-encodes to %x", d, b, re)
		}
	})
}
