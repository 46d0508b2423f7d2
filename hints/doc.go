// Package hints owns read hints (docs/design/read-hints.md; Papaioannou & Magoutis, "read hints"): a
// range's leader records a minimal description of every read it serves (a point key, or a scan's
// start, end and limit), ships these hints in batches to the range's other replicas, and they replay
// them through their storage engine's normal read path, so that their block caches follow the
// leader's and a leadership change finds the new leader warm.
//
// It owns the capture buffer (Buffer), the shipping loop and per-peer queues (Shipper), the
// receiver's apply pool with selective and load-adaptive replay (Applier), per-range warmth
// (Warmth, WaitWarm), and the gRPC service and client (Service, StreamSender, Client). Module puts
// them together for a node. Its sub-packages hold the parts with narrow interfaces: the hints
// themselves and their wire encodings (hint), the hot-key summary a restarted peer asks for
// (hotkeys), the Reader over the node's storage engine (enginereader), and the process CPU load
// that capture and replay adapt to (cpuload).
//
// It must never write to the engine, never block or fail a client's read or write (capture drops
// and counts instead of waiting; shipping and applying are asynchronous and bounded), never retry
// or persist hints, and never take part in Raft: hints travel on their own gRPC service, outside the
// raft log and the raft transport.
//
// # Consistency
//
// Replaying a hint cannot break linearizability or make any read return stale data:
//
//   - A replay is a read. The Reader reads the local engine and discards what it read; the only
//     effect is on the engine's block cache (and the OS page cache), which are caches of the engine's
//     files and are kept coherent with them by the engine itself.
//   - A replay sees the newest state applied on that replica, like any local read. Hints may be
//     reordered with respect to Raft entries, delayed, duplicated or lost; the worst outcome is a
//     cache that holds blocks nobody asks for, or lacks some that they do — a performance
//     difference, never a correctness one.
//   - Hints change nothing Raft or the read protocol rely on. A replica that becomes leader serves
//     reads only after the usual checks — its leader lease or a ReadIndex round — exactly as without
//     hints; a warm cache only makes those reads faster.
//
// Invariant (accounting, asserted in the tests): on the capturing node every read offered to Record
// is recorded or dropped (buffer_full, too_large); every recorded read is shipped either as a hint
// or folded into an identical hint of its batch (Summarized); every hint × chosen peer is shipped
// or dropped (no_peers, peer_queue_full, send_error, closed). On the receiver every hint received is
// applied or dropped (apply_queue_full, overloaded, selective, no_replica, replay_error, closed,
// wrong_cluster, one_off).
//
// # Wiring (the node's read-hints adapter and autopilot host)
//
// The node builds one Module (New) with a Sender (StreamSender over its peer connections), a Reader
// (enginereader.New over its engine, bounded by its replicas' spans) and Config.Peers (each range's
// other replicas); it registers Module.Service on its gRPC server, calls Record/RecordScan after a
// leader's read, Client.WaitWarm before an autopilot leadership transfer, Module.WarmFromPeer when
// a replica starts (or, while its applier sheds replays for load, Module.DeferWarm, with
// Module.SetWarmUp telling the module how to warm one replica from its peers; WaitWarm runs a
// put-off warm-up first), Module.Forget when one leaves, and exports Module.Collectors. A new node
// learns its identity after the module is built: Module.SetIdentity. Its load signal (LoadFunc) is
// cpuload.Meter's Load, raised by its disk's utilization while it serves.
package hints
