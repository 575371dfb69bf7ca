package node

import (
	"context"
	"fmt"
	"log/slog"
	"time"
)

// coreLog is how the core logs: records go straight to the handler of
// Config.Logger with a zero time, because the core reads no clock (slog's
// Logger methods would call time.Now). A handler given a zero time omits
// it, which keeps the simulator's output replayable; the server's handler
// stamps the wall time outside the core (server.stampTime).
type coreLog struct {
	h slog.Handler
}

// log emits msg at level with attrs, when the handler wants that level.
func (l coreLog) log(level slog.Level, msg string, attrs ...slog.Attr) {
	ctx := context.Background()
	if !l.h.Enabled(ctx, level) {
		return
	}
	r := slog.NewRecord(time.Time{}, level, msg, 0)
	r.AddAttrs(attrs...)
	_ = l.h.Handle(ctx, r) // a handler that cannot write has nowhere to say so
}

// with returns a coreLog whose records carry attrs.
func (l coreLog) with(attrs ...slog.Attr) coreLog {
	return coreLog{h: l.h.WithAttrs(attrs)}
}

// groupAttrs are the attributes naming a group in log records: topic and
// partition, or group=metadata.
func groupAttrs(tp TopicPartition, metadataGroup bool) []slog.Attr {
	if metadataGroup {
		return []slog.Attr{slog.String("group", "metadata")}
	}
	return []slog.Attr{slog.String("topic", tp.Topic), slog.Int("partition", int(tp.Partition))}
}

// raftLogger adapts coreLog to raft.Logger: raft's Debug and Info are
// debug (raft narrates every election at Info), Warning is warn, Error is
// error; Fatal and Panic log at error and panic, since raft expects them
// not to return.
type raftLogger struct{ l coreLog }

func (r raftLogger) Debug(v ...any)            { r.print(slog.LevelDebug, v) }
func (r raftLogger) Debugf(f string, v ...any) { r.printf(slog.LevelDebug, f, v) }
func (r raftLogger) Info(v ...any)             { r.print(slog.LevelDebug, v) }
func (r raftLogger) Infof(f string, v ...any)  { r.printf(slog.LevelDebug, f, v) }
func (r raftLogger) Warning(v ...any)          { r.print(slog.LevelWarn, v) }
func (r raftLogger) Warningf(f string, v ...any) {
	r.printf(slog.LevelWarn, f, v)
}
func (r raftLogger) Error(v ...any)            { r.print(slog.LevelError, v) }
func (r raftLogger) Errorf(f string, v ...any) { r.printf(slog.LevelError, f, v) }

// print and printf format raft's message only when the handler wants its
// level: raft narrates every message step at Debug and Info, and
// formatting what is dropped cost the simulator 1% of its CPU.
func (r raftLogger) print(level slog.Level, v []any) {
	if r.l.h.Enabled(context.Background(), level) {
		r.l.log(level, "raft: "+fmt.Sprint(v...))
	}
}

func (r raftLogger) printf(level slog.Level, f string, v []any) {
	if r.l.h.Enabled(context.Background(), level) {
		r.l.log(level, "raft: "+fmt.Sprintf(f, v...))
	}
}

func (r raftLogger) Fatal(v ...any)            { r.stop(fmt.Sprint(v...)) }
func (r raftLogger) Fatalf(f string, v ...any) { r.stop(fmt.Sprintf(f, v...)) }
func (r raftLogger) Panic(v ...any)            { r.stop(fmt.Sprint(v...)) }
func (r raftLogger) Panicf(f string, v ...any) { r.stop(fmt.Sprintf(f, v...)) }
func (r raftLogger) stop(msg string)           { r.l.log(slog.LevelError, "raft: "+msg); panic("raft: " + msg) }
