package storage

import (
	"bytes"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"sync"

	"github.com/cockroachdb/pebble/v2"
)

// The change journal says which user keys were written since a backup, so that the next incremental
// backup reads those keys instead of every key the node holds. Pebble cannot say it: it zeroes the
// sequence numbers of keys compacted into the bottom level.
//
// Every batch commit that writes user keys also writes, in the same batch, one journal key per user
// key it puts or deletes, under the journal's current epoch; a range deletion over user keys and an
// sstable ingest record the span instead. A backup bumps the epoch and then takes its checkpoint.
//
// Invariant: a write whose journal entry carries epoch ≤ E is in every checkpoint taken after the bump
// from E to E+1. A commit reads the epoch and commits under the journal's read lock; the bump takes
// the write lock, so it waits for every commit that read the old epoch, and the checkpoint follows it.
// So a write missing from a backup's checkpoint is journaled under an epoch after the backup's mark.
//
// Journaling starts with the first backup (BeginBackupEpoch): a node that never backs up writes no
// journal keys. Keys of epochs up to the newest completed backup's mark are trimmed (TrimJournal).
//
//	0x06 <epoch:8> 'p' <user key>        a user key put or deleted (empty value)
//	0x06 <epoch:8> 's' <start>           a span of user keys replaced or deleted; value: its end
//	                                     (empty: the end of the user keyspace)
//	0x01 "journal/state"                 id:16 epoch:8 — the journal's identity and current epoch
//	0x01 "journal/start"                 start:8 — entries of every epoch after start are complete
const prefixJournal = 0x06

var (
	journalStateKey = LocalKey("journal/state")
	journalStartKey = LocalKey("journal/start")
)

// journal is the engine's change-journal state.
type journal struct {
	// mu is read-locked by every commit (around reading the epoch and committing) and write-locked by
	// the epoch's bump, which is what orders writes against a backup's checkpoint.
	mu    sync.RWMutex
	on    bool
	id    [16]byte
	epoch uint64
	// trimMu serializes trims (each raises start to the highest mark seen).
	trimMu sync.Mutex
	// ingests counts the ingests in flight by the epoch they started under; a bump waits for those of
	// the epochs it closes (ingestDone signals under ingestMu) without holding writers back meanwhile.
	ingestMu   sync.Mutex
	ingestDone *sync.Cond
	ingests    map[uint64]int
}

// JournalMark is what a backup records of the journal at its checkpoint: the journal's identity and
// the epoch the bump closed. Every write missing from the checkpoint is journaled under a later epoch.
type JournalMark struct {
	ID    string `json:"id"`
	Epoch uint64 `json:"epoch"`
}

// JournalState is the journal as a checkpoint (or the live engine) holds it.
type JournalState struct {
	On bool
	ID string
	// Epoch is the epoch commits journal under.
	Epoch uint64
	// Start: the journal holds every entry of every epoch after Start (older ones are trimmed).
	Start uint64
}

// loadJournal reads the journal's state at Open.
func (e *Engine) loadJournal() error {
	st, err := ReadJournalState(e.Get)
	if err != nil {
		return err
	}
	if st.On {
		e.journal.on, e.journal.epoch = true, st.Epoch
		if _, err := hex.Decode(e.journal.id[:], []byte(st.ID)); err != nil {
			return fmt.Errorf("journal state: %w", err)
		}
	}
	return nil
}

// ReadJournalState reads the journal's state through get (an engine's or a checkpoint's Get).
func ReadJournalState(get func(key []byte) ([]byte, bool, error)) (JournalState, error) {
	v, ok, err := get(journalStateKey)
	if err != nil || !ok {
		return JournalState{}, err
	}
	if len(v) != 24 {
		return JournalState{}, fmt.Errorf("journal state of %d bytes is corrupt", len(v))
	}
	st := JournalState{On: true, ID: hex.EncodeToString(v[:16]), Epoch: binary.BigEndian.Uint64(v[16:])}
	if v, ok, err := get(journalStartKey); err != nil {
		return JournalState{}, err
	} else if ok && len(v) == 8 {
		st.Start = binary.BigEndian.Uint64(v)
	}
	return st, nil
}

// JournalState returns the live engine's journal state.
func (e *Engine) JournalState() (JournalState, error) { return ReadJournalState(e.Get) }

// BeginBackupEpoch closes the journal's current epoch for a backup about to take its checkpoint and
// returns the mark the backup records; it starts journaling on the first call. The new state is
// synced before it returns: a restarted node never journals under a closed epoch.
func (e *Engine) BeginBackupEpoch() (JournalMark, error) {
	m, err := e.bumpEpoch()
	if err != nil {
		return m, err
	}
	// An ingest that started under a closed epoch must be in the checkpoint that follows.
	j := &e.journal
	j.ingestMu.Lock()
	for j.ingestsUpTo(m.Epoch) {
		j.ingestDone.Wait()
	}
	j.ingestMu.Unlock()
	return m, nil
}

