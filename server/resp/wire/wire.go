// Package wire is RESP2, the Redis serialization protocol, as a Redis server speaks it: a streaming
// reader of requests (multibulk arrays of bulk strings, and inline commands with Redis's quoting
// rules) and a writer of replies. It knows nothing of commands or of Shoal: package resp gives the
// requests their meaning.
package wire

import (
	"bufio"
	"fmt"
	"io"
	"strconv"
)

// Parser limits (Redis's own, except the bulk length, which is the node's largest value).
const (
	// MaxInlineBytes bounds an inline command line (Redis: PROTO_INLINE_MAX_SIZE).
	MaxInlineBytes = 64 << 10
	// MaxMultibulkLen bounds the number of arguments of one command (Redis: 1024*1024).
	MaxMultibulkLen = 1 << 20
	// DefaultMaxBulkBytes is the bulk string limit when the Reader is given none (the node's default
	// largest value).
	DefaultMaxBulkBytes = 8 << 20
	// MaxSkipBytes bounds a bulk string the reader skips to answer TooLargeError (Redis's default
	// proto-max-bulk-len): a longer one is a protocol error.
	MaxSkipBytes = 512 << 20
)

// ProtocolError is malformed input. Like Redis, the server answers "-ERR Protocol error: <Msg>" and
// closes the connection, since it cannot tell where the next command starts.
type ProtocolError struct{ Msg string }

func (e *ProtocolError) Error() string { return "Protocol error: " + e.Msg }

func protoErr(msg string) error { return &ProtocolError{Msg: msg} }

// TooLargeError is a well-formed command with a bulk string longer than the reader's MaxBulk (but at
// most MaxSkipBytes). The reader has skipped the whole command, so the connection stays usable: the
// server answers an error and reads the next command.
type TooLargeError struct {
	Size  int64 // bytes of the longest bulk string of the command
	Limit int   // the reader's MaxBulk
}

func (e *TooLargeError) Error() string {
	return fmt.Sprintf("value is %d bytes; the limit is %d", e.Size, e.Limit)
}

// Reader reads commands in the request format of RESP2: arrays of bulk strings ("multibulk"), or
// inline commands (one line of space-separated, optionally quoted arguments) as redis-cli and telnet
// send them. It is a streaming parser: it holds at most one command, and reads no further than the
// end of the command it returns, so that Buffered tells whether more pipelined commands are waiting.
type Reader struct {
	br *bufio.Reader
	// MaxBulk bounds one bulk string (default DefaultMaxBulkBytes). Longer ones are protocol errors.
	MaxBulk int
	// MaxTotal bounds the bytes of all the arguments of one command (0: 16 × MaxBulk, at least 64 MiB).
	MaxTotal int
	line     []byte // scratch for lines longer than the bufio buffer
}

// NewReader returns a Reader on br.
func NewReader(br *bufio.Reader, maxBulk int) *Reader {
	if maxBulk <= 0 {
		maxBulk = DefaultMaxBulkBytes
	}
	return &Reader{br: br, MaxBulk: maxBulk}
}

// Buffered is the number of bytes read from the connection but not consumed yet.
func (r *Reader) Buffered() int { return r.br.Buffered() }

func (r *Reader) maxTotal() int {
	if r.MaxTotal > 0 {
		return r.MaxTotal
	}
	return max(16*r.MaxBulk, 64<<20)
}

// ReadCommand returns the next non-empty command. Empty commands (an empty line, "*0", "*-1") are
// skipped, as Redis does. It returns io.EOF on a clean end of input between commands,
// io.ErrUnexpectedEOF when the input ends inside a command, a *TooLargeError for a command with a bulk
// string over MaxBulk (the command is consumed: reading may go on), a *ProtocolError for malformed
// input, and the connection's error otherwise.
func (r *Reader) ReadCommand() ([][]byte, error) {
	for {
		c, err := r.br.ReadByte()
		if err != nil {
			return nil, err
		}
		var args [][]byte
		if c == '*' {
			args, err = r.readMultibulk()
		} else {
			if err := r.br.UnreadByte(); err != nil {
				return nil, err
			}
			args, err = r.readInline()
		}
		if err != nil {
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return nil, err
		}
		if len(args) > 0 {
			return args, nil
		}
	}
}

// readLine returns the next line without its "\n" (and "\r" before it), failing with tooLong when it
// exceeds limit bytes. The result is valid until the next read.
func (r *Reader) readLine(limit int, tooLong string) ([]byte, error) {
	b, err := r.br.ReadSlice('\n')
	if err == nil {
		if len(b) > limit+2 {
			return nil, protoErr(tooLong)
		}
		return trimCRLF(b), nil
	}
	if err != bufio.ErrBufferFull {
		return nil, err
	}
	r.line = append(r.line[:0], b...)
	for {
		if len(r.line) > limit+2 {
			return nil, protoErr(tooLong)
		}
		b, err = r.br.ReadSlice('\n')
		r.line = append(r.line, b...)
		if len(r.line) > limit+2 {
			return nil, protoErr(tooLong)
		}
		switch err {
		case nil:
			return trimCRLF(r.line), nil
		case bufio.ErrBufferFull:
		default:
			return nil, err
		}
	}
}

