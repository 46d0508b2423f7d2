package table

import (
	"testing"
	"time"
)

// benchRow is a users-like row: an int64 key and four value columns.
func benchRow() (*Descriptor, Row) {
	cols, _ := ParseColumns("id:int64,name:string,city:string,score:float64,seen:timestamp")
	d := NewDescriptor("users", cols, []string{"id"})
	d.ID = 12
	return &d, Row{"id": int64(123456), "name": "ann-marie", "city": "oslo", "score": 4.5, "seen": time.Unix(1700000000, 5).UTC()}
}

func BenchmarkEncodeRow(b *testing.B) {
	d, row := benchRow()
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := d.EncodeRow(row); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDecodeRow(b *testing.B) {
	d, row := benchRow()
	k, v, err := d.EncodeRow(row)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := d.DecodeRow(k, v); err != nil {
			b.Fatal(err)
		}
	}
}
