package table

import (
	"encoding/json"
	"fmt"
	"strings"
)

// Type is a column's type.
type Type uint8

// Column types. The numbers are stored in row values (value.go): never renumber them.
const (
	Int64     Type = 1 // int64
	Float64   Type = 2 // float64 (NaN and ±Inf refused)
	String    Type = 3 // string (any bytes; JSON makes them UTF-8)
	Bytes     Type = 4 // []byte (base64 in JSON)
	Timestamp Type = 5 // time.Time, stored as int64 nanoseconds since the Unix epoch, in UTC
)

var typeNames = map[Type]string{Int64: "int64", Float64: "float64", String: "string", Bytes: "bytes", Timestamp: "timestamp"}

// String is the type's name as the CLI and descriptors spell it.
func (t Type) String() string {
	if n, ok := typeNames[t]; ok {
		return n
	}
	return fmt.Sprintf("type(%d)", uint8(t))
}

// ParseType reads a type name (int64, float64, string, bytes, timestamp).
func ParseType(s string) (Type, error) {
	for t, n := range typeNames {
		if n == strings.ToLower(s) {
			return t, nil
		}
	}
	return 0, fmt.Errorf("unknown column type %q: use int64, float64, string, bytes or timestamp", s)
}

// MarshalJSON writes the type's name.
func (t Type) MarshalJSON() ([]byte, error) { return json.Marshal(t.String()) }

// UnmarshalJSON reads a type's name.
func (t *Type) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return err
	}
	v, err := ParseType(s)
	if err != nil {
		return err
	}
	*t = v
	return nil
}

// Column is one typed column of a table.
type Column struct {
	Name string `json:"name"`
	Type Type   `json:"type"`
	// ID names the column in row values; assigned at create (1, 2, …) and never reused, so a
	// value stays readable if columns are later added or the primary key changes.
	ID uint32 `json:"id"`
}

// DescriptorVersion is the version of the descriptor's stored JSON.
const DescriptorVersion = 1

// Descriptor describes a table: its columns in order and its primary key.
type Descriptor struct {
	Version int    `json:"version"`
	Name    string `json:"name"`
	// ID is the table's key prefix (/t/<id>/); ids are handed out once and never reused.
	ID         uint64   `json:"id"`
	Columns    []Column `json:"columns"`
	PrimaryKey []string `json:"primary_key"`
	// CreatedUnixMs is when the table was created (the creating client's clock).
	CreatedUnixMs int64 `json:"created_unix_ms,omitempty"`
	// Rekey is the change of primary key under way (package table/rekey), nil when none is.
	Rekey *RekeyState `json:"rekey,omitempty"`
	// RetiredIDs are earlier ids of the table whose rows a re-key left behind, being deleted.
	RetiredIDs []uint64 `json:"retired_ids,omitempty"`
}

// RekeyState is a re-key under way: the rows are being copied to NewID in the order of PrimaryKey.
type RekeyState struct {
	NewID      uint64   `json:"new_id"`
	PrimaryKey []string `json:"primary_key"`
	// FenceID is the span fence that holds the old rows' writes at the end of the copy.
	FenceID       uint64 `json:"fence_id"`
	StartedUnixMs int64  `json:"started_unix_ms"`
	// Progress, as its coordinator last recorded it (every few seconds until the fence): the
	// phase, rows copied, changes followed, the rows the table was estimated to hold (0: unknown).
	Phase         string `json:"phase,omitempty"`
	Rows          int64  `json:"rows,omitempty"`
	Changes       int64  `json:"changes,omitempty"`
	EstimatedRows int64  `json:"estimated_rows,omitempty"`
	UpdatedUnixMs int64  `json:"updated_unix_ms,omitempty"`
}

// Limits of a table's shape. Names are kept short and plain so that they print and type well.
const (
	MaxNameLen = 64
	MaxColumns = 256
)

// Column returns the column named name.
func (d *Descriptor) Column(name string) (Column, bool) {
	for _, c := range d.Columns {
		if c.Name == name {
			return c, true
		}
	}
	return Column{}, false
}

