package wire

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"strconv"
	"testing"
)

// FuzzParse feeds arbitrary bytes to the reader. It must never panic or loop, every error must be
// io.EOF, io.ErrUnexpectedEOF, a *ProtocolError or a *TooLargeError (after which reading goes on), no
// bulk may exceed the limit, and every command it returns must survive a round trip through the
// multibulk encoding. The seed corpus is in
// testdata/fuzz/FuzzParse (plain `go test` replays it).
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		"*1\r\n$4\r\nPING\r\n",
		"SET k \"v w\"\r\nGET k\r\n",
		"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$0\r\n\r\n",
		"*-1\r\n*0\r\n\r\n",
		"*1\r\n$2000\r\n",
		"MULTI\r\nSET {t}a 1 EX 10 GET\r\nGETEX {t}a PERSIST\r\nEXEC\r\n",
	} {
		f.Add([]byte(s))
	}
	const maxBulk = 1024
	f.Fuzz(func(t *testing.T, in []byte) {
		r := NewReader(bufio.NewReaderSize(bytes.NewReader(in), 16), maxBulk)
		for n := 0; ; n++ {
			if n > len(in)+1 {
				t.Fatalf("more commands (%d) than input bytes (%d)", n, len(in))
			}
			args, err := r.ReadCommand()
			var te *TooLargeError
			if errors.As(err, &te) {
				if te.Size <= maxBulk || te.Limit != maxBulk {
					t.Fatalf("TooLargeError %+v for a limit of %d", te, maxBulk)
				}
				continue // the command was consumed: the stream goes on
			}
			if err != nil {
				var pe *ProtocolError
				if err != io.EOF && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.As(err, &pe) {
					t.Fatalf("unexpected error type %T: %v", err, err)
				}
				return
			}
			if len(args) == 0 {
				t.Fatal("empty command returned")
			}
			var enc bytes.Buffer
			enc.WriteString("*" + strconv.Itoa(len(args)) + "\r\n")
			for _, a := range args {
				if len(a) > maxBulk && len(a) > MaxInlineBytes {
					t.Fatalf("argument of %d bytes beyond the limits", len(a))
				}
				enc.WriteString("$" + strconv.Itoa(len(a)) + "\r\n")
				enc.Write(a)
				enc.WriteString("\r\n")
			}
			r2 := NewReader(bufio.NewReader(&enc), MaxInlineBytes)
			again, err := r2.ReadCommand()
			if err != nil || len(again) != len(args) {
				t.Fatalf("round trip of %q: %v %q", args, err, again)
			}
			for i := range args {
				if !bytes.Equal(args[i], again[i]) {
					t.Fatalf("round trip changed argument %d: %q -> %q", i, args[i], again[i])
				}
			}
		}
	})
}
