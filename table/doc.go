// Package table is Shoal's typed rows on kv: table descriptors (a name, typed columns, a primary key
// of an ordered list of columns, an id), the order-preserving encoding of a row's primary key into
// a kv key under /t/<table-id>/, the encoding of its other columns into the kv value, and the
// catalog operations (create, describe, list, drop) and row operations (put, get, delete, scan).
//
// Layout of the key space (see docs/design/tables.md):
//
//	/t/_sys/seq            the last table id handed out (a decimal counter, bumped with INCR)
//	/t/_sys/desc/<name>    a table's descriptor (JSON, versioned)
//	/t/_sys/drop/<id>      a drop in progress: the rows of table <id> are still being deleted
//	/t/<id>/<primary key>  a row: the key columns encoded order-preservingly, the others in the value
//
// Because digits sort below '_', every table's rows lie in one contiguous span, in primary-key order,
// apart from the system keys.
//
// The package reaches the store only through the KV interface, which *client.Client satisfies. It
// must never import the node layers (kv, replica, storage): it is a client of the store, as any
// application could be. It must never write a row that failed validation, and it never reuses a
// table id, so rows left behind by an interrupted drop can never show up in a later table.
package table
