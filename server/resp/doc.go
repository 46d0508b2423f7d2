// Package resp is Shoal's RESP listener: a Redis Cluster subset in front of one node, so that redis-cli,
// go-redis (cluster and plain clients), redis-benchmark and go-ycsb's redis binding work unmodified.
// docs/design/resp.md is the one-page design; this comment is its summary.
//
// # Key encoding
//
// Every Redis key lives in the reserved part of Shoal's key space that starts with 0xFE 'R':
//
//	0xFE 'R' | slot (2 bytes, big-endian) | uvarint(len(key)) | key | tag [| field]
//
// The slot is Redis Cluster's (CRC16-XModem of the key, or of its {hash tag}, mod 16384), so a slot is
// a contiguous key interval and a range is an interval of slots. Tag 0x01 holds a string's value; tag
// 0x02 followed by a field name holds one field of a hash, so HGETALL is a scan of the key's group and
// HSET of one field writes one Shoal key. Every Shoal key of a Redis key shares the group prefix (slot,
// length, key), hence lives in one slot and normally one range.
//
// The rest of Shoal's key space is not visible through RESP, and a RESP key is not the Shoal key of
// the same name: KeyFor and FieldKeyFor give the Shoal key of a Redis key (what `shoal get --redis`
// reads), NameOf takes a Shoal key of the prefix apart, and Name.String renders it for people
// (redis:foo, redis:profile[email]).
//
// Types: a key is a string if its string key exists, else a hash if it has a field, else absent. The
// string key sorts first in the group, so one scan with limit 1 tells the type. SET writes only the
// string key (one raft proposal, no read): hash fields left beside it are hidden by the rule "a string
// hides hash fields" and removed by the next DEL or FLUSHDB. Every hash command checks for the string
// first and answers WRONGTYPE like Redis. String commands that read and write (SET and its options,
// the expiry commands, the INCR family, APPEND, GETSET, GETDEL …) are one Shoal transaction each
// (package txn builds its ops; multi.go), so concurrent increments are never lost; SETNX is a
// compare-and-swap. Type changes racing with each other (HSET against SET on one key) resolve as if the
// string write came last. MULTI … EXEC runs a block of string commands as one transaction, with WATCH
// as compares of modification indexes; all of a block's keys must share a hash slot.
//
// # Slots and ranges
//
// A range [start, end) owns the slots whose first key (SlotStart) it holds. Every slot has exactly one
// owner even when a range boundary falls inside a slot (the automatic size-based split may cut one;
// splits made for RESP should be at SlotStart boundaries). CLUSTER SLOTS, SHARDS and NODES list each
// slot interval with the RESP address of its owner's leader first and the range's other voters as
// replicas; adjacent intervals with the same nodes are merged. A leader without a RESP address (or an
// unknown leader) is replaced by the answering node, which then serves the slot by forwarding.
// CLUSTER NODES gives the matching roles: a node that leads slots is a master; one that leads none but
// is listed as a replica is a replica of the owner whose slots it holds the most of.
//
// # Routing
//
// Every command is first tried on the local node through its pb.ShoalServer methods (lowest latency
// when this node leads the key's range). When that fails because this node does not serve the key
// (NOT_LEADER, RANGE_MOVED, UNAVAILABLE — nothing was written), the rule is:
//
//   - A connection that has issued a CLUSTER command (or READONLY, READWRITE, ASKING) is cluster-aware:
//     its keyed command answers "-MOVED <slot> <addr>" when the slot's owner is another node with a
//     RESP listener. The owner comes from the failed call's leader hint when it concerns the range
//     holding the slot's first key (the same rule as CLUSTER SLOTS, so redirects never loop), else from
//     the slot map. MOVED is only answered by the first backend call of a command, before it changed
//     anything; later calls forward. Multi-key commands must name keys of one slot (CROSSSLOT).
//   - Any other connection is plain: the command is forwarded through package client (one client per
//     listener, starting at the local node), which finds the leader itself. Multi-key commands may
//     span slots and ranges: MSET and DEL apply one batch per range (atomic per range only).
//
// READONLY connections read with bounded staleness (any replica whose state is at most
// client.DefaultMaxStaleness old), as Redis replicas serve them what they have.
// SCAN, KEYS, DBSIZE, FLUSHDB (and FLUSHALL, the same: there is one database) and INFO keyspace cover
// every slot on a plain connection and the slots the node owns on a cluster connection (as in Redis
// Cluster); they never touch keys outside the RESP prefix. The SCAN cursor is the next slot to visit.
//
// # Protocol
//
// The reader (package wire) parses RESP2 multibulk requests and inline commands (with Redis's quoting
// rules) as a stream; pipelined commands run in order and replies are flushed when the input buffer is
// drained.
// A command with a bulk string longer than the node's largest value is read and dropped, and answered
// "-ERR value is N bytes; the limit is L (--max-value-bytes)"; the connection stays. Protocol errors (a
// bulk string over 512 MiB, a bad length, unbalanced quotes, an inline line over 64 KiB) get "-ERR
// Protocol error: ..." and the connection is closed, as Redis does, after a short linger that lets a
// client still sending read the error rather than a reset. Unknown commands, wrong arity and bad
// arguments get an error and the connection stays. HELLO
// answers in RESP2; HELLO 3 gets "-ERR unknown command", on which clients (go-redis included) fall back
// to RESP2. With an auth token every command but AUTH, HELLO and QUIT answers NOAUTH until AUTH <token>
// (user "default" or none).
//
// Shoal errors become Redis errors: NOT_LEADER, RANGE_MOVED, UNAVAILABLE and OVERLOADED left after the
// client's retries become -TRYAGAIN (go-redis retries those), INVALID_ARGUMENT -ERR, CROSS_RANGE
// -CROSSSLOT, a write whose outcome is unknown (TIMEOUT, AMBIGUOUS) -AMBIGUOUS (never TRYAGAIN: it must not be retried blindly).
//
// Not supported: expiry of hashes, other data types, hash commands inside MULTI, scripts, pub/sub,
// databases other than 0, RESP3.
package resp
