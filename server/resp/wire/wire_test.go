package wire

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"testing"
)

func readAll(t *testing.T, in string, maxBulk int) ([][]string, error) {
	t.Helper()
	r := NewReader(bufio.NewReaderSize(strings.NewReader(in), 16), maxBulk)
	var out [][]string
	for {
		args, err := r.ReadCommand()
		if err != nil {
			if err == io.EOF {
				return out, nil
			}
			return out, err
		}
		var a []string
		for _, x := range args {
			a = append(a, string(x))
		}
		out = append(out, a)
	}
}

func TestReaderValid(t *testing.T) {
	cases := []struct {
		name, in string
		want     [][]string
	}{
		{"multibulk", "*2\r\n$3\r\nGET\r\n$3\r\nfoo\r\n", [][]string{{"GET", "foo"}}},
		{"pipelined", "*1\r\n$4\r\nPING\r\n*2\r\n$4\r\nECHO\r\n$2\r\nhi\r\n", [][]string{{"PING"}, {"ECHO", "hi"}}},
		{"empty bulk", "*2\r\n$3\r\nSET\r\n$0\r\n\r\n", [][]string{{"SET", ""}}},
		{"binary bulk", "*1\r\n$4\r\n\r\n\x00\xff\r\n", [][]string{{"\r\n\x00\xff"}}},
		{"empty multibulk skipped", "*0\r\n*-1\r\n*1\r\n$4\r\nPING\r\n", [][]string{{"PING"}}},
		{"inline", "SET foo bar\r\n", [][]string{{"SET", "foo", "bar"}}},
		{"inline LF only", "PING\nPING\n", [][]string{{"PING"}, {"PING"}}},
		{"inline blank lines skipped", "\r\n  \r\nPING\r\n", [][]string{{"PING"}}},
		{"inline spaces", "  SET   a\tb  \r\n", [][]string{{"SET", "a", "b"}}},
		{"inline double quotes", `SET k "a b\n\x41\"c"` + "\r\n", [][]string{{"SET", "k", "a b\nA\"c"}}},
		{"inline single quotes", `SET k 'it\'s "raw" \n'` + "\r\n", [][]string{{"SET", "k", `it's "raw" \n`}}},
		{"inline empty quoted", `SET k ""` + "\r\n", [][]string{{"SET", "k", ""}}},
		{"long line across buffer", "ECHO " + strings.Repeat("x", 100) + "\r\n", [][]string{{"ECHO", strings.Repeat("x", 100)}}},
		{"mixed", "PING\r\n*1\r\n$4\r\nPING\r\n", [][]string{{"PING"}, {"PING"}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := readAll(t, tc.in, 0)
			if err != nil {
				t.Fatalf("error %v", err)
			}
			if len(got) != len(tc.want) {
				t.Fatalf("got %q, want %q", got, tc.want)
			}
			for i := range got {
				if strings.Join(got[i], "\x00") != strings.Join(tc.want[i], "\x00") {
					t.Fatalf("command %d: got %q, want %q", i, got[i], tc.want[i])
				}
			}
		})
	}
}

func TestReaderMalformed(t *testing.T) {
	cases := []struct {
		name, in string
		maxBulk  int
		msg      string // ProtocolError message; "" for io.ErrUnexpectedEOF
	}{
		{"bad multibulk length", "*x\r\n", 0, "invalid multibulk length"},
		{"multibulk leading zero", "*01\r\n$1\r\na\r\n", 0, "invalid multibulk length"},
		{"multibulk too long", "*1048577\r\n", 0, "invalid multibulk length"},
		{"expected dollar", "*1\r\n+OK\r\n", 0, "expected '$', got '+'"},
		{"expected dollar control byte", "*1\r\n\x01\r\n", 0, `expected '$', got '\x01'`},
		{"bad bulk length", "*1\r\n$abc\r\n", 0, "invalid bulk length"},
		{"negative bulk length", "*1\r\n$-1\r\n", 0, "invalid bulk length"},
		{"bulk beyond the skip limit", "*2\r\n$3\r\nSET\r\n$" + strconv.Itoa(MaxSkipBytes+1) + "\r\n", 1024, "invalid bulk length"},
		{"oversize bulk without CRLF", "*1\r\n$1025\r\n" + strings.Repeat("v", 1025) + "XY", 1024, "expected CRLF after bulk string"},
		{"truncated oversize bulk", "*2\r\n$3\r\nSET\r\n$1025\r\n", 1024, ""},
		{"huge bulk", "*1\r\n$99999999999999999999999\r\n", 0, "invalid bulk length"},
		{"missing CRLF after bulk", "*1\r\n$3\r\nfooXY", 0, "expected CRLF after bulk string"},
		{"unbalanced double quote", "SET k \"abc\r\n", 0, "unbalanced quotes in request"},
		{"unbalanced single quote", "SET k 'abc\r\n", 0, "unbalanced quotes in request"},
		{"text after closing quote", "SET k \"a\"b\r\n", 0, "unbalanced quotes in request"},
		{"too big inline", strings.Repeat("x", MaxInlineBytes+10) + "\r\n", 0, "too big inline request"},
		{"too big inline without newline", strings.Repeat("x", MaxInlineBytes+10), 0, "too big inline request"},
		{"too big count", "*" + strings.Repeat("1", MaxInlineBytes+10), 0, "too big mbulk count string"},
		{"truncated bulk", "*1\r\n$10\r\nabc", 0, ""},
		{"truncated multibulk", "*2\r\n$3\r\nGET\r\n", 0, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := readAll(t, tc.in, tc.maxBulk)
			if tc.msg == "" {
				if !errors.Is(err, io.ErrUnexpectedEOF) {
					t.Fatalf("got %v, want io.ErrUnexpectedEOF", err)
				}
				return
			}
			var pe *ProtocolError
			if !errors.As(err, &pe) {
				t.Fatalf("got %v, want a protocol error %q", err, tc.msg)
			}
			if pe.Msg != tc.msg {
				t.Fatalf("got %q, want %q", pe.Msg, tc.msg)
			}
		})
	}
}

