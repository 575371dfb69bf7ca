package node

import (
	"bytes"
	"fmt"
	"unicode/utf8"

	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
)

// Raft frames (proto/strand.proto RaftFrame) are built and parsed here with
// protowire instead of through strandpb structs: each raftpb.Message is
// marshalled once, straight into the frame's buffer, and a received frame's
// messages are unmarshalled from sub-slices of the frame, so a payload is
// copied once per destination on the way out and once on the way in. The
// bytes are exactly what proto.Marshal (Deterministic) of the equivalent
// RaftFrame gives, and parseRaftFrame accepts and rejects what
// proto.Unmarshal does (TestRaftFrameCodecMatchesProto).

// Field numbers of RaftFrame and RaftMessage.
const (
	raftFrameFromNode   protowire.Number = 1
	raftFrameMessages   protowire.Number = 2
	raftMessageTopic    protowire.Number = 1
	raftMessagePart     protowire.Number = 2
	raftMessageMessage  protowire.Number = 3
	raftFrameProbes     protowire.Number = 50 // RejoinProbe (rejoin.go)
	raftFrameAnswers    protowire.Number = 51 // RejoinAnswer
	raftFrameDisk       protowire.Number = 52 // liveness frames: the sender's disk state
	raftFrameTxnReqs    protowire.Number = 53 // peer requests of the transaction coordinators (txn_peer.go)
	raftFrameTxnResps   protowire.Number = 54 // their answers
	raftFramePrefixReq  protowire.Number = 55 // compacted-prefix requests (compaction_install.go)
	raftFramePrefix     protowire.Number = 56 // their chunks
	raftFrameIncarn     protowire.Number = 57 // liveness frames: the sender's incarnation
	raftFramePrefixHeld protowire.Number = 58 // what a replica's prefix holds (compaction_held.go)
)

// Values of RaftFrame.disk_state (0, absent: not said).
const (
	diskStateOK   = 1
	diskStateFull = 2
	// diskStateStalled: a storage job has not returned (stall.go); a node
	// that does not know it reads it as not full, and only misses that
	// the sender should not lead.
	diskStateStalled = 3
)

// deterministic marshals raft messages as they always were (map-free
// today, deterministic in case raftpb grows maps).
var deterministic = proto.MarshalOptions{Deterministic: true}

// raftFrameMessage is one raft message waiting in a frame being built, with
// its sizes (Size caches the message's size, so marshalling does not size
// it again).
type raftFrameMessage struct {
	topic      string
	partition  int32
	m          *raftpb.Message
	innerBytes int // RaftMessage bytes
	msgBytes   int // marshalled raftpb.Message bytes
}

// sizeRaftMessage sizes RaftMessage{topic, partition, m}.
func sizeRaftMessage(topic string, partition int32, m *raftpb.Message) raftFrameMessage {
	fm := raftFrameMessage{topic: topic, partition: partition, m: m, msgBytes: deterministic.Size(m)}
	if topic != "" {
		fm.innerBytes += 1 + protowire.SizeBytes(len(topic))
	}
	if partition != 0 {
		fm.innerBytes += 1 + protowire.SizeVarint(uint64(int64(partition)))
	}
	if fm.msgBytes > 0 {
		fm.innerBytes += 1 + protowire.SizeBytes(fm.msgBytes)
	}
	return fm
}

// frameBytes is the size of a RaftFrame field holding fm.
func (fm *raftFrameMessage) frameBytes() int { return 1 + protowire.SizeBytes(fm.innerBytes) }

// encodeLivenessFrame builds the liveness frame a node sends every peer on
// every raft tick (quiesce.go): no messages, its disk state (diskState*)
// and its incarnation.
func encodeLivenessFrame(from NodeID, state, incarnation uint64) []byte {
	buf := encodeRaftFrame(from, nil)
	buf = protowire.AppendTag(buf, raftFrameDisk, protowire.VarintType)
	buf = protowire.AppendVarint(buf, state)
	buf = protowire.AppendTag(buf, raftFrameIncarn, protowire.VarintType)
	return protowire.AppendVarint(buf, incarnation)
}

// encodeRaftFrame builds the bytes of RaftFrame{from, msgs} in one buffer
// of exactly the right size, marshalling each message in place.
func encodeRaftFrame(from NodeID, msgs []raftFrameMessage) []byte {
	size := 1 + protowire.SizeVarint(uint64(from))
	for i := range msgs {
		size += msgs[i].frameBytes()
	}
	buf := make([]byte, 0, size)
	buf = protowire.AppendTag(buf, raftFrameFromNode, protowire.VarintType)
	buf = protowire.AppendVarint(buf, uint64(from))
	for i := range msgs {
		buf = appendRaftMessage(buf, &msgs[i])
	}
	if len(buf) != size {
		panic(fmt.Sprintf("node: raft frame encoded to %d bytes, sized %d", len(buf), size))
	}
	return buf
}

