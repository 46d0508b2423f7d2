package main

import (
	"fmt"
	"io"
	"os"
)

// progress shows how long work is getting along: on a terminal one line redrawn in place, with a bar;
// in a pipe or a log, a plain line each time the state changes (no carriage returns, no bars).
type progress struct {
	w     io.Writer
	tty   bool
	drawn bool   // a line is being redrawn on the terminal
	last  string // the state of the last plain line
}

func newProgress(w io.Writer) *progress { return &progress{w: w, tty: isTerminal(w)} }

// show reports the current state: line is what a terminal shows (it may hold a bar), plain what a
// pipe gets, once per distinct value.
func (p *progress) show(line, plain string) {
	if p.tty {
		fmt.Fprintf(p.w, "\r\033[K%s", line)
		p.drawn = true
		return
	}
	if plain != p.last {
		fmt.Fprintln(p.w, plain)
		p.last = plain
	}
}

// end finishes the terminal's line, if one is drawn.
func (p *progress) end() {
	if p.drawn {
		fmt.Fprintln(p.w)
		p.drawn = false
	}
}

// isTerminal reports whether w is a terminal (a character device).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}
