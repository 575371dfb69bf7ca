package objstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
)

// Store is an object store: whole-object puts, ranged gets, sorted lists.
// The package comment gives the contract every implementation keeps.
type Store interface {
	// Put stores size bytes read from r under key, whole or not at all.
	Put(ctx context.Context, key string, r io.Reader, size int64) error
	// Get reads up to n bytes of key's object from off; n < 0 reads to
	// the end.
	Get(ctx context.Context, key string, off, n int64) ([]byte, error)
	// Stat answers key's object.
	Stat(ctx context.Context, key string) (Object, error)
	// List answers the objects whose keys start with prefix, sorted by key.
	List(ctx context.Context, prefix string) ([]Object, error)
	// Delete removes key's object; a missing object is not an error.
	Delete(ctx context.Context, key string) error
}

// Object names a stored object and its size.
type Object struct {
	// Key is the object's full key.
	Key string
	// Size is the object's length in bytes.
	Size int64
}

// Kind classifies a store failure by what the caller may do about it.
type Kind int

const (
	// KindUnavailable: the store did not answer or failed transiently;
	// retry later. A Put that failed so may have stored its object.
	KindUnavailable Kind = iota + 1
	// KindNotFound: no object has that key.
	KindNotFound
	// KindRange: a read began past the object's end.
	KindRange
	// KindDenied: the credentials or the bucket's policy refuse the
	// operation; an operator must act.
	KindDenied
	// KindNoBucket: the bucket does not exist; an operator must act.
	KindNoBucket
	// KindInvalid: a malformed key or argument (the caller's bug).
	KindInvalid
)

var kindNames = [...]string{
	KindUnavailable: "unavailable",
	KindNotFound:    "not found",
	KindRange:       "range past the end",
	KindDenied:      "access denied",
	KindNoBucket:    "no such bucket",
	KindInvalid:     "invalid argument",
}

// String names the kind as error messages print it.
func (k Kind) String() string {
	if k <= 0 || int(k) >= len(kindNames) {
		return fmt.Sprintf("kind(%d)", int(k))
	}
	return kindNames[k]
}

// Error is every Store failure: the operation, the key, the kind and the
// implementation's own error beneath.
type Error struct {
	// Op is the Store method: "put", "get", "stat", "list" or "delete".
	Op string
	// Key is the object key or list prefix.
	Key string
	// Kind says what the caller may do.
	Kind Kind
	// Err is the implementation's error, if any.
	Err error
}

// Error prints "objstore: put a/b: unavailable: <cause>".
func (e *Error) Error() string {
	msg := fmt.Sprintf("objstore: %s %s: %s", e.Op, e.Key, e.Kind)
	if e.Err != nil {
		msg += ": " + e.Err.Error()
	}
	return msg
}

// Unwrap gives the implementation's error.
func (e *Error) Unwrap() error { return e.Err }

// Errorf builds an *Error; implementations use it for every failure.
func Errorf(op, key string, kind Kind, cause error) error {
	return &Error{Op: op, Key: key, Kind: kind, Err: cause}
}

// KindOf answers err's Kind, or 0 when err is nil or not an *Error.
func KindOf(err error) Kind {
	var e *Error
	if errors.As(err, &e) {
		return e.Kind
	}
	return 0
}

// IsNotFound reports whether err says the object does not exist.
func IsNotFound(err error) bool { return KindOf(err) == KindNotFound }

// IsRetriable reports whether err is worth retrying as it is: the store
// was unavailable. Every other failure is definite until something changes.
func IsRetriable(err error) bool { return KindOf(err) == KindUnavailable }

// MaxKeyLen is the longest key every implementation takes (S3 allows 1,024
// bytes; a local directory's path limits are lower).
const MaxKeyLen = 512

// ValidKey answers nil when key is one every implementation stores under
// the same name, or a KindInvalid error saying what is wrong with it.
func ValidKey(op, key string) error {
	bad := func(why string) error { return Errorf(op, key, KindInvalid, errors.New(why)) }
	switch {
	case key == "":
		return bad("empty key")
	case len(key) > MaxKeyLen:
		return bad(fmt.Sprintf("key longer than %d bytes", MaxKeyLen))
	}
	for i := 0; i < len(key); i++ {
		if c := key[i]; c < 0x20 || c == 0x7f || c == '\\' {
			return bad(fmt.Sprintf("byte %#x at %d is not allowed in a key", c, i))
		}
	}
	for _, elem := range strings.Split(key, "/") {
		if elem == "" || elem == "." || elem == ".." {
			return bad(`a key has no leading, trailing or double slash and no "." or ".." element`)
		}
	}
	return nil
}

// ValidPrefix answers nil when prefix may start a List: empty (everything),
// or a valid key's leading bytes. It takes a trailing slash ("topic/").
func ValidPrefix(prefix string) error {
	if prefix == "" {
		return nil
	}
	if err := ValidKey("list", strings.TrimSuffix(prefix, "/")); err != nil {
		return err
	}
	return nil
}

// ValidRange answers nil for a Get's offset and length (off ≥ 0, n ≥ -1).
func ValidRange(key string, off, n int64) error {
	if off < 0 || n < -1 {
		return Errorf("get", key, KindInvalid, fmt.Errorf("range off=%d n=%d", off, n))
	}
	return nil
}

// CutRange answers the part [off, off+n) of an object of size bytes that
// a Get returns (n < 0: to the end), or a KindRange error when off is past
// the end. Reading at off == size answers no bytes, as a file read does.
func CutRange(key string, size, off, n int64) (start, end int64, err error) {
	if off > size {
		return 0, 0, Errorf("get", key, KindRange, fmt.Errorf("offset %d past the object's %d bytes", off, size))
	}
	end = size
	if n >= 0 && off+n < size {
		end = off + n
	}
	return off, end, nil
}