// appendRaftMessage appends the RaftMessage field of fm to a frame.
func appendRaftMessage(buf []byte, fm *raftFrameMessage) []byte {
	buf = protowire.AppendTag(buf, raftFrameMessages, protowire.BytesType)
	buf = protowire.AppendVarint(buf, uint64(fm.innerBytes))
	if fm.topic != "" {
		buf = protowire.AppendTag(buf, raftMessageTopic, protowire.BytesType)
		buf = protowire.AppendString(buf, fm.topic)
	}
	if fm.partition != 0 {
		buf = protowire.AppendTag(buf, raftMessagePart, protowire.VarintType)
		buf = protowire.AppendVarint(buf, uint64(int64(fm.partition)))
	}
	if fm.msgBytes > 0 {
		buf = protowire.AppendTag(buf, raftMessageMessage, protowire.BytesType)
		buf = protowire.AppendVarint(buf, uint64(fm.msgBytes))
		var err error
		// sizeRaftMessage cached m's size; nothing changed m since.
		buf, err = proto.MarshalOptions{Deterministic: true, UseCachedSize: true}.MarshalAppend(buf, fm.m)
		if err != nil {
			panic(fmt.Sprintf("node: marshal raft message: %v", err))
		}
	}
	return buf
}

// rawRaftMessage is one RaftMessage of a received frame; its slices alias
// the frame.
type rawRaftMessage struct {
	topic     []byte
	partition int32
	message   []byte
}

// parseRaftFrame decodes a RaftFrame's sender and messages (appended to
// msgs), aliasing the frame's bytes, and its rejoin probes and answers
// (into rj when not nil; they are rare and small, so unmarshalled). ok is
// false when proto.Unmarshal would refuse the frame: bad wire format, or a
// topic that is not UTF-8.
func parseRaftFrame(b []byte, msgs []rawRaftMessage, rj *rejoinFrame) (from uint64, _ []rawRaftMessage, ok bool) {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 || num > protowire.MaxValidNumber {
			return 0, msgs, false
		}
		b = b[n:]
		switch {
		case num == raftFrameFromNode && typ == protowire.VarintType:
			from, n = protowire.ConsumeVarint(b)
		case num == raftFrameMessages && typ == protowire.BytesType:
			var v []byte
			v, n = protowire.ConsumeBytes(b)
			if n >= 0 {
				rm, good := parseRaftMessage(v)
				if !good {
					return 0, msgs, false
				}
				msgs = append(msgs, rm)
			}
		case num == raftFrameDisk && typ == protowire.VarintType:
			var v uint64
			v, n = protowire.ConsumeVarint(b)
			if rj != nil {
				rj.disk = v
			}
		case num == raftFrameIncarn && typ == protowire.VarintType:
			var v uint64
			v, n = protowire.ConsumeVarint(b)
			if rj != nil {
				rj.incarnation = v
			}
		case (num == raftFrameProbes || num == raftFrameAnswers) && typ == protowire.BytesType:
			var v []byte
			v, n = protowire.ConsumeBytes(b)
			if n >= 0 {
				if rj == nil {
					rj = &rejoinFrame{}
				}
				if !rj.parse(num == raftFrameAnswers, v) {
					return 0, msgs, false
				}
			}
		case (num == raftFrameTxnReqs || num == raftFrameTxnResps) && typ == protowire.BytesType:
			var v []byte
			v, n = protowire.ConsumeBytes(b)
			if n >= 0 && rj != nil {
				rj.txn.parse(num == raftFrameTxnResps, v) // a bytes field: one that does not decode is dropped alone
			}
		case (num == raftFramePrefixReq || num == raftFramePrefix) && typ == protowire.BytesType:
			var v []byte
			v, n = protowire.ConsumeBytes(b)
			if n >= 0 && rj != nil {
				rj.prefix.parse(num == raftFramePrefix, v) // one that does not decode is dropped alone
			}
		case num == raftFramePrefixHeld && typ == protowire.BytesType:
			var v []byte
			v, n = protowire.ConsumeBytes(b)
			if n >= 0 && rj != nil {
				rj.prefix.parseHeld(v) // one that does not decode is dropped alone
			}
		default:
			n = protowire.ConsumeFieldValue(num, typ, b)
		}
		if n < 0 {
			return 0, msgs, false
		}
		b = b[n:]
	}
	return from, msgs, true
}

// parseRaftMessage decodes one RaftMessage, aliasing b.
func parseRaftMessage(b []byte) (rm rawRaftMessage, ok bool) {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 || num > protowire.MaxValidNumber {
			return rm, false
		}
		b = b[n:]
		switch {
		case num == raftMessageTopic && typ == protowire.BytesType:
			rm.topic, n = protowire.ConsumeBytes(b)
			if n >= 0 && !utf8.Valid(rm.topic) {
				return rm, false // proto3 strings must be UTF-8
			}
		case num == raftMessagePart && typ == protowire.VarintType:
			var v uint64
			v, n = protowire.ConsumeVarint(b)
			rm.partition = int32(v)
		case num == raftMessageMessage && typ == protowire.BytesType:
			rm.message, n = protowire.ConsumeBytes(b)
		default:
			n = protowire.ConsumeFieldValue(num, typ, b)
		}
		if n < 0 {
			return rm, false
		}
		b = b[n:]
	}
	return rm, true
}

// topicCache turns the topic bytes of consecutive messages into a string,
// allocating only when the topic changes (a frame's messages come grouped
// by partition).
type topicCache struct {
	raw  []byte
	name string
}

// get returns raw as a string.
func (t *topicCache) get(raw []byte) string {
	if t.raw == nil || !bytes.Equal(t.raw, raw) {
		t.raw, t.name = raw, string(raw)
	}
	return t.name
}
