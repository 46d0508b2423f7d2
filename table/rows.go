package table

import (
	"bytes"
	"context"
	"fmt"
)

// Table is an open table: its descriptor as read when opened, and the store. Row operations are
// single-key kv operations; an operation on several rows (a scan) is not a snapshot.
type Table struct {
	Desc Descriptor
	kv   KV
	page int
}

// Open reads the descriptor of the table named name.
func (c *Catalog) Open(ctx context.Context, name string) (*Table, error) {
	d, err := c.Describe(ctx, name)
	if err != nil {
		return nil, err
	}
	return &Table{Desc: d, kv: c.kv, page: c.page()}, nil
}

// Put writes row, replacing any row with the same primary key. A row that does not fit the
// descriptor is refused with INVALID_ARGUMENT before anything is sent.
func (t *Table) Put(ctx context.Context, row Row) error {
	k, v, err := t.Desc.EncodeRow(row)
	if err != nil {
		return err
	}
	if err := t.kv.Put(ctx, k, v); err != nil {
		return fmt.Errorf("table %q: put: %w", t.Desc.Name, err)
	}
	return nil
}

// Get returns the row whose primary key is key (values in key order) and whether it exists.
func (t *Table) Get(ctx context.Context, key ...any) (Row, bool, error) {
	kv, err := t.Desc.checkKey(key)
	if err != nil {
		return nil, false, err
	}
	k := EncodeKey(&t.Desc, kv)
	v, found, err := t.kv.Get(ctx, k)
	if err != nil {
		return nil, false, fmt.Errorf("table %q: get: %w", t.Desc.Name, err)
	}
	if !found {
		return nil, false, nil
	}
	row, err := t.Desc.DecodeRow(k, v)
	return row, err == nil, err
}

// Delete removes the row whose primary key is key and reports whether it existed.
func (t *Table) Delete(ctx context.Context, key ...any) (bool, error) {
	kv, err := t.Desc.checkKey(key)
	if err != nil {
		return false, err
	}
	found, err := t.kv.Delete(ctx, EncodeKey(&t.Desc, kv))
	if err != nil {
		return false, fmt.Errorf("table %q: delete: %w", t.Desc.Name, err)
	}
	return found, nil
}

// Scan calls fn with the table's rows in primary-key order, at most limit of them (0: all), reading
// a page at a time; it stops early, without error, when fn returns false.
func (t *Table) Scan(ctx context.Context, limit int, fn func(Row) bool) error {
	if limit < 0 {
		return invalidf("scan of table %q: limit %d is negative", t.Desc.Name, limit)
	}
	start, end := TableSpan(t.Desc.ID)
	seen := 0
	for {
		n := t.page
		if limit > 0 && limit-seen < n {
			n = limit - seen
		}
		kvs, err := t.kv.Scan(ctx, start, end, n, false)
		if err != nil {
			return fmt.Errorf("table %q: scan: %w", t.Desc.Name, err)
		}
		for _, e := range kvs {
			row, err := t.Desc.DecodeRow(e.Key, e.Value)
			if err != nil {
				return err
			}
			seen++
			if !fn(row) {
				return nil
			}
		}
		if len(kvs) < n || limit > 0 && seen >= limit {
			return nil
		}
		start = append(bytes.Clone(kvs[len(kvs)-1].Key), 0)
	}
}
