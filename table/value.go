package table

import (
	"encoding/binary"
	"fmt"
	"math"
	"sort"
	"time"
)

// Row is one row: column name → value. Values are int64, float64, string, []byte or time.Time as the
// column's type says; a non-key column that is absent (or nil) is NULL and is not stored.
type Row map[string]any

// Size limits of a row. The store refuses keys over 4 KiB and values over 8 MiB by default
// (kv.DefaultMaxKeyBytes, kv.DefaultMaxValueBytes); a row stays well inside both, so that a scan
// page of rows stays a modest gRPC message and a row never meets a limit a node may lower.
const (
	// MaxKeyBytes bounds a row's kv key: the table prefix and the encoded primary key.
	MaxKeyBytes = 1 << 10
	// MaxRowBytes bounds a row's kv value: the encoded non-key columns.
	MaxRowBytes = 1 << 20
)

// rowValueV1 leads every row value of the first format: after it, for each non-NULL non-key
// column in column order, uvarint(column id), one type byte, and the value: int64 and timestamp
// as a zigzag varint (nanoseconds for a timestamp), float64 as 8 little-endian bytes of its IEEE
// bits, string and bytes as uvarint(length) and the bytes. Columns are tagged with their ids
// and types so that a value stays readable when the descriptor gains columns or changes its key.
const rowValueV1 = 1

// checkValue returns v as column c stores it, or an INVALID_ARGUMENT error.
func checkValue(table string, c Column, v any) (any, error) {
	bad := func() (any, error) {
		return nil, invalidf("table %q: column %q is %v, got %T %v", table, c.Name, c.Type, v, v)
	}
	switch c.Type {
	case Int64:
		switch x := v.(type) {
		case int64:
			return x, nil
		case int:
			return int64(x), nil
		}
	case Float64:
		x, ok := v.(float64)
		if !ok {
			return bad()
		}
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return nil, invalidf("table %q: column %q: %v is not a finite number", table, c.Name, x)
		}
		return x, nil
	case String:
		if x, ok := v.(string); ok {
			return x, nil
		}
	case Bytes:
		if x, ok := v.([]byte); ok {
			return x, nil
		}
	case Timestamp:
		if x, ok := v.(time.Time); ok {
			// UnixNano is defined for 1678..2262 only.
			if x.Year() < 1678 || x.Year() > 2261 {
				return nil, invalidf("table %q: column %q: timestamp %v is outside 1678..2261", table, c.Name, x)
			}
			return time.Unix(0, x.UnixNano()).UTC(), nil
		}
	}
	return bad()
}

// checkKey checks the primary key values given in key order.
func (d *Descriptor) checkKey(key []any) ([]any, error) {
	kc := d.KeyColumns()
	if len(key) != len(kc) {
		return nil, invalidf("table %q: primary key (%v) has %d column(s), %d value(s) given", d.Name, d.PrimaryKey, len(kc), len(key))
	}
	out := make([]any, len(key))
	for i, c := range kc {
		v, err := checkValue(d.Name, c, key[i])
		if err != nil {
			return nil, err
		}
		out[i] = v
	}
	k := EncodeKey(d, out)
	if len(k) > MaxKeyBytes {
		return nil, invalidf("table %q: the primary key encodes to %d bytes, the limit is %d", d.Name, len(k), MaxKeyBytes)
	}
	return out, nil
}

