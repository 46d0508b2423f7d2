package storage

import (
	"fmt"
	"testing"
)

// BenchmarkCommitJournal is the write path's cost of the journal: batches as a range's apply writes
// them (one user key of 100 bytes and the applied state), unsynced, with journaling off and on.
func BenchmarkCommitJournal(b *testing.B) {
	for _, on := range []bool{false, true} {
		b.Run(fmt.Sprintf("journal=%v", on), func(b *testing.B) {
			e := openTestEngine(b, b.TempDir())
			defer e.Close()
			if on {
				if _, err := e.BeginBackupEpoch(); err != nil {
					b.Fatal(err)
				}
			}
			value := make([]byte, 100)
			var applied [8]byte
			key := make([]byte, 0, 32)
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				batch := e.NewBatch()
				key = fmt.Appendf(key[:0], "user%012d", i%100_000)
				batch.Set(UserDataKey(key), value)
				batch.Set(AppliedStateKey(1), applied[:])
				if err := batch.Commit(false); err != nil {
					b.Fatal(err)
				}
				batch.Close()
			}
		})
	}
}