func (j *journal) ingestsUpTo(epoch uint64) bool {
	for ep, n := range j.ingests {
		if ep <= epoch && n > 0 {
			return true
		}
	}
	return false
}

func (e *Engine) bumpEpoch() (JournalMark, error) {
	j := &e.journal
	j.mu.Lock()
	defer j.mu.Unlock()
	b := e.db.NewBatch()
	defer b.Close()
	id, epoch := j.id, j.epoch
	if !j.on {
		if _, err := rand.Read(id[:]); err != nil {
			return JournalMark{}, fmt.Errorf("journal id: %w", err)
		}
		// Nothing before the first backup is journaled: its mark is where the journal starts.
		if err := b.Set(journalStartKey, binary.BigEndian.AppendUint64(nil, epoch), nil); err != nil {
			return JournalMark{}, err
		}
	}
	state := binary.BigEndian.AppendUint64(append([]byte(nil), id[:]...), epoch+1)
	if err := b.Set(journalStateKey, state, nil); err != nil {
		return JournalMark{}, err
	}
	if err := b.Commit(pebble.Sync); err != nil {
		return JournalMark{}, fmt.Errorf("journal: begin epoch %d: %w", epoch+1, err)
	}
	j.on, j.id, j.epoch = true, id, epoch+1
	return JournalMark{ID: hex.EncodeToString(id[:]), Epoch: epoch}, nil
}

// TrimJournal deletes the entries of every epoch up to through (a completed backup's mark): the next
// incremental is taken against that backup or a newer one. An incremental against an older backup
// finds the journal trimmed past its parent and diffs instead.
func (e *Engine) TrimJournal(through uint64) error {
	j := &e.journal
	j.trimMu.Lock()
	defer j.trimMu.Unlock()
	st, err := e.JournalState()
	if err != nil || !st.On || through <= st.Start {
		return err
	}
	b := e.db.NewBatch()
	defer b.Close()
	lo, _ := JournalEpochSpan(0)
	hi, _ := JournalEpochSpan(through + 1)
	if err := b.DeleteRange(lo, hi, nil); err != nil {
		return err
	}
	if err := b.Set(journalStartKey, binary.BigEndian.AppendUint64(nil, through), nil); err != nil {
		return err
	}
	if err := b.Commit(pebble.Sync); err != nil {
		return fmt.Errorf("journal: trim through epoch %d: %w", through, err)
	}
	return nil
}

// DisableJournal stops journaling and deletes the journal: the next incremental diffs.
func (e *Engine) DisableJournal() error {
	j := &e.journal
	j.mu.Lock()
	defer j.mu.Unlock()
	b := e.db.NewBatch()
	defer b.Close()
	_ = b.Delete(journalStateKey, nil)
	_ = b.Delete(journalStartKey, nil)
	_ = b.DeleteRange([]byte{prefixJournal}, []byte{prefixJournal + 1}, nil)
	if err := b.Commit(pebble.Sync); err != nil {
		return fmt.Errorf("journal: disable: %w", err)
	}
	j.on = false
	return nil
}

// JournalEpochSpan is the span of the journal entries of one epoch.
func JournalEpochSpan(epoch uint64) (lo, hi []byte) {
	lo = binary.BigEndian.AppendUint64([]byte{prefixJournal}, epoch)
	hi = binary.BigEndian.AppendUint64([]byte{prefixJournal}, epoch+1)
	return lo, hi
}

// JournalPointSpan is the span of epoch's entries for user keys in [start, end) (end empty: to the
// end of the user keyspace).
func JournalPointSpan(epoch uint64, start, end []byte) (lo, hi []byte) {
	p := append(binary.BigEndian.AppendUint64([]byte{prefixJournal}, epoch), 'p')
	lo = append(append([]byte(nil), p...), start...)
	if len(end) == 0 {
		hi = append(p[:len(p)-1:len(p)-1], 'q')
	} else {
		hi = append(append([]byte(nil), p...), end...)
	}
	return lo, hi
}

// JournalSpanMarkers is the span of epoch's span markers.
func JournalSpanMarkers(epoch uint64) (lo, hi []byte) {
	p := binary.BigEndian.AppendUint64([]byte{prefixJournal}, epoch)
	return append(append([]byte(nil), p...), 's'), append(p, 't')
}

// JournalUserKey is the user key of a point entry (a key of JournalPointSpan), or of a span marker's
// start.
func JournalUserKey(k []byte) []byte { return k[10:] }

// journalScratch builds the journal keys of one commit.
type journalScratch struct{ buf []byte }