func trimCRLF(b []byte) []byte {
	b = b[:len(b)-1]
	if len(b) > 0 && b[len(b)-1] == '\r' {
		b = b[:len(b)-1]
	}
	return b
}

// ParseInt parses a decimal int64 the way Redis's string2ll does: an optional '-', then digits with no
// leading zero (except "0" itself), nothing else, no overflow.
func ParseInt(b []byte) (int64, bool) {
	if len(b) == 0 || len(b) > 20 {
		return 0, false
	}
	neg := false
	if b[0] == '-' {
		neg, b = true, b[1:]
		if len(b) == 0 {
			return 0, false
		}
	}
	if len(b) > 1 && b[0] == '0' {
		return 0, false
	}
	var v uint64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		d := uint64(c - '0')
		if v > (1<<64-1-d)/10 {
			return 0, false
		}
		v = v*10 + d
	}
	if neg {
		if v > 1<<63 {
			return 0, false
		}
		if v == 0 {
			return 0, false // "-0"
		}
		return -int64(v), true
	}
	if v > 1<<63-1 {
		return 0, false
	}
	return int64(v), true
}

func (r *Reader) readMultibulk() ([][]byte, error) {
	line, err := r.readLine(MaxInlineBytes, "too big mbulk count string")
	if err != nil {
		return nil, err
	}
	n, ok := ParseInt(line)
	if !ok || n > MaxMultibulkLen {
		return nil, protoErr("invalid multibulk length")
	}
	if n <= 0 {
		return nil, nil
	}
	args := make([][]byte, 0, min(n, 64))
	total := 0
	// tooLarge is the longest bulk over MaxBulk seen so far; once set, the rest of the command is
	// read and dropped so that the next command starts where the client thinks it does.
	var tooLarge int64
	for i := int64(0); i < n; i++ {
		c, err := r.br.ReadByte()
		if err != nil {
			return nil, err
		}
		if c != '$' {
			return nil, protoErr("expected '$', got '" + printable(c) + "'")
		}
		line, err := r.readLine(MaxInlineBytes, "too big bulk count string")
		if err != nil {
			return nil, err
		}
		l, ok := ParseInt(line)
		if !ok || l < 0 || l > max(int64(r.MaxBulk), MaxSkipBytes) {
			return nil, protoErr("invalid bulk length")
		}
		if l > int64(r.MaxBulk) || tooLarge > 0 {
			if err := r.skipBulk(l); err != nil {
				return nil, err
			}
			tooLarge = max(tooLarge, l)
			continue
		}
		total += int(l)
		if total > r.maxTotal() {
			return nil, protoErr("command too large")
		}
		arg := make([]byte, int(l)+2)
		if _, err := io.ReadFull(r.br, arg); err != nil {
			return nil, err
		}
		if arg[l] != '\r' || arg[l+1] != '\n' {
			return nil, protoErr("expected CRLF after bulk string")
		}
		args = append(args, arg[:l:l])
	}
	if tooLarge > 0 {
		return nil, &TooLargeError{Size: tooLarge, Limit: r.MaxBulk}
	}
	return args, nil
}

// skipBulk reads and drops a bulk string of l bytes and its CRLF.
func (r *Reader) skipBulk(l int64) error {
	if _, err := r.br.Discard(int(l)); err != nil {
		return err
	}
	var crlf [2]byte
	if _, err := io.ReadFull(r.br, crlf[:]); err != nil {
		return err
	}
	if crlf != [2]byte{'\r', '\n'} {
		return protoErr("expected CRLF after bulk string")
	}
	return nil
}

// printable renders c for an error message the way Redis does (the byte itself); control bytes and
// non-ASCII bytes are shown escaped so that the error stays one clean line.
func printable(c byte) string {
	if c >= 0x20 && c < 0x7f {
		return string(c)
	}
	return fmt.Sprintf("\\x%02x", c)
}

func (r *Reader) readInline() ([][]byte, error) {
	line, err := r.readLine(MaxInlineBytes, "too big inline request")
	if err != nil {
		return nil, err
	}
	args, ok := splitArgs(line)
	if !ok {
		return nil, protoErr("unbalanced quotes in request")
	}
	return args, nil
}

func isSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'
}

func isHex(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}

func hexVal(c byte) byte {
	switch {
	case c <= '9':
		return c - '0'
	case c <= 'F':
		return c - 'A' + 10
	default:
		return c - 'a' + 10
	}
}

