//go:build unix

package server

import (
	"errors"
	"os"
	"syscall"
)

// flockAttemptsMax bounds the retries of a flock interrupted by a signal.
const flockAttemptsMax = 16

// flockExclusive takes an exclusive, non-blocking flock on f. held reports
// that someone else has it. flock belongs to the open file description, so
// a second open of the same file in this process conflicts too.
func flockExclusive(f *os.File) (held bool, err error) {
	for range flockAttemptsMax {
		err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if !errors.Is(err, syscall.EINTR) {
			break
		}
	}
	if errors.Is(err, syscall.EWOULDBLOCK) {
		return true, nil
	}
	return false, err
}