func TestReaderBulkLimitExact(t *testing.T) {
	val := strings.Repeat("v", 1024)
	got, err := readAll(t, "*2\r\n$4\r\nECHO\r\n$1024\r\n"+val+"\r\n", 1024)
	if err != nil || len(got) != 1 || got[0][1] != val {
		t.Fatalf("a bulk of exactly the limit must pass: %v %d", err, len(got))
	}
}

// TestReaderTooLarge: a command with a bulk over the limit is skipped whole and reported with its size;
// the next command reads normally.
func TestReaderTooLarge(t *testing.T) {
	big := strings.Repeat("v", 5000)
	in := "*4\r\n$4\r\nMSET\r\n$1\r\nk\r\n$5000\r\n" + big + "\r\n$4\r\nmore\r\n" + // the bulks after the big one are dropped too
		"*3\r\n$3\r\nSET\r\n$1025\r\n" + big[:1025] + "\r\n$3000\r\n" + big[:3000] + "\r\n" + // the largest one is reported
		"*1\r\n$4\r\nPING\r\n"
	r := NewReader(bufio.NewReaderSize(strings.NewReader(in), 16), 1024)
	for _, want := range []int64{5000, 3000} {
		_, err := r.ReadCommand()
		var te *TooLargeError
		if !errors.As(err, &te) || te.Size != want || te.Limit != 1024 {
			t.Fatalf("got %v, want a TooLargeError of %d bytes", err, want)
		}
		if got := te.Error(); got != fmt.Sprintf("value is %d bytes; the limit is 1024", want) {
			t.Fatalf("message %q", got)
		}
	}
	if args, err := r.ReadCommand(); err != nil || len(args) != 1 || string(args[0]) != "PING" {
		t.Fatalf("after the skipped commands: %q, %v", args, err)
	}
	if _, err := r.ReadCommand(); err != io.EOF {
		t.Fatalf("got %v, want io.EOF", err)
	}
}

func TestReaderTotalLimit(t *testing.T) {
	r := NewReader(bufio.NewReader(strings.NewReader("*3\r\n$4\r\nMSET\r\n$10\r\n0123456789\r\n$10\r\n0123456789\r\n")), 16)
	r.MaxTotal = 20
	_, err := r.ReadCommand()
	var pe *ProtocolError
	if !errors.As(err, &pe) || pe.Msg != "command too large" {
		t.Fatalf("got %v", err)
	}
}

func TestReaderBuffered(t *testing.T) {
	r := NewReader(bufio.NewReader(strings.NewReader("PING\r\nPING\r\n")), 0)
	if _, err := r.ReadCommand(); err != nil {
		t.Fatal(err)
	}
	if r.Buffered() == 0 {
		t.Fatal("a pipelined command is waiting: Buffered must be > 0")
	}
	if _, err := r.ReadCommand(); err != nil {
		t.Fatal(err)
	}
	if r.Buffered() != 0 {
		t.Fatalf("Buffered = %d after the last command", r.Buffered())
	}
}

func TestParseInt(t *testing.T) {
	good := map[string]int64{"0": 0, "1": 1, "-1": -1, "9223372036854775807": 1<<63 - 1, "-9223372036854775808": -1 << 63}
	for s, want := range good {
		if got, ok := ParseInt([]byte(s)); !ok || got != want {
			t.Errorf("ParseInt(%q) = %d, %v", s, got, ok)
		}
	}
	for _, s := range []string{"", "-", "+1", "01", "-0", " 1", "1 ", "1a", "9223372036854775808", "-9223372036854775809", "99999999999999999999"} {
		if _, ok := ParseInt([]byte(s)); ok {
			t.Errorf("ParseInt(%q) accepted", s)
		}
	}
}

func TestWriter(t *testing.T) {
	var b bytes.Buffer
	w := NewWriter(bufio.NewWriter(&b))
	w.Simple("OK")
	w.Error("ERR bad\r\nthing")
	w.Int(-42)
	w.Bulk([]byte("a\r\nb"))
	w.Null()
	w.Array(2)
	w.BulkString("x")
	w.NullArray()
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	want := "+OK\r\n-ERR bad  thing\r\n:-42\r\n$4\r\na\r\nb\r\n$-1\r\n*2\r\n$1\r\nx\r\n*-1\r\n"
	if b.String() != want {
		t.Fatalf("got %q, want %q", b.String(), want)
	}
}
