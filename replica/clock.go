package replica

import "time"

// Expiry's clock. A key's expiry is an absolute wall-clock time. Writes are judged at the clock the
// leader stamped on the command when it proposed it (Command.clock_unix_ms), so every replica
// applies them alike; reads on the leader are judged at its wall clock when it serves them under
// its lease (or after a ReadIndex round). The assumption, like the lease's bound on clock drift, is
// that the nodes' wall clocks differ by less than the time between one leader's last read and the
// next leader's first one (at least (1-leaseFraction) of an election timeout): otherwise a new
// leader whose clock is behind could show a key the old one had already reported expired. ClockMs
// never runs behind the latest clock the replica applied, which covers a leader change after any
// write since the key expired (the expiry sweeper writes).

// ClockMs is the time (Unix ms) at which this replica judges expiry now.
func (r *Replica) ClockMs() int64 {
	return max(time.Now().UnixMilli(), r.clockFloor.Load())
}

// observeClock raises the replica's clock floor to a command's stamp.
func (r *Replica) observeClock(ms int64) {
	for {
		cur := r.clockFloor.Load()
		if ms <= cur || r.clockFloor.CompareAndSwap(cur, ms) {
			return
		}
	}
}
