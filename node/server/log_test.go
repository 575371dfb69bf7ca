package server

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"
)

// The core hands records over without a time (it reads no clock); the
// server's handler stamps the wall time on those, and leaves a record that
// has one alone.
func TestStampTimeStampsOnlyZeroTimes(t *testing.T) {
	var buf bytes.Buffer
	h := stampTime{slog.NewTextHandler(&buf, nil)}.WithAttrs([]slog.Attr{slog.Int("node", 1)})
	h.Handle(context.Background(), slog.NewRecord(time.Time{}, slog.LevelInfo, "from the core", 0))
	fixed := time.Date(2001, 2, 3, 4, 5, 6, 0, time.UTC)
	h.Handle(context.Background(), slog.NewRecord(fixed, slog.LevelInfo, "stamped", 0))
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 2 || !strings.HasPrefix(lines[0], "time=") || !strings.Contains(lines[0], "node=1") ||
		!strings.HasPrefix(lines[1], "time=2001-02-03T04:05:06") {
		t.Fatalf("records:\n%s", buf.String())
	}
}
