package backup

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/crc64"
	"io"
	"path/filepath"
)

// IndexFile is the name of a backup's key index: every key the backup implies, in order, with a hash
// of its value. An incremental backup diffs a checkpoint against its parent's index instead of against
// the parent's data, which may be spread over a whole chain.
const IndexFile = "keys.idx"

var crc64Table = crc64.MakeTable(crc64.ECMA)

// ValueHash is the hash the index keeps of a value. A changed value with the same 64-bit hash would be
// missed by the next incremental; CRC-64 makes that one chance in 2^64 per changed key.
func ValueHash(value []byte) uint64 { return crc64.Checksum(value, crc64Table) }

// IndexWriter writes a key index. Keys must come in increasing order; each record is the length of
// the prefix shared with the previous key, the rest of the key, and the value hash (8 bytes). A delta
// index (an incremental's changes since its parent) tags each record after the key: 1 and the hash
// for a put, 0 for a deletion.
type IndexWriter struct {
	fw      *fileWriter
	delta   bool
	prev    []byte
	keys    uint64
	deletes uint64
}

// CreateIndex starts the key index of the backup in dir.
func CreateIndex(dir string) (*IndexWriter, error) {
	fw, err := createFile(filepath.Join(dir, IndexFile))
	if err != nil {
		return nil, err
	}
	return &IndexWriter{fw: fw}, nil
}

// CreateDeltaIndex starts the delta index of the incremental backup in dir: the keys it puts, with
// their hashes, and the keys it deletes. The index the backup implies is its chain's indexes merged
// (OpenImpliedIndex).
func CreateDeltaIndex(dir string) (*IndexWriter, error) {
	w, err := CreateIndex(dir)
	if w != nil {
		w.delta = true
	}
	return w, err
}

// Add appends key with its value hash.
func (w *IndexWriter) Add(key []byte, hash uint64) error { return w.add(key, hash, false) }

// AddDeletion appends a deletion of key (a delta index only).
func (w *IndexWriter) AddDeletion(key []byte) error {
	if !w.delta {
		return fmt.Errorf("backup: a deletion of %q in a full key index", key)
	}
	return w.add(key, 0, true)
}

func (w *IndexWriter) add(key []byte, hash uint64, deleted bool) error {
	if w.keys+w.deletes > 0 && bytes.Compare(key, w.prev) <= 0 {
		return fmt.Errorf("backup: index key %q after %q: keys must increase", key, w.prev)
	}
	shared := 0
	for shared < len(key) && shared < len(w.prev) && key[shared] == w.prev[shared] {
		shared++
	}
	if err := w.fw.uvarint(uint64(shared)); err != nil {
		return err
	}
	if err := w.fw.bytesField(key[shared:]); err != nil {
		return err
	}
	w.prev = append(w.prev[:0], key...)
	if w.delta {
		tag := []byte{1}
		if deleted {
			tag[0] = 0
		}
		if err := w.fw.put(tag); err != nil {
			return err
		}
		if deleted {
			w.deletes++
			return nil
		}
	}
	var h [8]byte
	binary.LittleEndian.PutUint64(h[:], hash)
	if err := w.fw.put(h[:]); err != nil {
		return err
	}
	w.keys++
	return nil
}

// Bytes is the number of bytes written so far.
func (w *IndexWriter) Bytes() uint64 { return w.fw.bytes }

// Abort removes the unfinished index.
func (w *IndexWriter) Abort() { w.fw.abort() }

// Close finishes the index and describes it.
func (w *IndexWriter) Close() (*FileInfo, error) {
	if err := w.fw.close(); err != nil {
		return nil, err
	}
	return &FileInfo{File: IndexFile, Keys: w.keys, Deletes: w.deletes, Bytes: w.fw.bytes, CRC32C: w.fw.crc, Delta: w.delta}, nil
}

// IndexReader reads a key index forward. Its checksum is checked when it reaches the end (Next
// returning false without error); a caller that must not act on a damaged index checks it first with
// ReadIndex.
type IndexReader struct {
	fr      *fileReader
	info    FileInfo
	key     []byte
	hash    uint64
	deleted bool
	keys    uint64
	deletes uint64
	done    bool
}

// OpenIndex opens the index info describes in dir.
func OpenIndex(dir string, info FileInfo) (*IndexReader, error) {
	fr, err := openFile(filepath.Join(dir, info.File))
	if err != nil {
		return nil, err
	}
	return &IndexReader{fr: fr, info: info}, nil
}

// Next moves to the next key; false at the end (after checking the file against its description).
func (r *IndexReader) Next() (bool, error) {
	if r.done {
		return false, nil
	}
	shared, err := binary.ReadUvarint(r.fr.r)
	if err == io.EOF {
		r.done = true
		if r.keys != r.info.Keys || r.deletes != r.info.Deletes || r.fr.r.n != r.info.Bytes || r.fr.r.crc != r.info.CRC32C {
			return false, fmt.Errorf("%w: %s has %d keys, %d deletions, %d bytes, crc %08x; manifest says %d, %d, %d, %08x", ErrCorrupt,
				r.info.File, r.keys, r.deletes, r.fr.r.n, r.fr.r.crc, r.info.Keys, r.info.Deletes, r.info.Bytes, r.info.CRC32C)
		}
		return false, nil
	}
	if err == nil && shared > uint64(len(r.key)) {
		err = fmt.Errorf("shared prefix %d longer than the previous key", shared)
	}
	var rest uint64
	if err == nil {
		rest, err = binary.ReadUvarint(r.fr.r)
	}
	if err == nil && rest > maxRecord {
		err = fmt.Errorf("key of %d bytes", rest)
	}
	if err == nil {
		r.key = r.key[:shared]
		start := len(r.key)
		r.key = append(r.key, make([]byte, rest)...)
		_, err = io.ReadFull(r.fr.r, r.key[start:])
	}
	r.deleted = false
	if err == nil && r.info.Delta {
		var tag byte
		if tag, err = r.fr.r.ReadByte(); err == nil && tag > 1 {
			err = fmt.Errorf("record tag %d", tag)
		}
		r.deleted = tag == 0
	}
	if err == nil && r.deleted {
		r.hash = 0
		r.deletes++
		return true, nil
	}
	var h [8]byte
	if err == nil {
		_, err = io.ReadFull(r.fr.r, h[:])
	}
	if err != nil {
		r.done = true
		return false, fmt.Errorf("%w: %s: %v", ErrCorrupt, r.info.File, unexpected(err))
	}
	r.hash = binary.LittleEndian.Uint64(h[:])
	r.keys++
	return true, nil
}

// Deleted says whether the current record of a delta index is a deletion.
func (r *IndexReader) Deleted() bool { return r.deleted }

// Key is the current key (valid until Next).
func (r *IndexReader) Key() []byte { return r.key }

// Hash is the current key's value hash.
func (r *IndexReader) Hash() uint64 { return r.hash }

// Close closes the file.
func (r *IndexReader) Close() { r.fr.close() }

// ReadIndex calls fn for every key of the index, then checks the file.
func ReadIndex(dir string, info FileInfo, fn func(key []byte, hash uint64) error) error {
	r, err := OpenIndex(dir, info)
	if err != nil {
		return err
	}
	defer r.Close()
	for {
		ok, err := r.Next()
		if err != nil || !ok {
			return err
		}
		if fn != nil {
			if err := fn(r.Key(), r.Hash()); err != nil {
				return err
			}
		}
	}
}