// KeyColumns returns the primary key's columns in key order.
func (d *Descriptor) KeyColumns() []Column {
	out := make([]Column, 0, len(d.PrimaryKey))
	for _, n := range d.PrimaryKey {
		c, _ := d.Column(n)
		out = append(out, c)
	}
	return out
}

// isKey reports whether the column named name is part of the primary key.
func (d *Descriptor) isKey(name string) bool {
	for _, k := range d.PrimaryKey {
		if k == name {
			return true
		}
	}
	return false
}

// ValueColumns returns the columns outside the primary key, in column order.
func (d *Descriptor) ValueColumns() []Column {
	var out []Column
	for _, c := range d.Columns {
		if !d.isKey(c.Name) {
			out = append(out, c)
		}
	}
	return out
}

// validName: a letter or '_', then letters, digits or '_'; at most MaxNameLen bytes.
func validName(what, s string) error {
	if s == "" {
		return invalidf("%s name is empty", what)
	}
	if len(s) > MaxNameLen {
		return invalidf("%s name %.20q… is %d bytes long, the limit is %d", what, s, len(s), MaxNameLen)
	}
	for i, r := range s {
		letter := r == '_' || 'a' <= r && r <= 'z' || 'A' <= r && r <= 'Z'
		if !letter && (i == 0 || r < '0' || r > '9') {
			return invalidf("%s name %q: use letters, digits and '_', starting with a letter or '_'", what, s)
		}
	}
	return nil
}

// Validate checks a descriptor's shape (not its id): a valid name, 1..MaxColumns uniquely named
// columns of known types, and a non-empty primary key of distinct existing columns.
func (d *Descriptor) Validate() error {
	if err := validName("table", d.Name); err != nil {
		return err
	}
	if len(d.Columns) == 0 {
		return invalidf("table %q has no columns", d.Name)
	}
	if len(d.Columns) > MaxColumns {
		return invalidf("table %q has %d columns, the limit is %d", d.Name, len(d.Columns), MaxColumns)
	}
	names := map[string]bool{}
	ids := map[uint32]bool{}
	for _, c := range d.Columns {
		if err := validName("column", c.Name); err != nil {
			return err
		}
		if names[c.Name] {
			return invalidf("table %q: column %q is given twice", d.Name, c.Name)
		}
		names[c.Name] = true
		if _, ok := typeNames[c.Type]; !ok {
			return invalidf("table %q: column %q has an unknown type %d", d.Name, c.Name, c.Type)
		}
		if c.ID == 0 || ids[c.ID] {
			return invalidf("table %q: column %q has id %d, which is zero or taken", d.Name, c.Name, c.ID)
		}
		ids[c.ID] = true
	}
	if len(d.PrimaryKey) == 0 {
		return invalidf("table %q has no primary key", d.Name)
	}
	inKey := map[string]bool{}
	for _, k := range d.PrimaryKey {
		if !names[k] {
			return invalidf("table %q: primary key column %q is not a column", d.Name, k)
		}
		if inKey[k] {
			return invalidf("table %q: column %q is in the primary key twice", d.Name, k)
		}
		inKey[k] = true
	}
	return nil
}

// NewDescriptor builds the descriptor of a new table (id 0 until Create assigns one), numbering the
// columns in order.
func NewDescriptor(name string, cols []Column, primaryKey []string) Descriptor {
	d := Descriptor{Version: DescriptorVersion, Name: name, PrimaryKey: append([]string(nil), primaryKey...)}
	for i, c := range cols {
		c.ID = uint32(i + 1)
		d.Columns = append(d.Columns, c)
	}
	return d
}

// ParseColumns reads a column list as the CLI takes it: "id:int64,name:string".
func ParseColumns(s string) ([]Column, error) {
	var out []Column
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		name, typ, ok := strings.Cut(part, ":")
		if !ok {
			return nil, fmt.Errorf("column %q: want NAME:TYPE", part)
		}
		t, err := ParseType(strings.TrimSpace(typ))
		if err != nil {
			return nil, fmt.Errorf("column %q: %w", name, err)
		}
		out = append(out, Column{Name: strings.TrimSpace(name), Type: t})
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no columns given: want NAME:TYPE[,NAME:TYPE…]")
	}
	return out, nil
}

// ParseKeyList reads a primary key as the CLI takes it: "city,id".
func ParseKeyList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}
