package table

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/shoaldb/shoal/client"
)

// ScanPrefix calls fn with the rows whose leading primary-key columns hold prefix's values, in
// primary-key order (descending with reverse), at most limit of them (0: all), a page at a time; it
// stops early, without error, when fn returns false. prefix names the key's first len(prefix)
// columns (the map's order does not matter; an empty prefix is the whole table); any other set of
// columns is refused with INVALID_ARGUMENT, so that a scan never silently means something else
// after a re-key changed the key. Like Scan, it is not a snapshot. A scan that meets a re-key's
// cutover before it has delivered a row starts again on the new keyspace; one that meets it later
// fails, since the rows it delivered may come again in another order.
func (t *Table) ScanPrefix(ctx context.Context, prefix Row, limit int, reverse bool, fn func(Row) bool) error {
	if limit < 0 {
		return invalidf("scan of table %q: limit %d is negative", t.desc().Name, limit)
	}
	delivered := 0
	return t.followRekey(ctx, func(d *Descriptor) error {
		start, end, err := d.prefixSpan(prefix)
		if err != nil {
			return err
		}
		err = t.scanSpan(ctx, d, start, end, limit, reverse, &delivered, fn)
		if delivered > 0 && errors.Is(err, client.ErrSpanRetired) {
			return fmt.Errorf("table %q: re-keyed after %d rows of a prefix scan: %v", d.Name, delivered, err)
		}
		return err
	})
}

// scanSpan calls fn with the rows of d in [start, end), in key order (descending with reverse), a
// page at a time, until limit rows (0: all) counted in *seen were delivered or fn returns false.
func (t *Table) scanSpan(ctx context.Context, d *Descriptor, start, end []byte, limit int, reverse bool, seen *int, fn func(Row) bool) error {
	for {
		n := t.page
		if limit > 0 && limit-*seen < n {
			n = limit - *seen
		}
		kvs, err := t.kv.Scan(ctx, start, end, n, reverse)
		if err != nil {
			return fmt.Errorf("table %q: scan: %w", d.Name, err)
		}
		for _, e := range kvs {
			row, err := d.DecodeRow(e.Key, e.Value)
			if err != nil {
				return err
			}
			*seen++
			if !fn(row) {
				return nil
			}
		}
		if len(kvs) < n || limit > 0 && *seen >= limit {
			return nil
		}
		last := kvs[len(kvs)-1].Key
		if reverse {
			end = bytes.Clone(last) // the end is exclusive
		} else {
			start = append(bytes.Clone(last), 0)
		}
	}
}

// prefixSpan is the span of the rows of d whose first key columns hold prefix's values.
func (d *Descriptor) prefixSpan(prefix Row) (start, end []byte, err error) {
	kc := d.KeyColumns()
	if len(prefix) > len(kc) {
		return nil, nil, invalidf("table %q: a prefix of %d columns is longer than the primary key (%v)", d.Name, len(prefix), d.PrimaryKey)
	}
	start = TablePrefix(d.ID)
	for _, c := range kc[:len(prefix)] {
		v, ok := prefix[c.Name]
		if !ok {
			return nil, nil, invalidf("table %q: a prefix scan takes the primary key's first %d column(s) of %v, got %v", d.Name, len(prefix), d.PrimaryKey, rowColumns(prefix))
		}
		if v, err = checkValue(d.Name, c, v); err != nil {
			return nil, nil, err
		}
		start = appendKeyValue(start, c.Type, v)
	}
	return start, spanEnd(start), nil
}

// spanEnd is the first key after every key starting with p: p with its trailing 0xFF bytes dropped
// and the last other byte incremented (p always keeps the table prefix's '/').
func spanEnd(p []byte) []byte {
	e := bytes.Clone(p)
	for len(e) > 0 && e[len(e)-1] == 0xFF {
		e = e[:len(e)-1]
	}
	e[len(e)-1]++
	return e
}

func rowColumns(r Row) []string { return slices.Sorted(maps.Keys(r)) }
