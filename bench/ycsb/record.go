package ycsb

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sort"
)

// recordFormatV1 is the first byte of every encoded record.
const recordFormatV1 byte = 1

// EncodeRecord encodes the field map of one YCSB record as a single value:
//
//	record = 0x01 field*
//	field  = uvarint(len(name)) name uvarint(len(value)) value
//
// Fields are sorted by name, so equal maps encode to equal bytes. The overhead over the raw field bytes
// is one byte for the format plus two to four bytes per field (a 10-field record of 100-byte values
// is 1,081 bytes, against about 1,500 for the JSON with base64 values that go-ycsb's etcd binding
// stores). A nil or empty map encodes to the single format byte.
func EncodeRecord(fields map[string][]byte) []byte {
	names := make([]string, 0, len(fields))
	size := 1
	for name, v := range fields {
		names = append(names, name)
		size += 2*binary.MaxVarintLen32 + len(name) + len(v)
	}
	sort.Strings(names)
	buf := make([]byte, 1, size)
	buf[0] = recordFormatV1
	for _, name := range names {
		v := fields[name]
		buf = binary.AppendUvarint(buf, uint64(len(name)))
		buf = append(buf, name...)
		buf = binary.AppendUvarint(buf, uint64(len(v)))
		buf = append(buf, v...)
	}
	return buf
}

// errCorrupt is wrapped by every DecodeRecord error.
var errCorrupt = errors.New("corrupt YCSB record")

// DecodeRecord decodes a value written by EncodeRecord. With a non-empty want, only those fields are
// returned (those the record lacks are left out). The returned values do not alias b.
func DecodeRecord(b []byte, want []string) (map[string][]byte, error) {
	if len(b) == 0 {
		return nil, fmt.Errorf("%w: empty value", errCorrupt)
	}
	if b[0] != recordFormatV1 {
		return nil, fmt.Errorf("%w: unknown format byte 0x%02x", errCorrupt, b[0])
	}
	var wanted map[string]bool
	if len(want) > 0 {
		wanted = make(map[string]bool, len(want))
		for _, w := range want {
			wanted[w] = true
		}
	}
	out := make(map[string][]byte)
	rest := b[1:]
	for len(rest) > 0 {
		name, r, err := readChunk(rest, "field name")
		if err != nil {
			return nil, err
		}
		val, r, err := readChunk(r, "value of field "+string(name))
		if err != nil {
			return nil, err
		}
		rest = r
		if wanted == nil || wanted[string(name)] {
			out[string(name)] = append([]byte(nil), val...)
		}
	}
	return out, nil
}

// readChunk reads one uvarint-length-prefixed chunk from b.
func readChunk(b []byte, what string) (chunk, rest []byte, err error) {
	n, k := binary.Uvarint(b)
	if k <= 0 {
		return nil, nil, fmt.Errorf("%w: bad length of %s", errCorrupt, what)
	}
	b = b[k:]
	if n > uint64(len(b)) {
		return nil, nil, fmt.Errorf("%w: %s is %d bytes, only %d left", errCorrupt, what, n, len(b))
	}
	return b[:n], b[n:], nil
}

// mergeRecord returns the fields of old overwritten by those of update.
func mergeRecord(old, update map[string][]byte) map[string][]byte {
	out := make(map[string][]byte, len(old)+len(update))
	for k, v := range old {
		out[k] = v
	}
	for k, v := range update {
		out[k] = v
	}
	return out
}
