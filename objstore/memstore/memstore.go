// Package memstore is an objstore.Store in memory whose faults a caller
// decides: the seeded simulator's bucket (issue 27). It never reads the
// clock or a global random source, so a seed that decides the same faults
// in the same order replays bit for bit; slowness is the simulator's to
// model (it schedules the operation's completion), outcomes are this
// package's.
//
// The faults are the ones a real bucket shows: an operation that fails
// and does nothing (a refused or timed-out request, an aborted multipart
// upload: S3 never shows part of an object), and an operation that
// happens but whose answer is lost (a Put or Delete that succeeded while
// the caller sees an error). A bucket outlives every node, so crashes are
// not its faults: the simulator keeps one Store across node restarts.
package memstore

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"sort"
	"strings"
	"sync"

	"github.com/strandlog/strand/objstore"
)

// Fault is what the store does to one operation.
type Fault int

const (
	// None: the operation runs and answers truly.
	None Fault = iota
	// Fail: the operation does nothing and answers KindUnavailable.
	Fail
	// LoseAnswer: the operation runs, then answers KindUnavailable as if
	// the reply was lost. Reads have no effect to keep, so for Get, Stat
	// and List it is Fail.
	LoseAnswer
)

// Decider chooses each operation's fault, in the order operations arrive;
// the simulator answers from its seeded source.
type Decider interface {
	// Decide answers the fault for op ("put", "get", "stat", "list",
	// "delete") on key.
	Decide(op, key string) Fault
}

// Store is an in-memory objstore.Store with decided faults. It is safe for
// concurrent use (the simulator is single-threaded; tests need not be).
type Store struct {
	mu      sync.Mutex
	objects map[string][]byte
	faults  Decider
	stats   Stats
}

// Stats counts what the store did, for a simulator's figures and checks.
type Stats struct {
	// Puts, Gets, Stats, Lists, Deletes count operations that ran.
	Puts, Gets, Stats, Lists, Deletes int
	// Failed counts operations answered KindUnavailable without effect.
	Failed int
	// LostAnswers counts operations that ran but answered an error.
	LostAnswers int
	// PutBytes counts bytes stored by Puts that ran.
	PutBytes int64
}

// New answers an empty store; faults may be nil (no faults).
func New(faults Decider) *Store {
	return &Store{objects: make(map[string][]byte), faults: faults}
}

// SetFaults changes the decider; nil turns faults off (a healed bucket).
func (s *Store) SetFaults(faults Decider) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults = faults
}

// Stats answers the counters so far.
func (s *Store) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stats
}

// Keys answers every stored key, sorted: the checker's view of the bucket.
func (s *Store) Keys() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	keys := make([]string, 0, len(s.objects))
	for k := range s.objects {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// Bytes answers a copy of key's object and whether it exists, without a
// fault: the checker's read.
func (s *Store) Bytes(key string) ([]byte, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	b, ok := s.objects[key]
	return bytes.Clone(b), ok
}

// decide answers the fault for an operation; s.mu is held.
func (s *Store) decide(ctx context.Context, op, key string) (Fault, error) {
	if err := ctx.Err(); err != nil {
		return Fail, objstore.Errorf(op, key, objstore.KindUnavailable, err)
	}
	if s.faults == nil {
		return None, nil
	}
	f := s.faults.Decide(op, key)
	if f == LoseAnswer && op != "put" && op != "delete" {
		f = Fail
	}
	switch f {
	case Fail:
		s.stats.Failed++
		return f, objstore.Errorf(op, key, objstore.KindUnavailable, fmt.Errorf("injected: request failed"))
	case LoseAnswer:
		s.stats.LostAnswers++
		return f, objstore.Errorf(op, key, objstore.KindUnavailable, fmt.Errorf("injected: answer lost"))
	}
	return None, nil
}

// Put stores size bytes of r under key, whole or not at all. The reader is
// read before any fault is decided, as an upload sends its body first.
func (s *Store) Put(ctx context.Context, key string, r io.Reader, size int64) error {
	if err := objstore.ValidKey("put", key); err != nil {
		return err
	}
	if size < 0 {
		return objstore.Errorf("put", key, objstore.KindInvalid, fmt.Errorf("size %d", size))
	}
	data := make([]byte, size)
	if n, err := io.ReadFull(r, data); err != nil {
		return objstore.Errorf("put", key, objstore.KindInvalid, fmt.Errorf("reader ended after %d of %d bytes: %w", n, size, err))
	}
	var one [1]byte
	if m, _ := io.ReadFull(r, one[:]); m > 0 {
		return objstore.Errorf("put", key, objstore.KindInvalid, fmt.Errorf("reader holds more than %d bytes", size))
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	f, err := s.decide(ctx, "put", key)
	if f == Fail {
		return err
	}
	s.objects[key] = data
	s.stats.Puts++
	s.stats.PutBytes += size
	return err
}

// Get reads up to n bytes (n < 0: to the end) of key's object from off.
func (s *Store) Get(ctx context.Context, key string, off, n int64) ([]byte, error) {
	if err := objstore.ValidKey("get", key); err != nil {
		return nil, err
	}
	if err := objstore.ValidRange(key, off, n); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, err := s.decide(ctx, "get", key); err != nil {
		return nil, err
	}
	s.stats.Gets++
	data, ok := s.objects[key]
	if !ok {
		return nil, objstore.Errorf("get", key, objstore.KindNotFound, nil)
	}
	start, end, err := objstore.CutRange(key, int64(len(data)), off, n)
	if err != nil {
		return nil, err
	}
	return bytes.Clone(data[start:end]), nil
}

// Stat answers key's object and its size.
func (s *Store) Stat(ctx context.Context, key string) (objstore.Object, error) {
	if err := objstore.ValidKey("stat", key); err != nil {
		return objstore.Object{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, err := s.decide(ctx, "stat", key); err != nil {
		return objstore.Object{}, err
	}
	s.stats.Stats++
	data, ok := s.objects[key]
	if !ok {
		return objstore.Object{}, objstore.Errorf("stat", key, objstore.KindNotFound, nil)
	}
	return objstore.Object{Key: key, Size: int64(len(data))}, nil
}

// List answers the objects whose keys begin with prefix, sorted by key.
func (s *Store) List(ctx context.Context, prefix string) ([]objstore.Object, error) {
	if err := objstore.ValidPrefix(prefix); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, err := s.decide(ctx, "list", prefix); err != nil {
		return nil, err
	}
	s.stats.Lists++
	var out []objstore.Object
	for k, v := range s.objects {
		if strings.HasPrefix(k, prefix) {
			out = append(out, objstore.Object{Key: k, Size: int64(len(v))})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out, nil
}

// Delete removes key's object; a missing object is not an error.
func (s *Store) Delete(ctx context.Context, key string) error {
	if err := objstore.ValidKey("delete", key); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	f, err := s.decide(ctx, "delete", key)
	if f == Fail {
		return err
	}
	delete(s.objects, key)
	s.stats.Deletes++
	return err
}

var _ objstore.Store = (*Store)(nil)
