package table

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"strconv"
	"time"
)

// Rows as JSON (the CLI's format, a contract): an object with one member per column, in column
// order; int64 and float64 as JSON numbers, string as a string, bytes as a base64 string (standard
// alphabet, padded), timestamp as an RFC 3339 string in UTC with nanoseconds when it has them, and
// NULL (an absent non-key column) as null.

// ParseRowJSON reads a row of d from a JSON object. Any error is INVALID_ARGUMENT: bad JSON, a
// member given twice, an unknown column, a value of the wrong type.
func ParseRowJSON(d *Descriptor, b []byte) (Row, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	tok, err := dec.Token()
	if err != nil {
		return nil, invalidf("row of table %q: %v", d.Name, err)
	}
	if delim, ok := tok.(json.Delim); !ok || delim != '{' {
		return nil, invalidf("row of table %q: want a JSON object, got %v", d.Name, tok)
	}
	row := Row{}
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, invalidf("row of table %q: %v", d.Name, err)
		}
		name := tok.(string) // an object's member names are strings
		var raw any
		if err := dec.Decode(&raw); err != nil {
			return nil, invalidf("row of table %q, column %q: %v", d.Name, name, err)
		}
		if seen[name] {
			return nil, invalidf("row of table %q: column %q is given twice", d.Name, name)
		}
		seen[name] = true
		c, ok := d.Column(name)
		if !ok {
			return nil, invalidf("table %q has no column %q (columns: %s)", d.Name, name, d.columnList())
		}
		if raw == nil {
			continue // NULL
		}
		v, err := fromJSON(d.Name, c, raw)
		if err != nil {
			return nil, err
		}
		row[name] = v
	}
	if _, err := dec.Token(); err != nil { // the closing brace
		return nil, invalidf("row of table %q: %v", d.Name, err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, invalidf("row of table %q: data after the JSON object", d.Name)
	}
	return row, nil
}

// fromJSON converts one decoded JSON value (numbers as json.Number) to column c's type.
func fromJSON(table string, c Column, raw any) (any, error) {
	bad := func(why string) (any, error) {
		return nil, invalidf("table %q: column %q is %v: %s", table, c.Name, c.Type, why)
	}
	switch c.Type {
	case Int64, Float64:
		n, ok := raw.(json.Number)
		if !ok {
			return bad("got a JSON " + jsonKind(raw))
		}
		return parseNumber(table, c, string(n))
	case String:
		if s, ok := raw.(string); ok {
			return s, nil
		}
	case Bytes, Timestamp:
		if s, ok := raw.(string); ok {
			return ParseValue(table, c, s)
		}
	}
	return bad("got a JSON " + jsonKind(raw))
}

func parseNumber(table string, c Column, s string) (any, error) {
	if c.Type == Int64 {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return nil, invalidf("table %q: column %q is int64: %q is not a 64-bit integer", table, c.Name, s)
		}
		return n, nil
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return nil, invalidf("table %q: column %q is float64: %q is not a finite number", table, c.Name, s)
	}
	return checkValue(table, c, f)
}

func jsonKind(v any) string {
	switch v.(type) {
	case string:
		return "string"
	case json.Number:
		return "number"
	case bool:
		return "boolean"
	case []any:
		return "array"
	case map[string]any:
		return "object"
	}
	return "null"
}

// ParseValue reads a value of column c from text, as the CLI takes primary keys: int64 and float64
// as numbers, string as is, bytes in base64, timestamp in RFC 3339.
func ParseValue(table string, c Column, s string) (any, error) {
	switch c.Type {
	case Int64, Float64:
		return parseNumber(table, c, s)
	case String:
		return s, nil
	case Bytes:
		b, err := base64.StdEncoding.DecodeString(s)
		if err != nil {
			return nil, invalidf("table %q: column %q is bytes, given in base64: %v", table, c.Name, err)
		}
		return b, nil
	case Timestamp:
		t, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			return nil, invalidf("table %q: column %q is a timestamp, given in RFC 3339 (2006-01-02T15:04:05Z): %v", table, c.Name, err)
		}
		return checkValue(table, c, t)
	}
	return nil, invalidf("table %q: column %q has an unknown type", table, c.Name)
}

// ParseKey reads a primary key from text, one string per key column in key order.
func ParseKey(d *Descriptor, args []string) ([]any, error) {
	kc := d.KeyColumns()
	if len(args) != len(kc) {
		return nil, invalidf("table %q: primary key (%v) has %d column(s), %d value(s) given", d.Name, d.PrimaryKey, len(kc), len(args))
	}
	out := make([]any, len(args))
	for i, c := range kc {
		v, err := ParseValue(d.Name, c, args[i])
		if err != nil {
			return nil, err
		}
		out[i] = v
	}
	return out, nil
}

// FormatValue renders a value as text: what ParseValue reads back ("NULL" for nil).
func FormatValue(v any) string {
	switch x := v.(type) {
	case nil:
		return "NULL"
	case int64:
		return strconv.FormatInt(x, 10)
	case float64:
		return strconv.FormatFloat(x, 'g', -1, 64)
	case string:
		return x
	case []byte:
		return base64.StdEncoding.EncodeToString(x)
	case time.Time:
		return x.UTC().Format(time.RFC3339Nano)
	}
	return "?"
}

// RowJSON renders row as a JSON object with the columns of d in column order.
func RowJSON(d *Descriptor, row Row) json.RawMessage {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, c := range d.Columns {
		if i > 0 {
			b.WriteByte(',')
		}
		writeJSON(&b, c.Name)
		b.WriteByte(':')
		v := row[c.Name]
		if t, ok := v.(time.Time); ok {
			v = t.UTC().Format(time.RFC3339Nano)
		}
		writeJSON(&b, v)
	}
	b.WriteByte('}')
	return b.Bytes()
}

// writeJSON appends v's JSON to b, leaving <, > and & as they are (as the CLI prints every string).
// Only names, finite numbers, strings and bytes reach it, so encoding cannot fail; if it did, the
// value is written as null rather than a broken document.
func writeJSON(b *bytes.Buffer, v any) {
	var one bytes.Buffer
	enc := json.NewEncoder(&one)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		b.WriteString("null")
		return
	}
	b.Write(bytes.TrimSuffix(one.Bytes(), []byte("\n")))
}
