package table

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"strconv"
	"time"
)

// Keys of the catalog and of rows. Every key of this package starts with "/t/"; system keys with
// "/t/_sys/", which sorts after every "/t/<digits>/" since '_' > '9'.
var (
	sysSeqKey      = []byte("/t/_sys/seq")
	sysDescPrefix  = []byte("/t/_sys/desc/")
	sysDropPrefix  = []byte("/t/_sys/drop/")
	rowSpacePrefix = []byte("/t/")
)

func descKey(name string) []byte { return append(bytes.Clone(sysDescPrefix), name...) }

func dropKey(id uint64) []byte { return strconv.AppendUint(bytes.Clone(sysDropPrefix), id, 10) }

// TablePrefix is the prefix of every row key of table id: "/t/<id>/".
func TablePrefix(id uint64) []byte {
	b := strconv.AppendUint(bytes.Clone(rowSpacePrefix), id, 10)
	return append(b, '/')
}

// TableSpan is the span [start, end) holding exactly the rows of table id.
func TableSpan(id uint64) (start, end []byte) {
	start = TablePrefix(id)
	end = bytes.Clone(start)
	end[len(end)-1]++ // "/t/<id>0": '0' follows '/'
	return start, end
}

// Escapes of the string and bytes encoding: a 0x00 in the data is written 0x00 0xFF, and the
// value ends with 0x00 0x01. The terminator sorts below any escaped byte, so a string sorts before
// every longer string it prefixes, and the encoding of one column never runs into the next.
const (
	escByte      = 0x00
	escEscaped   = 0xFF
	escTerminate = 0x01
)

// appendKeyValue appends v's order-preserving encoding. v must already be checked against t
// (checkValue): the bytes of a < b compare as a < b for every pair of values of one type.
func appendKeyValue(b []byte, t Type, v any) []byte {
	switch t {
	case Int64:
		return binary.BigEndian.AppendUint64(b, uint64(v.(int64))^(1<<63))
	case Timestamp:
		return binary.BigEndian.AppendUint64(b, uint64(v.(time.Time).UnixNano())^(1<<63))
	case Float64:
		f := v.(float64)
		if f == 0 {
			f = 0 // -0 == +0: one key
		}
		u := math.Float64bits(f)
		if u>>63 == 1 {
			u = ^u // negative: larger magnitudes sort first
		} else {
			u |= 1 << 63 // positive: above every negative
		}
		return binary.BigEndian.AppendUint64(b, u)
	case String:
		return appendEscaped(b, []byte(v.(string)))
	case Bytes:
		return appendEscaped(b, v.([]byte))
	}
	panic(fmt.Sprintf("table: key encoding of unknown type %v", t))
}

func appendEscaped(b, s []byte) []byte {
	for {
		i := bytes.IndexByte(s, escByte)
		if i < 0 {
			break
		}
		b = append(b, s[:i]...)
		b = append(b, escByte, escEscaped)
		s = s[i+1:]
	}
	b = append(b, s...)
	return append(b, escByte, escTerminate)
}

// decodeKeyValue decodes one value of type t from the front of b and returns the rest.
func decodeKeyValue(b []byte, t Type) (any, []byte, error) {
	switch t {
	case Int64, Timestamp, Float64:
		if len(b) < 8 {
			return nil, nil, fmt.Errorf("%v key part: %d bytes, want 8", t, len(b))
		}
		u := binary.BigEndian.Uint64(b)
		rest := b[8:]
		switch t {
		case Int64:
			return int64(u ^ (1 << 63)), rest, nil
		case Timestamp:
			return time.Unix(0, int64(u^(1<<63))).UTC(), rest, nil
		}
		if u>>63 == 1 {
			u &^= 1 << 63
		} else {
			u = ^u
		}
		return math.Float64frombits(u), rest, nil
	case String, Bytes:
		var out []byte
		for {
			i := bytes.IndexByte(b, escByte)
			if i < 0 || i+1 >= len(b) {
				return nil, nil, fmt.Errorf("%v key part is not terminated", t)
			}
			out = append(out, b[:i]...)
			switch b[i+1] {
			case escEscaped:
				out = append(out, escByte)
				b = b[i+2:]
				continue
			case escTerminate:
				b = b[i+2:]
			default:
				return nil, nil, fmt.Errorf("%v key part has a bad escape 0x00 0x%02x", t, b[i+1])
			}
			break
		}
		if t == String {
			return string(out), b, nil
		}
		if out == nil {
			out = []byte{}
		}
		return out, b, nil
	}
	return nil, nil, fmt.Errorf("key encoding of unknown type %v", t)
}

// EncodeKey returns the kv key of the row of d whose primary key columns hold key (in key order,
// each value already checked).
func EncodeKey(d *Descriptor, key []any) []byte {
	b := TablePrefix(d.ID)
	for i, c := range d.KeyColumns() {
		b = appendKeyValue(b, c.Type, key[i])
	}
	return b
}

// DecodeKey reads a row key of d back into its primary key's values, in key order.
func DecodeKey(d *Descriptor, k []byte) ([]any, error) {
	p := TablePrefix(d.ID)
	if !bytes.HasPrefix(k, p) {
		return nil, fmt.Errorf("key %q is not a row of table %q (prefix %q)", k, d.Name, p)
	}
	b := k[len(p):]
	var out []any
	for _, c := range d.KeyColumns() {
		v, rest, err := decodeKeyValue(b, c.Type)
		if err != nil {
			return nil, fmt.Errorf("key %q of table %q, column %q: %w", k, d.Name, c.Name, err)
		}
		out = append(out, v)
		b = rest
	}
	if len(b) != 0 {
		return nil, fmt.Errorf("key %q of table %q: %d bytes after the primary key", k, d.Name, len(b))
	}
	return out, nil
}
