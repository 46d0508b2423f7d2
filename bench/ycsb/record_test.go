package ycsb

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand"
	"reflect"
	"testing"
)

func TestRecordRoundTrip(t *testing.T) {
	r := rand.New(rand.NewSource(1))
	cases := []map[string][]byte{
		{},
		{"field0": {}},
		{"": []byte("empty name")},
		{"field0": []byte("x"), "field1": bytes.Repeat([]byte{0xff}, 300)},
	}
	for i := 0; i < 50; i++ {
		m := map[string][]byte{}
		for f := 0; f < r.Intn(12); f++ {
			v := make([]byte, r.Intn(400))
			r.Read(v)
			m[fmt.Sprintf("field%d", f)] = v
		}
		cases = append(cases, m)
	}
	for i, m := range cases {
		enc := EncodeRecord(m)
		got, err := DecodeRecord(enc, nil)
		if err != nil {
			t.Fatalf("case %d: decode: %v", i, err)
		}
		if !reflect.DeepEqual(normalize(got), normalize(m)) {
			t.Fatalf("case %d: round trip: got %v, want %v", i, got, m)
		}
		if again := EncodeRecord(got); !bytes.Equal(again, enc) {
			t.Fatalf("case %d: encoding is not deterministic", i)
		}
	}
}

// normalize maps nil and empty values alike.
func normalize(m map[string][]byte) map[string]string {
	out := map[string]string{}
	for k, v := range m {
		out[k] = string(v)
	}
	return out
}

func TestRecordFieldSelection(t *testing.T) {
	m := map[string][]byte{"a": []byte("1"), "b": []byte("2"), "c": []byte("3")}
	enc := EncodeRecord(m)
	got, err := DecodeRecord(enc, []string{"c", "a", "missing"})
	if err != nil {
		t.Fatal(err)
	}
	if want := map[string]string{"a": "1", "c": "3"}; !reflect.DeepEqual(normalize(got), want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	// Decoded values must not alias the encoding.
	got["a"][0] = 'X'
	again, _ := DecodeRecord(enc, nil)
	if string(again["a"]) != "1" {
		t.Fatal("decoded value aliases the encoded record")
	}
}

func TestRecordEncodingSize(t *testing.T) {
	m := map[string][]byte{}
	for f := 0; f < 10; f++ {
		m[fmt.Sprintf("field%d", f)] = make([]byte, 100)
	}
	if n := len(EncodeRecord(m)); n != 1081 {
		t.Fatalf("10 fields of 100 bytes encode to %d bytes, want 1081", n)
	}
}

func TestRecordCorrupt(t *testing.T) {
	good := EncodeRecord(map[string][]byte{"field0": []byte("value")})
	cases := map[string][]byte{
		"empty":          nil,
		"unknown format": append([]byte{9}, good[1:]...),
		"truncated":      good[:len(good)-1],
		"bad varint":     {recordFormatV1, 0xff},
		"name too long":  {recordFormatV1, 5, 'a'},
		"missing value":  {recordFormatV1, 1, 'a'},
	}
	for name, b := range cases {
		if _, err := DecodeRecord(b, nil); !errors.Is(err, errCorrupt) {
			t.Errorf("%s: got %v, want a corrupt-record error", name, err)
		}
	}
}