// EncodeRow checks row against d and returns its kv key and value. Any error is INVALID_ARGUMENT:
// an unknown column, a value of the wrong type, a missing key column, or a row over the limits.
func (d *Descriptor) EncodeRow(row Row) (key, value []byte, err error) {
	names := make([]string, 0, len(row))
	for n := range row {
		names = append(names, n)
	}
	sort.Strings(names) // the first unknown column named is the same every time
	for _, n := range names {
		if _, ok := d.Column(n); !ok {
			return nil, nil, invalidf("table %q has no column %q (columns: %s)", d.Name, n, d.columnList())
		}
	}
	kv := make([]any, 0, len(d.PrimaryKey))
	for _, k := range d.PrimaryKey {
		v, ok := row[k]
		if !ok || v == nil {
			return nil, nil, invalidf("table %q: primary key column %q is missing", d.Name, k)
		}
		kv = append(kv, v)
	}
	if kv, err = d.checkKey(kv); err != nil {
		return nil, nil, err
	}
	key = EncodeKey(d, kv)
	value = []byte{rowValueV1}
	for _, c := range d.ValueColumns() {
		v, ok := row[c.Name]
		if !ok || v == nil {
			continue
		}
		if v, err = checkValue(d.Name, c, v); err != nil {
			return nil, nil, err
		}
		value = binary.AppendUvarint(value, uint64(c.ID))
		value = append(value, byte(c.Type))
		switch c.Type {
		case Int64:
			value = binary.AppendVarint(value, v.(int64))
		case Timestamp:
			value = binary.AppendVarint(value, v.(time.Time).UnixNano())
		case Float64:
			value = binary.LittleEndian.AppendUint64(value, math.Float64bits(v.(float64)))
		case String:
			value = binary.AppendUvarint(value, uint64(len(v.(string))))
			value = append(value, v.(string)...)
		case Bytes:
			value = binary.AppendUvarint(value, uint64(len(v.([]byte))))
			value = append(value, v.([]byte)...)
		}
		if len(value) > MaxRowBytes {
			return nil, nil, invalidf("table %q: the row's non-key columns encode to over %d bytes, the limit", d.Name, MaxRowBytes)
		}
	}
	return key, value, nil
}

func (d *Descriptor) columnList() string {
	s := ""
	for i, c := range d.Columns {
		if i > 0 {
			s += ", "
		}
		s += c.Name + ":" + c.Type.String()
	}
	return s
}

// DecodeRow reads a row of d from its kv key and value.
func (d *Descriptor) DecodeRow(key, value []byte) (Row, error) {
	kv, err := DecodeKey(d, key)
	if err != nil {
		return nil, err
	}
	row := Row{}
	for i, n := range d.PrimaryKey {
		row[n] = kv[i]
	}
	if len(value) == 0 || value[0] != rowValueV1 {
		return nil, fmt.Errorf("row %q of table %q: unknown value format (first byte %v)", key, d.Name, value[:min(1, len(value))])
	}
	byID := map[uint32]Column{}
	for _, c := range d.ValueColumns() {
		byID[c.ID] = c
	}
	b := value[1:]
	fail := func(what string) (Row, error) {
		return nil, fmt.Errorf("row %q of table %q: value is corrupt at byte %d: %s", key, d.Name, len(value)-len(b), what)
	}
	for len(b) > 0 {
		id, n := binary.Uvarint(b)
		if n <= 0 || len(b) < n+1 {
			return fail("column id")
		}
		t := Type(b[n])
		b = b[n+1:]
		var v any
		switch t {
		case Int64, Timestamp:
			x, n := binary.Varint(b)
			if n <= 0 {
				return fail("varint")
			}
			b = b[n:]
			v = x
			if t == Timestamp {
				v = time.Unix(0, x).UTC()
			}
		case Float64:
			if len(b) < 8 {
				return fail("float")
			}
			v = math.Float64frombits(binary.LittleEndian.Uint64(b))
			b = b[8:]
		case String, Bytes:
			l, n := binary.Uvarint(b)
			if n <= 0 || uint64(len(b)-n) < l {
				return fail("length")
			}
			s := b[n : n+int(l)]
			b = b[n+int(l):]
			if t == String {
				v = string(s)
			} else {
				v = append([]byte{}, s...)
			}
		default:
			return fail(fmt.Sprintf("type %d", t))
		}
		c, ok := byID[uint32(id)]
		if !ok {
			continue // a column this descriptor does not have (or has in its key): skip it
		}
		if c.Type != t {
			return fail(fmt.Sprintf("column %q is %v in the descriptor, %v in the value", c.Name, c.Type, t))
		}
		row[c.Name] = v
	}
	return row, nil
}
