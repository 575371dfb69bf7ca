package metadata

import (
	"fmt"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/strandlog/strand/proto/strandpb"
)

// The Encode helpers build the Data of a metadata raft entry, so the node
// and the admin path never touch the proto types. They validate nothing
// the state machine checks (it is the authority); they fail only when the
// command cannot be marshalled (a string that is not UTF-8), with
// ErrInvalidCommand.

// EncodeRegisterNode registers node id at address (host:port) in rack
// (empty: unknown), or updates it, and unfences it.
func EncodeRegisterNode(id uint64, address, rack string) ([]byte, error) {
	return EncodeRegisterNodeKafka(id, address, rack, "")
}

// EncodeRegisterNodeKafka is EncodeRegisterNode with the host:port of the
// node's Kafka listener (empty: none).
func EncodeRegisterNodeKafka(id uint64, address, rack, kafkaAddress string) ([]byte, error) {
	return encode(&strandpb.MetadataCommand{Command: &strandpb.MetadataCommand_RegisterNode{
		RegisterNode: &strandpb.MetadataRegisterNode{NodeId: id, Address: address, Rack: rack, KafkaAddress: kafkaAddress},
	}})
}

// EncodeSetNodeFenced fences node id (no new replicas) or unfences it.
func EncodeSetNodeFenced(id uint64, fenced bool) ([]byte, error) {
	return encode(&strandpb.MetadataCommand{Command: &strandpb.MetadataCommand_SetNodeFenced{
		SetNodeFenced: &strandpb.MetadataSetNodeFenced{NodeId: id, Fenced: fenced},
	}})
}

// EncodePreregisterNode registers node id at address in rack, fenced,
// unless it is registered already (strand node add): the node unfences
// itself when it starts and registers.
func EncodePreregisterNode(id uint64, address, rack string) ([]byte, error) {
	return encode(&strandpb.MetadataCommand{Command: &strandpb.MetadataCommand_RegisterNode{
		RegisterNode: &strandpb.MetadataRegisterNode{NodeId: id, Address: address, Rack: rack, Preregister: true},
	}})
}

// EncodeSetNodeState moves node id to membership state st.
func EncodeSetNodeState(id uint64, st NodeState) ([]byte, error) {
	return encode(&strandpb.MetadataCommand{Command: &strandpb.MetadataCommand_SetNodeState{
		SetNodeState: &strandpb.MetadataSetNodeState{NodeId: id, State: strandpb.MetadataNodeState(st)},
	}})
}

// EncodeCreateTopic creates topic name with partitions partitions of
// replicationFactor replicas and configs overriding the defaults.
func EncodeCreateTopic(name string, partitions, replicationFactor int32, configs []ConfigEntry) ([]byte, error) {
	return encode(&strandpb.MetadataCommand{Command: &strandpb.MetadataCommand_CreateTopic{
		CreateTopic: &strandpb.MetadataCreateTopic{
			Name: name, Partitions: partitions, ReplicationFactor: replicationFactor, Configs: configProto(configs),
		},
	}})
}

// EncodeDeleteTopic deletes topic name.
func EncodeDeleteTopic(name string) ([]byte, error) {
	return encode(&strandpb.MetadataCommand{Command: &strandpb.MetadataCommand_DeleteTopic{
		DeleteTopic: &strandpb.MetadataDeleteTopic{Name: name},
	}})
}

// EncodeDeleteTopicID deletes topic name only if its UUID is id when the
// command applies (ErrUnknownTopicID otherwise): a delete proposed late
// cannot remove a newer topic of the same name.
func EncodeDeleteTopicID(name string, id UUID) ([]byte, error) {
	return encode(&strandpb.MetadataCommand{Command: &strandpb.MetadataCommand_DeleteTopic{
		DeleteTopic: &strandpb.MetadataDeleteTopic{Name: name, TopicId: id[:]},
	}})
}

// EncodeAlterTopicConfig sets the keys in sets and then resets the keys in
// resets to their defaults, on topic name, all or none.
func EncodeAlterTopicConfig(name string, sets []ConfigEntry, resets []string) ([]byte, error) {
	return encode(&strandpb.MetadataCommand{Command: &strandpb.MetadataCommand_AlterTopicConfig{
		AlterTopicConfig: &strandpb.MetadataAlterTopicConfig{Name: name, Sets: configProto(sets), Resets: resets},
	}})
}

// EncodeAllocateProducerIDs asks for count fresh producer ids.
func EncodeAllocateProducerIDs(count int32) ([]byte, error) {
	return encode(&strandpb.MetadataCommand{Command: &strandpb.MetadataCommand_AllocateProducerIds{
		AllocateProducerIds: &strandpb.MetadataAllocateProducerIds{Count: count},
	}})
}

// proposalIDField is MetadataCommand.proposal_id's field number.
const proposalIDField = 1

// WithProposalID returns data (an encoded command) with its proposal id set
// to id, appending to data. Protobuf keeps the last value of a repeated
// scalar field, so this overrides an earlier id.
func WithProposalID(data []byte, id uint64) []byte {
	data = protowire.AppendTag(data, proposalIDField, protowire.VarintType)
	return protowire.AppendVarint(data, id)
}

// encode marshals a command deterministically.
func encode(cmd *strandpb.MetadataCommand) ([]byte, error) {
	data, err := proto.MarshalOptions{Deterministic: true}.Marshal(cmd)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidCommand, err)
	}
	return data, nil
}

// configProto converts config entries for a command.
func configProto(entries []ConfigEntry) []*strandpb.MetadataConfigEntry {
	out := make([]*strandpb.MetadataConfigEntry, len(entries))
	for i, e := range entries {
		out[i] = &strandpb.MetadataConfigEntry{Name: e.Name, Value: e.Value}
	}
	return out
}
