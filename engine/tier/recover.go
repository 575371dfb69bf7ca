package tier

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
)

// Recovery's half of the bucket (doc.go, "Recovery"): the topic
// descriptor a node finds a topic by, with no local state, and the choice
// of the remote log a partition's objects hold.

// ErrDescriptor: a descriptor's bytes are not what EncodeDescriptor
// writes.
var ErrDescriptor = errors.New("tier: bad topic descriptor")

// descriptorVersion is the descriptor format's version.
const descriptorVersion = 1

// descriptorBytesMax bounds a descriptor (a name, a UUID, a few configs).
const descriptorBytesMax = 64 << 10

// Descriptor is what the bucket says of a tiered topic, under
// DescriptorKey(Name): enough to create it again.
type Descriptor struct {
	// Name is the topic's name.
	Name string
	// ID is the UUID its objects are under (topics/<ID>/<partition>/).
	ID string
	// Partitions is the topic's partition count.
	Partitions int32
	// ReplicationFactor is its replication factor.
	ReplicationFactor int32
	// Configs are its configuration entries as describe lists them
	// (sorted by name; strand.remote.recovery.from left out).
	Configs [][2]string
}

// descriptorJSON is the descriptor as stored.
type descriptorJSON struct {
	Version           int         `json:"version"`
	Name              string      `json:"name"`
	ID                string      `json:"id"`
	Partitions        int32       `json:"partitions"`
	ReplicationFactor int32       `json:"replication_factor"`
	Configs           [][2]string `json:"configs"`
}

// DescriptorKey is the key of the descriptor of the topic named name.
func DescriptorKey(name string) string { return "names/" + name }

// PartitionPrefix is the key prefix (no trailing slash) of partition p of
// the topic whose objects are under id.
func PartitionPrefix(id string, p int32) string { return fmt.Sprintf("topics/%s/%d", id, p) }

// EncodeDescriptor is d as stored: JSON, so an operator can read it.
func EncodeDescriptor(d Descriptor) ([]byte, error) {
	if err := d.check(); err != nil {
		return nil, err
	}
	configs := d.Configs
	if configs == nil {
		configs = [][2]string{}
	}
	return json.Marshal(descriptorJSON{Version: descriptorVersion, Name: d.Name, ID: d.ID, Partitions: d.Partitions,
		ReplicationFactor: d.ReplicationFactor, Configs: configs})
}

// DecodeDescriptor reads what EncodeDescriptor wrote; anything else
// (another version, unknown fields, a field out of range) is
// ErrDescriptor saying what is wrong.
func DecodeDescriptor(b []byte) (Descriptor, error) {
	if len(b) > descriptorBytesMax {
		return Descriptor{}, fmt.Errorf("%w: %d bytes, more than %d", ErrDescriptor, len(b), descriptorBytesMax)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var j descriptorJSON
	if err := dec.Decode(&j); err != nil {
		return Descriptor{}, fmt.Errorf("%w: %w", ErrDescriptor, err)
	}
	if dec.More() {
		return Descriptor{}, fmt.Errorf("%w: bytes after the descriptor", ErrDescriptor)
	}
	if j.Version != descriptorVersion {
		return Descriptor{}, fmt.Errorf("%w: version %d, this build reads %d", ErrDescriptor, j.Version, descriptorVersion)
	}
	d := Descriptor{Name: j.Name, ID: j.ID, Partitions: j.Partitions, ReplicationFactor: j.ReplicationFactor, Configs: j.Configs}
	if len(d.Configs) == 0 {
		d.Configs = nil
	}
	return d, d.check()
}

// check refuses a descriptor no node writes.
func (d Descriptor) check() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: "+format, append([]any{ErrDescriptor}, args...)...)
	}
	switch {
	case d.Name == "" || len(d.Name) > 249 || strings.ContainsAny(d.Name, "/\\") || d.Name == "." || d.Name == "..":
		return bad("topic name %q", d.Name)
	case d.ID == "" || len(d.ID) > 64 || strings.ContainsAny(d.ID, "/\\. "):
		return bad("id %q", d.ID)
	case d.Partitions < 1 || d.Partitions > 1<<20:
		return bad("%d partitions", d.Partitions)
	case d.ReplicationFactor < 1 || d.ReplicationFactor > 1<<10:
		return bad("replication factor %d", d.ReplicationFactor)
	}
	for i, c := range d.Configs {
		if c[0] == "" || (i > 0 && d.Configs[i-1][0] >= c[0]) {
			return bad("config %d %q: names not sorted or empty", i, c[0])
		}
	}
	return nil
}

// Chain answers the remote log that segs, a partition's objects as their
// keys name them (ParseSegmentKey, Bytes the object's size), hold: the
// longest run of contiguous objects that ends at the highest offset any
// of them holds, oldest first. Every object holds committed records at
// their own offsets (a leader uploads only below the high-water mark), so
// any contiguous run is the partition's records; stale uploads of another
// term, or an upload whose ADD never committed, serve as well as the
// listed ones. From the end, each step takes an object ending where the
// run begins, the newest term first, then the lowest base. Deterministic
// whatever the order of segs.
func Chain(segs []Segment) []Segment {
	if len(segs) == 0 {
		return nil
	}
	s := append([]Segment(nil), segs...)
	better := func(a, b Segment) bool { // a is preferred to b among objects ending at the same offset
		if a.Term != b.Term {
			return a.Term > b.Term
		}
		if a.Base != b.Base {
			return a.Base < b.Base
		}
		return a.Bytes < b.Bytes
	}
	sort.Slice(s, func(i, j int) bool {
		if s[i].End != s[j].End {
			return s[i].End < s[j].End
		}
		return better(s[i], s[j])
	})
	// ending[e] is the preferred object ending at e (the first of its run
	// in s's order).
	ending := make(map[int64]Segment, len(s))
	for _, g := range s {
		if _, ok := ending[g.End]; !ok {
			ending[g.End] = g
		}
	}
	var out []Segment
	cur, ok := ending[s[len(s)-1].End]
	for ok && len(out) < len(s) {
		out = append(out, cur)
		cur, ok = ending[cur.Base]
	}
	for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
		out[i], out[j] = out[j], out[i]
	}
	return out
}

// RemoteLog answers the remote log a recovery restores from a partition's
// listing: its objects segs (as for Chain) and the starts of its log
// start markers (StartKey). The log is Chain's, less the objects wholly
// below the highest marker, and starts at that marker or at the first
// object kept, whichever is higher: a delete-records or retention trim
// whose objects were not deleted yet stays done. With no object left it
// is empty at the marker (or 0).
func RemoteLog(segs []Segment, starts []int64) ([]Segment, int64) {
	start := int64(0)
	for _, s := range starts {
		start = max(start, s)
	}
	chain := Chain(segs)
	k := 0
	for k < len(chain) && chain[k].End <= start {
		k++
	}
	chain = chain[k:]
	if len(chain) > 0 {
		start = max(start, chain[0].Base)
	}
	return chain, start
}
