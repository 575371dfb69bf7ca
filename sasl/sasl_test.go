package sasl

import (
	"errors"
	"testing"

	"github.com/strandlog/strand/engine/metadata"
)

// store holds credentials made by NewCredential.
type store map[string]metadata.Credential

func (s store) lookup(name, mech string) (metadata.Credential, bool) {
	c, ok := s[name+"/"+mech]
	return c, ok
}

func newStore(t testing.TB, mech, user, password string) store {
	pc, err := NewCredential(mech, user, password, 4096)
	if err != nil {
		t.Fatal(err)
	}
	return store{user + "/" + mech: metadata.CredentialFromProto(user, pc)}
}

// run drives a whole exchange, returning the server exchange and the
// client's messages.
func run(t *testing.T, s store, mech, user, password string) (*Exchange, [][]byte, error) {
	t.Helper()
	cl, err := NewClient(mech, user, password)
	if err != nil {
		t.Fatal(err)
	}
	ex, err := Start(mech, s.lookup)
	if err != nil {
		t.Fatal(err)
	}
	var sent [][]byte
	var in []byte
	for range 3 {
		out, err := cl.Step(in)
		if err != nil {
			return ex, sent, err
		}
		sent = append(sent, out)
		var done bool
		in, done, err = ex.Step(out)
		if err != nil || done {
			if done {
				if _, err := cl.Step(in); err != nil || !cl.Done() {
					t.Fatalf("client refused the server's final message: %v", err)
				}
			}
			return ex, sent, err
		}
	}
	t.Fatal("exchange did not end")
	return nil, nil, nil
}

// TestExchange shows both mechanisms authenticate a stored user and a
// wrong password or unknown user fails.
func TestExchange(t *testing.T) {
	for _, mech := range Mechanisms {
		s := newStore(t, mech, "alice", "s3cret")
		ex, _, err := run(t, s, mech, "alice", "s3cret")
		if err != nil || ex.Principal() != "User:alice" {
			t.Fatalf("%s: %v, principal %q", mech, err, ex.Principal())
		}
		if ex, _, err := run(t, s, mech, "alice", "wrong"); !errors.Is(err, ErrAuthentication) || ex.Principal() != "" {
			t.Fatalf("%s wrong password: %v", mech, err)
		}
		if _, _, err := run(t, s, mech, "mallory", "s3cret"); !errors.Is(err, ErrAuthentication) {
			t.Fatalf("%s unknown user: %v", mech, err)
		}
	}
	if _, err := Start("PLAIN", store{}.lookup); !errors.Is(err, ErrUnsupportedMechanism) {
		t.Fatalf("PLAIN: %v", err)
	}
}

// TestReplayedAndTruncatedExchange shows a recorded exchange replayed
// against a new one fails (the server's nonce differs), a message after
// the end fails, and a truncated client-final fails.
func TestReplayedAndTruncatedExchange(t *testing.T) {
	mech := metadata.ScramSHA256
	s := newStore(t, mech, "alice", "s3cret")
	ex, sent, err := run(t, s, mech, "alice", "s3cret")
	if err != nil || len(sent) != 2 {
		t.Fatalf("exchange: %v, %d messages", err, len(sent))
	}
	if _, _, err := ex.Step(sent[1]); !errors.Is(err, ErrAuthentication) {
		t.Fatalf("message after the end: %v", err)
	}
	replay, _ := Start(mech, s.lookup)
	if _, _, err := replay.Step(sent[0]); err != nil {
		t.Fatalf("replayed client-first: %v", err)
	}
	if _, done, err := replay.Step(sent[1]); !errors.Is(err, ErrAuthentication) || done || replay.Principal() != "" {
		t.Fatalf("replayed client-final: done %v, %v", done, err)
	}
	cl, _ := NewClient(mech, "alice", "s3cret")
	first, _ := cl.Step(nil)
	trunc, _ := Start(mech, s.lookup)
	serverFirst, _, err := trunc.Step(first)
	if err != nil {
		t.Fatal(err)
	}
	final, _ := cl.Step(serverFirst)
	if _, done, err := trunc.Step(final[:len(final)/2]); !errors.Is(err, ErrAuthentication) || done {
		t.Fatalf("truncated client-final: done %v, %v", done, err)
	}
	half, _ := Start(mech, s.lookup)
	if _, done, err := half.Step(first[:len(first)/2]); err == nil && done {
		t.Fatal("truncated client-first completed")
	}
}

// FuzzServerExchange feeds arbitrary client messages to the server side:
// it never panics, and never authenticates without the password.
func FuzzServerExchange(f *testing.F) {
	mech := metadata.ScramSHA256
	s := newStore(f, mech, "alice", "s3cret")
	f.Add([]byte("n,,n=alice,r=abc"), []byte("c=biws,r=abc,p=AAAA"), []byte(""))
	f.Add([]byte(""), []byte("x"), []byte("y"))
	f.Add([]byte("y,a=alice,n=alice,r=abcdef"), []byte("c=eSxhPWFsaWNlLA==,r=abcdef,p=dGVzdA=="), []byte("c=biws"))
	f.Fuzz(func(t *testing.T, m1, m2, m3 []byte) {
		ex, err := Start(mech, s.lookup)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range [][]byte{m1, m2, m3} {
			if _, done, err := ex.Step(m); err != nil || done {
				if done {
					t.Fatalf("authenticated without the password: %q %q", m1, m2)
				}
				return
			}
		}
	})
}