func (s *journalScratch) key(epoch uint64, kind byte, userKey []byte) []byte {
	s.buf = append(binary.BigEndian.AppendUint64(append(s.buf[:0], prefixJournal), epoch), kind)
	return append(s.buf, userKey...)
}

// commit commits b, with its journal entries when journaling is on.
func (e *Engine) commit(b *Batch, o *pebble.WriteOptions) error {
	if !b.user {
		return b.b.Commit(o) // nothing to journal, nothing a backup's epoch bump must order
	}
	j := &e.journal
	j.mu.RLock()
	defer j.mu.RUnlock()
	if j.on {
		if err := journalBatch(b, j.epoch); err != nil {
			return fmt.Errorf("journal: %w", err)
		}
	}
	return b.b.Commit(o)
}

// journalBatch adds the journal entries of b's writes to user keys to b. Points inside a span the
// same batch deletes are covered by the span's marker and not journaled one by one.
func journalBatch(b *Batch, epoch uint64) error {
	var buf [128]byte
	s := journalScratch{buf: buf[:0]}
	var spans [][2][]byte
	if b.rangeDels {
		r := b.b.Reader()
		for {
			kind, k, v, ok, err := r.Next()
			if err != nil {
				return err
			}
			if !ok {
				break
			}
			if kind != pebble.InternalKeyKindRangeDelete {
				continue
			}
			lo, hi, ok := userPart(k, v)
			if !ok {
				continue
			}
			spans = append(spans, [2][]byte{lo, hi})
			if err := b.b.Set(s.key(epoch, 's', lo), hi, nil); err != nil {
				return err
			}
		}
	}
	r := b.b.Reader()
	for {
		kind, k, _, ok, err := r.Next()
		if err != nil {
			return err
		}
		if !ok {
			return nil
		}
		if len(k) == 0 || k[0] != prefixUser || kind == pebble.InternalKeyKindRangeDelete || kind == pebble.InternalKeyKindLogData {
			continue
		}
		uk := k[1:]
		if inSpans(spans, uk) {
			continue
		}
		if err := b.b.Set(s.key(epoch, 'p', uk), nil, nil); err != nil {
			return err
		}
	}
}

// userPart clips the engine span [lo, hi) to the user keyspace and strips the prefix (hi empty: to
// the end of the keyspace); ok is false when the span holds no user key.
func userPart(lo, hi []byte) (ulo, uhi []byte, ok bool) {
	ulo, uhi = []byte{}, []byte{}
	if bytes.Compare(hi, []byte{prefixUser}) <= 0 || (len(lo) > 0 && lo[0] > prefixUser) {
		return nil, nil, false
	}
	if len(lo) > 0 && lo[0] == prefixUser {
		ulo = lo[1:]
	}
	if len(hi) > 0 && hi[0] == prefixUser {
		uhi = hi[1:]
		if len(uhi) == 0 {
			return nil, nil, false
		}
	}
	return ulo, uhi, true
}

func inSpans(spans [][2][]byte, k []byte) bool {
	for _, s := range spans {
		if bytes.Compare(k, s[0]) >= 0 && (len(s[1]) == 0 || bytes.Compare(k, s[1]) < 0) {
			return true
		}
	}
	return false
}

// journalIngest records an ingest of the engine span [lo, hi) before it happens (a synced marker
// under the current epoch) and registers it as in flight under that epoch until release is called,
// after the ingest: the bump that closes the epoch waits for it, so an ingest whose marker carries
// an epoch at or before a checkpoint's mark is in the checkpoint. Ingests are registered with
// journaling off too: the first bump must not miss one that is not journaled. (A marker whose ingest
// then fails only makes the next incremental read the span.)
func (e *Engine) journalIngest(lo, hi []byte) (release func(), err error) {
	j := &e.journal
	j.mu.RLock()
	defer j.mu.RUnlock()
	epoch := j.epoch
	if ulo, uhi, ok := userPart(lo, hi); ok && j.on {
		var s journalScratch
		b := e.db.NewBatch()
		defer b.Close()
		err = b.Set(s.key(epoch, 's', ulo), uhi, nil)
		if err == nil {
			err = b.Commit(pebble.Sync)
		}
		if err != nil {
			return nil, fmt.Errorf("journal: ingest marker: %w", err)
		}
	}
	j.ingestMu.Lock()
	if j.ingests == nil {
		j.ingests, j.ingestDone = map[uint64]int{}, sync.NewCond(&j.ingestMu)
	}
	j.ingests[epoch]++
	j.ingestMu.Unlock()
	return func() {
		j.ingestMu.Lock()
		if j.ingests[epoch]--; j.ingests[epoch] == 0 {
			delete(j.ingests, epoch)
		}
		j.ingestDone.Broadcast()
		j.ingestMu.Unlock()
	}, nil
}
