package memstore

import (
	"bytes"
	"context"
	"testing"

	"github.com/strandlog/strand/objstore"
	"github.com/strandlog/strand/objstore/storetest"
)

func TestConformance(t *testing.T) {
	storetest.Run(t, func(*testing.T) objstore.Store { return New(nil) })
}

// scripted answers faults from a list, then None.
type scripted []Fault

func (s *scripted) Decide(op, key string) Fault {
	if len(*s) == 0 {
		return None
	}
	f := (*s)[0]
	*s = (*s)[1:]
	return f
}

func TestFaults(t *testing.T) {
	ctx := context.Background()
	faults := scripted{Fail, LoseAnswer, None, LoseAnswer, LoseAnswer}
	s := New(&faults)
	// Fail: nothing stored, a retriable error.
	err := s.Put(ctx, "a", bytes.NewReader([]byte("1")), 1)
	if !objstore.IsRetriable(err) {
		t.Fatalf("failed put: %v", err)
	}
	if _, ok := s.Bytes("a"); ok {
		t.Fatal("a failed put stored its object")
	}
	// LoseAnswer: stored, yet an error.
	err = s.Put(ctx, "a", bytes.NewReader([]byte("2")), 1)
	if !objstore.IsRetriable(err) {
		t.Fatalf("lost-answer put: %v", err)
	}
	if b, ok := s.Bytes("a"); !ok || string(b) != "2" {
		t.Fatalf("a put whose answer was lost did not store: %q %v", b, ok)
	}
	// None.
	if got, err := s.Get(ctx, "a", 0, -1); err != nil || string(got) != "2" {
		t.Fatalf("get: %q %v", got, err)
	}
	// LoseAnswer on a read is a failure.
	if _, err := s.Get(ctx, "a", 0, -1); !objstore.IsRetriable(err) {
		t.Fatalf("lost-answer get: %v", err)
	}
	// LoseAnswer on a delete deletes.
	if err := s.Delete(ctx, "a"); !objstore.IsRetriable(err) {
		t.Fatalf("lost-answer delete: %v", err)
	}
	if _, ok := s.Bytes("a"); ok {
		t.Fatal("a delete whose answer was lost kept the object")
	}
	st := s.Stats()
	if st.Failed != 2 || st.LostAnswers != 2 || st.Puts != 1 || st.Deletes != 1 {
		t.Fatalf("stats %+v", st)
	}
}