// splitArgs splits an inline command like Redis's sdssplitargs: arguments separated by white space,
// "double quotes" with \n \r \t \b \a \xHH and \<c> escapes, 'single quotes' with \' only. A closing quote
// must be followed by white space or the end of the line. ok is false for unbalanced quotes.
func splitArgs(line []byte) (args [][]byte, ok bool) {
	i := 0
	for {
		for i < len(line) && isSpace(line[i]) {
			i++
		}
		if i == len(line) {
			return args, true
		}
		var cur []byte
		inq, insq := false, false
		for done := false; !done; {
			if inq {
				switch {
				case i >= len(line):
					return nil, false
				case line[i] == '\\' && i+3 < len(line) && line[i+1] == 'x' && isHex(line[i+2]) && isHex(line[i+3]):
					cur = append(cur, hexVal(line[i+2])<<4|hexVal(line[i+3]))
					i += 3
				case line[i] == '\\' && i+1 < len(line):
					i++
					c := line[i]
					switch c {
					case 'n':
						c = '\n'
					case 'r':
						c = '\r'
					case 't':
						c = '\t'
					case 'b':
						c = '\b'
					case 'a':
						c = '\a'
					}
					cur = append(cur, c)
				case line[i] == '"':
					if i+1 < len(line) && !isSpace(line[i+1]) {
						return nil, false
					}
					done = true
				default:
					cur = append(cur, line[i])
				}
			} else if insq {
				switch {
				case i >= len(line):
					return nil, false
				case line[i] == '\\' && i+1 < len(line) && line[i+1] == '\'':
					i++
					cur = append(cur, '\'')
				case line[i] == '\'':
					if i+1 < len(line) && !isSpace(line[i+1]) {
						return nil, false
					}
					done = true
				default:
					cur = append(cur, line[i])
				}
			} else {
				switch {
				case i >= len(line):
					done = true
				case isSpace(line[i]):
					done = true
				case line[i] == '"':
					inq = true
				case line[i] == '\'':
					insq = true
				default:
					cur = append(cur, line[i])
				}
			}
			if i < len(line) {
				i++
			}
		}
		if cur == nil {
			cur = []byte{}
		}
		args = append(args, cur)
	}
}

// Writer writes RESP2 replies into a buffered writer. Errors stick in the bufio.Writer and surface at
// Flush.
type Writer struct {
	bw  *bufio.Writer
	num []byte
}

// NewWriter returns a Writer on bw.
func NewWriter(bw *bufio.Writer) *Writer { return &Writer{bw: bw, num: make([]byte, 0, 24)} }

// Flush writes out the buffered replies.
func (w *Writer) Flush() error { return w.bw.Flush() }

// Buffered is the number of reply bytes not flushed yet.
func (w *Writer) Buffered() int { return w.bw.Buffered() }

func (w *Writer) line(prefix byte, s string) {
	w.bw.WriteByte(prefix)
	w.bw.WriteString(s)
	w.bw.WriteString("\r\n")
}

func (w *Writer) header(prefix byte, n int64) {
	w.bw.WriteByte(prefix)
	w.num = strconv.AppendInt(w.num[:0], n, 10)
	w.bw.Write(w.num)
	w.bw.WriteString("\r\n")
}

// Simple writes a simple string ("+OK"). s must not contain CR or LF.
func (w *Writer) Simple(s string) { w.line('+', oneLine(s)) }

// Error writes an error reply; msg starts with its code ("ERR ...", "WRONGTYPE ..."). CR and LF in msg
// are replaced by spaces, since an error is one line.
func (w *Writer) Error(msg string) { w.line('-', oneLine(msg)) }

// Int writes an integer reply.
func (w *Writer) Int(n int64) { w.header(':', n) }

// Bulk writes a bulk string.
func (w *Writer) Bulk(b []byte) {
	w.header('$', int64(len(b)))
	w.bw.Write(b)
	w.bw.WriteString("\r\n")
}

// BulkString writes a bulk string.
func (w *Writer) BulkString(s string) {
	w.header('$', int64(len(s)))
	w.bw.WriteString(s)
	w.bw.WriteString("\r\n")
}

// Null writes the null bulk string ("$-1").
func (w *Writer) Null() { w.bw.WriteString("$-1\r\n") }

// NullArray writes the null array ("*-1").
func (w *Writer) NullArray() { w.bw.WriteString("*-1\r\n") }

// Array writes the header of an array of n elements; the caller writes the elements.
func (w *Writer) Array(n int) { w.header('*', int64(n)) }

func oneLine(s string) string {
	for i := 0; i < len(s); i++ {
		if s[i] == '\r' || s[i] == '\n' {
			b := []byte(s)
			for j := i; j < len(b); j++ {
				if b[j] == '\r' || b[j] == '\n' {
					b[j] = ' '
				}
			}
			return string(b)
		}
	}
	return s
}
