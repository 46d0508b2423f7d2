package profileplan

// Under Raft every voter of a range appends and syncs each of its writes and compacts its data,
// whichever node leads it: a node of the read profile holding voters of write ranges spends its
// disk on them, and its reads queue behind them (every node of a five-node cluster did 40–65 write
// operations a second of its 150 for the writing tenants, whatever it led). MeT's HBase had no such
// cost: a RegionServer writes only the regions it serves, HDFS copies their files. So the voters of
// a range that takes writes go where writes belong.

// TakesWrites reports whether ranges of class c load every voter's disk with their writes.
func TakesWrites(c Class) bool { return c == Write || c == ReadWrite }

// VoterRank orders node profiles as homes for a voter of a range that takes writes, lower first:
// the write profile (big memtables absorb them), read/write, scan, and the read profile last — its
// ranges' point reads are the requests most hurt by a queue at the disk. A node of no plan's
// profile ranks with scan.
func VoterRank(profile Class) int {
	switch profile {
	case Write:
		return 0
	case ReadWrite:
		return 1
	case Read:
		return 3
	}
	return 2
}

// VoterMove picks one voter of a range of class c to move, and where: the voter on the node whose
// profile ranks worst (never keep, the node planned to lead it) to the first of candidates (nodes
// holding no voter of it, in the caller's order of preference) whose profile ranks best, if that
// ranks strictly better. ok is false for a range that takes no writes, or when no move improves.
func VoterMove(c Class, keep uint64, voters []uint64, candidates []uint64, profile func(node uint64) Class) (from, to uint64, ok bool) {
	if !TakesWrites(c) {
		return 0, 0, false
	}
	worst := -1
	for _, v := range voters {
		if r := VoterRank(profile(v)); v != keep && r > worst {
			from, worst = v, r
		}
	}
	best := worst
	for _, n := range candidates {
		if r := VoterRank(profile(n)); r < best {
			to, best = n, r
		}
	}
	return from, to, best < worst
}
