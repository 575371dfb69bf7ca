package server

import (
	"context"
	"log/slog"
	"time"
)

// stampTime is the handler the server wraps around Config.Logger's: it
// stamps the wall time on records that come without one (the core's, which
// reads no clock), and passes everything else through.
type stampTime struct{ h slog.Handler }

func (s stampTime) Enabled(ctx context.Context, level slog.Level) bool {
	return s.h.Enabled(ctx, level)
}

func (s stampTime) Handle(ctx context.Context, r slog.Record) error {
	if r.Time.IsZero() {
		r.Time = time.Now()
	}
	return s.h.Handle(ctx, r)
}

func (s stampTime) WithAttrs(attrs []slog.Attr) slog.Handler { return stampTime{s.h.WithAttrs(attrs)} }
func (s stampTime) WithGroup(name string) slog.Handler       { return stampTime{s.h.WithGroup(name)} }
