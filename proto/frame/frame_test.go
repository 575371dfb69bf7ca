package frame

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/strandlog/strand/proto/strandpb"
)

// A frame written with Append reads back as the same message, and several
// frames back to back stay aligned.
func TestRoundTrip(t *testing.T) {
	var stream []byte
	var err error
	for i := uint64(1); i <= 3; i++ {
		m := &strandpb.Request{CorrelationId: i, Body: &strandpb.Request_Metadata{Metadata: &strandpb.MetadataRequest{Topics: []string{"t"}}}}
		if stream, err = Append(stream, m); err != nil {
			t.Fatal(err)
		}
	}
	r := bufio.NewReader(bytes.NewReader(stream))
	var buf []byte
	for i := uint64(1); i <= 3; i++ {
		var got strandpb.Request
		if buf, err = Decode(r, buf, BytesMaxDefault, &got); err != nil {
			t.Fatal(err)
		}
		if got.GetCorrelationId() != i || got.GetMetadata().GetTopics()[0] != "t" {
			t.Fatalf("frame %d read back as %v", i, &got)
		}
	}
	if _, err := Read(r, buf, BytesMaxDefault); !errors.Is(err, io.EOF) {
		t.Fatalf("after the last frame: %v, want io.EOF", err)
	}
}

// A length over the limit is refused before any payload is read or
// allocated; an empty frame and a truncated payload are errors too.
func TestBadFrames(t *testing.T) {
	cases := []struct {
		name  string
		input []byte
		want  error
	}{
		{"too large", []byte{0x7f, 0xff, 0xff, 0xff}, ErrTooLarge},
		{"empty", []byte{0, 0, 0, 0}, ErrEmpty},
		{"truncated payload", []byte{0, 0, 0, 5, 1, 2}, io.ErrUnexpectedEOF},
		{"truncated prefix", []byte{0, 0}, io.ErrUnexpectedEOF},
	}
	for _, c := range cases {
		_, err := Read(bytes.NewReader(c.input), nil, 1<<20)
		if !errors.Is(err, c.want) {
			t.Errorf("%s: got %v, want %v", c.name, err, c.want)
		}
	}
	var m strandpb.Request
	if _, err := Decode(bytes.NewReader([]byte{0, 0, 0, 2, 0xff, 0xff}), nil, 1<<20, &m); err == nil {
		t.Error("malformed protobuf payload decoded without error")
	}
}

// FuzzDecode feeds arbitrary bytes to the request and response decoders: no
// panic, no read past a frame's declared length, and every message that
// decodes survives a re-encode and decode unchanged.
func FuzzDecode(f *testing.F) {
	seed, _ := Append(nil, &strandpb.Request{CorrelationId: 7, Body: &strandpb.Request_Fetch{Fetch: &strandpb.FetchRequest{MaxWaitMs: 100, Partitions: []*strandpb.FetchRequest_Partition{{Topic: "a", Offset: 3}}}}})
	f.Add(seed)
	f.Add([]byte{0, 0, 0, 1, 0})
	f.Add([]byte{0xff, 0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, data []byte) {
		r := bytes.NewReader(data)
		var request strandpb.Request
		payload, err := Decode(r, nil, 1<<16, &request)
		if err != nil {
			return
		}
		if consumed := len(data) - r.Len(); consumed != LengthBytes+len(payload) {
			t.Fatalf("consumed %d bytes for a %d-byte payload", consumed, len(payload))
		}
		again, err := Append(nil, &request)
		if err != nil {
			if errors.Is(err, ErrEmpty) {
				return // a payload of only unknown or default fields re-encodes empty
			}
			t.Fatal(err)
		}
		var back strandpb.Request
		if _, err := Decode(bytes.NewReader(again), nil, 1<<20, &back); err != nil {
			t.Fatal(err)
		}
		if !proto.Equal(&request, &back) {
			t.Fatalf("re-encoded message differs: %v vs %v", &request, &back)
		}
	})
}
