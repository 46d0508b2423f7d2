package backup

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestRoundTrip(t *testing.T) {
	dir := t.TempDir()
	m := &Manifest{ClusterID: "c1", NodeID: 2, CreatedAt: time.Unix(100, 0).UTC()}
	want := map[uint64][][2]string{
		5: {{"a", "1"}, {"b", ""}, {"c", string(bytes.Repeat([]byte("v"), 300))}},
		7: {},
	}
	for _, id := range []uint64{5, 7} {
		w, err := Create(dir, id)
		if err != nil {
			t.Fatal(err)
		}
		for _, kv := range want[id] {
			if err := w.Add([]byte(kv[0]), []byte(kv[1])); err != nil {
				t.Fatal(err)
			}
		}
		e := RangeEntry{RangeID: id, StartKey: []byte("a"), Generation: 3}
		if err := w.Close(&e); err != nil {
			t.Fatal(err)
		}
		m.Ranges = append(m.Ranges, e)
	}
	if _, err := ReadManifest(dir); !errors.Is(err, ErrIncomplete) {
		t.Fatalf("a backup without its manifest must read as incomplete, got %v", err)
	}
	if err := WriteManifest(dir, m); err != nil {
		t.Fatal(err)
	}
	got, err := ReadManifest(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Ranges) != 2 || got.Ranges[0].Keys != 3 || got.Ranges[1].Keys != 0 || got.NodeID != 2 {
		t.Fatalf("manifest %+v", got)
	}
	if err := Verify(dir, got); err != nil {
		t.Fatal(err)
	}
	var read [][2]string
	if err := ReadRange(dir, got.Ranges[0], func(k, v []byte) error {
		read = append(read, [2]string{string(k), string(v)})
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(read) != fmt.Sprint(want[5]) {
		t.Fatalf("read %q, want %q", read, want[5])
	}
}

func TestCorruptionDetected(t *testing.T) {
	for _, tc := range []struct {
		name   string
		damage func(path string)
	}{
		{"bit flip", func(p string) {
			b, _ := os.ReadFile(p)
			b[len(b)/2] ^= 0x40
			os.WriteFile(p, b, 0o644)
		}},
		{"truncated", func(p string) {
			b, _ := os.ReadFile(p)
			os.WriteFile(p, b[:len(b)-3], 0o644)
		}},
		{"record appended", func(p string) {
			f, _ := os.OpenFile(p, os.O_APPEND|os.O_WRONLY, 0)
			f.Write([]byte{1, 'x', 1, 'y'})
			f.Close()
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			w, err := Create(dir, 1)
			if err != nil {
				t.Fatal(err)
			}
			for i := 0; i < 100; i++ {
				w.Add(fmt.Appendf(nil, "key%03d", i), bytes.Repeat([]byte{byte(i)}, 20))
			}
			e := RangeEntry{RangeID: 1}
			if err := w.Close(&e); err != nil {
				t.Fatal(err)
			}
			tc.damage(filepath.Join(dir, e.File))
			if err := Verify(dir, &Manifest{Ranges: []RangeEntry{e}}); !errors.Is(err, ErrCorrupt) {
				t.Fatalf("damage not detected: %v", err)
			}
		})
	}
}

func TestDeltaAndIndexRoundTrip(t *testing.T) {
	dir := t.TempDir()
	w, err := CreateDelta(dir, 4)
	if err != nil {
		t.Fatal(err)
	}
	ops := [][2]string{{"a", "1"}, {"b", ""}, {"c", "\x00del"}, {"d", "4"}}
	for _, op := range ops {
		if op[1] == "\x00del" {
			err = w.Delete([]byte(op[0]))
		} else {
			err = w.Add([]byte(op[0]), []byte(op[1]))
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	e := RangeEntry{RangeID: 4}
	if err := w.Close(&e); err != nil {
		t.Fatal(err)
	}
	if !e.Delta || e.Keys != 3 || e.Deletes != 1 {
		t.Fatalf("entry %+v", e)
	}
	var got [][2]string
	if err := ReadRecords(dir, e, func(k, v []byte, deleted bool) error {
		if deleted {
			v = []byte("\x00del")
		}
		got = append(got, [2]string{string(k), string(v)})
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(got) != fmt.Sprint(ops) {
		t.Fatalf("read %q, want %q", got, ops)
	}
	if err := ReadRange(dir, e, nil); err == nil {
		t.Fatal("a delta read as a full range")
	}

	iw, err := CreateIndex(dir)
	if err != nil {
		t.Fatal(err)
	}
	keys := []string{"user001", "user002", "user0021", "user1", "v"}
	for i, k := range keys {
		if err := iw.Add([]byte(k), uint64(i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := iw.Add([]byte("a"), 0); err == nil {
		t.Fatal("an index key out of order was accepted")
	}
	info, err := iw.Close()
	if err != nil {
		t.Fatal(err)
	}
	var idx []string
	if err := ReadIndex(dir, *info, func(k []byte, h uint64) error {
		idx = append(idx, fmt.Sprintf("%s=%d", k, h))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(idx) != "[user001=0 user002=1 user0021=2 user1=3 v=4]" {
		t.Fatalf("index read %v", idx)
	}
	info.CRC32C++
	if err := ReadIndex(dir, *info, nil); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("a damaged index was read: %v", err)
	}
}
