// Package slograft lets etcd raft log through the node's slog.Logger. It keeps raft's errors and
// warnings and drops its debug and info chatter (one line per election and conf change on every
// range would drown the node's own log); it must never swallow a panic raft asks for.
package slograft

import (
	"fmt"
	"log/slog"
)

// Logger implements raft.Logger.
type Logger struct{ L *slog.Logger }

func (l Logger) Debug(v ...interface{})                   {}
func (l Logger) Debugf(format string, v ...interface{})   {}
func (l Logger) Info(v ...interface{})                    {}
func (l Logger) Infof(format string, v ...interface{})    {}
func (l Logger) Error(v ...interface{})                   { l.L.Error(fmt.Sprint(v...)) }
func (l Logger) Errorf(format string, v ...interface{})   { l.L.Error(fmt.Sprintf(format, v...)) }
func (l Logger) Warning(v ...interface{})                 { l.L.Warn(fmt.Sprint(v...)) }
func (l Logger) Warningf(format string, v ...interface{}) { l.L.Warn(fmt.Sprintf(format, v...)) }
func (l Logger) Panic(v ...interface{})                   { panic(fmt.Sprint(v...)) }
func (l Logger) Panicf(format string, v ...interface{})   { panic(fmt.Sprintf(format, v...)) }

func (l Logger) Fatal(v ...interface{}) {
	l.L.Error(fmt.Sprint(v...))
	panic(fmt.Sprint(v...))
}

func (l Logger) Fatalf(format string, v ...interface{}) {
	l.L.Error(fmt.Sprintf(format, v...))
	panic(fmt.Sprintf(format, v...))
}
