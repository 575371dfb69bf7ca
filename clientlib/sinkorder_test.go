package clientlib

import (
	"slices"
	"testing"
)

// sortedSinks lists the sinks by topic, then partition, however they were
// made, and a list handed out earlier is not changed by a later sink (the
// producer loop ranges over it while a step may make one).
func TestSortedSinksOrderAndSnapshot(t *testing.T) {
	c, err := NewClient(SeedAddresses("127.0.0.1:1"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	p := newProducer(c)
	names := func(ss []*sink) []topicPartition {
		var out []topicPartition
		for _, s := range ss {
			out = append(out, s.tp)
		}
		return out
	}
	for _, tp := range []topicPartition{{"b", 1}, {"a", 10}, {"b", 0}, {"a", 2}, {"c", 0}, {"a", 10}} {
		p.sink(tp)
	}
	want := []topicPartition{{"a", 2}, {"a", 10}, {"b", 0}, {"b", 1}, {"c", 0}}
	snapshot := p.sortedSinks()
	if got := names(snapshot); !slices.Equal(got, want) {
		t.Fatalf("sinks %v, want %v", got, want)
	}
	p.sink(topicPartition{"a", 5})
	if got := names(snapshot); !slices.Equal(got, want) {
		t.Fatalf("a new sink changed an earlier list: %v, want %v", got, want)
	}
	want = slices.Insert(want, 1, topicPartition{"a", 5})
	if got := names(p.sortedSinks()); !slices.Equal(got, want) || len(p.sinks) != len(want) {
		t.Fatalf("sinks %v (%d in the map), want %v", got, len(p.sinks), want)
	}
}
