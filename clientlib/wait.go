package clientlib

import (
	"context"
	"errors"
	"strconv"
	"time"
)

var errUnknownNode = errors.New("no address known for node")

func itoa(n uint64) string { return strconv.FormatUint(n, 10) }

// sleepCtx waits d or until ctx ends; false when ctx ended.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
