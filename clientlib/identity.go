package clientlib

import (
	"bytes"
	"encoding/hex"
	"errors"
	"fmt"

	"github.com/strandlog/strand/internal/clientcore"
	"github.com/strandlog/strand/proto/strandpb"
)

// Sentinels of the identity errors; errors.Is matches them against an
// *Error of the code and against TopicRecreatedError and
// ClusterChangedError.
var (
	ErrUnknownTopicID    = &Error{Code: strandpb.ErrorCode_ERROR_CODE_UNKNOWN_TOPIC_ID}
	ErrClusterIDMismatch = &Error{Code: strandpb.ErrorCode_ERROR_CODE_CLUSTER_ID_MISMATCH}
)

// TopicRecreatedError: the topic a consumer was reading was deleted (and,
// when NewID is set, created again under the same name) while it read.
// The old topic's offsets mean nothing in the new one, so the partition
// stops until Seek: continuing would silently skip or repeat records.
// Matches ErrUnknownTopicID; never retriable.
type TopicRecreatedError struct {
	Topic     string
	Partition int32
	// OldID is the id the consumer started on; NewID the topic's id now,
	// nil when no topic of the name exists.
	OldID, NewID []byte
}

// Error implements error.
func (e *TopicRecreatedError) Error() string {
	if len(e.NewID) == 0 {
		return fmt.Sprintf("clientlib: topic %s (id %s) was deleted while consuming partition %d", e.Topic, FormatID(e.OldID), e.Partition)
	}
	return fmt.Sprintf("clientlib: topic %s was deleted and re-created (id %s → %s) while consuming partition %d; offsets of the old topic do not apply: Seek to start again",
		e.Topic, FormatID(e.OldID), FormatID(e.NewID), e.Partition)
}

// Is matches ErrUnknownTopicID.
func (e *TopicRecreatedError) Is(target error) bool { return target == ErrUnknownTopicID }

// Retriable is false: the caller must decide where to read the new topic.
func (e *TopicRecreatedError) Retriable() bool { return false }

// ClusterChangedError: a node answered with another cluster id than the
// one this client first saw: the cluster behind the address was replaced
// (a `strand dev` restarted, a new cluster on the same hosts). Offsets,
// producer ids and topics of the old cluster mean nothing there. Matches
// ErrClusterIDMismatch; never retriable: use a new Client.
type ClusterChangedError struct {
	Addr         string
	OldID, NewID []byte
}

// Error implements error.
func (e *ClusterChangedError) Error() string {
	return fmt.Sprintf("clientlib: the cluster at %s was replaced (cluster id %s → %s): offsets and topics of the old cluster do not apply",
		e.Addr, FormatID(e.OldID), FormatID(e.NewID))
}

// Is matches ErrClusterIDMismatch.
func (e *ClusterChangedError) Is(target error) bool { return target == ErrClusterIDMismatch }

// Retriable is false.
func (e *ClusterChangedError) Retriable() bool { return false }

// FormatID formats a 16-byte topic or cluster id as a UUID (8-4-4-4-12
// hex digits); other lengths as plain hex, empty as "none".
func FormatID(id []byte) string {
	if len(id) == 0 {
		return "none"
	}
	h := hex.EncodeToString(id)
	if len(id) != 16 {
		return h
	}
	return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

// checkClusterLocked fixes the client's cluster at the first cluster id a
// node names, and refuses any other id after: the answer of a replaced
// cluster is never mixed into this client's view. An empty id (a node of
// a cluster that has no id yet, or an older node) is not checked. c.mu
// must be held.
func (c *Client) checkClusterLocked(id []byte, addr string) error {
	switch {
	case len(id) == 0:
		return nil
	case c.clusterID == nil:
		c.clusterID = bytes.Clone(id)
		return nil
	case bytes.Equal(id, c.clusterID):
		return nil
	}
	c.clusterErr = &ClusterChangedError{Addr: addr, OldID: c.clusterID, NewID: bytes.Clone(id)}
	return c.clusterErr
}

// ClusterID is the id of the cluster this client talks to, nil until a
// node named one.
func (c *Client) ClusterID() []byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	return bytes.Clone(c.clusterID)
}

// topicID is the cached id of topic, nil when unknown.
func (c *Client) topicID(topic string) []byte {
	if t := c.cachedTopic(topic); t != nil {
		return t.ID
	}
	return nil
}

// cachedTopic is the cache's view of topic, nil when never seen.
func (c *Client) cachedTopic(topic string) *clientcore.TopicInfo {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.meta.Topic(topic)
}

// TopicIDChangedError fails a DeleteTopic that named the topic id the
// client's metadata knew, when the topic of that name no longer has it: it
// was deleted (and, when NewID is set, created again under the name) since.
// Nothing was deleted. To delete the topic the name has now, refresh
// metadata and delete again. Matches ErrUnknownTopicID; never retriable.
type TopicIDChangedError struct {
	Topic string
	// ID is the id the delete named; NewID the topic's id now, nil when
	// the client could not learn one.
	ID, NewID []byte
	// Err is the metadata group's answer (UNKNOWN_TOPIC_ID).
	Err error
}

// Error implements error.
func (e *TopicIDChangedError) Error() string {
	if len(e.NewID) == 0 {
		return fmt.Sprintf("clientlib: delete topic %s refused: the topic no longer has id %s (deleted, maybe re-created, since this client's metadata); nothing was deleted",
			e.Topic, FormatID(e.ID))
	}
	return fmt.Sprintf("clientlib: delete topic %s refused: the topic now has id %s, not %s (deleted and re-created since this client's metadata); nothing was deleted",
		e.Topic, FormatID(e.NewID), FormatID(e.ID))
}

// Is matches ErrUnknownTopicID.
func (e *TopicIDChangedError) Is(target error) bool { return target == ErrUnknownTopicID }

// Unwrap gives the metadata group's answer.
func (e *TopicIDChangedError) Unwrap() error { return e.Err }

// Retriable is false: the caller must decide whether to delete the new topic.
func (e *TopicIDChangedError) Retriable() bool { return false }

// TopicGoneError fails a produced record whose batch was bound to a topic
// id that is no longer the topic's: the topic was deleted (and, when NewID
// is set, created again under the same name) before the batch was
// acknowledged. The producer names the topic id on every produce (KIP-516),
// so no node writes the batch into the new topic: its offsets and
// sequence numbers belong to the old one. The record was not written to
// the new topic; MaybeWritten says an earlier attempt may have been written
// to the deleted one (whose records no reader can reach once the delete
// finishes). Produce the record again to write it to the new topic.
// Matches ErrUnknownTopicID; never retriable.
type TopicGoneError struct {
	Topic     string
	Partition int32
	// OldID is the id the batch was produced under; NewID the topic's id
	// now, nil when no topic of the name exists.
	OldID, NewID []byte
	// MaybeWritten: an attempt of the batch may be in the deleted topic.
	MaybeWritten bool
	// Err is the last attempt's error (UNKNOWN_TOPIC_ID), nil when the
	// batch was failed before it was sent again, on metadata naming
	// another id.
	Err error
}

// Error implements error.
func (e *TopicGoneError) Error() string {
	var s string
	if len(e.NewID) == 0 {
		s = fmt.Sprintf("clientlib: topic %s (id %s) was deleted before partition %d acknowledged the record; it was not written",
			e.Topic, FormatID(e.OldID), e.Partition)
	} else {
		s = fmt.Sprintf("clientlib: topic %s was deleted and re-created (id %s → %s) before partition %d acknowledged the record; it was not written to the new topic",
			e.Topic, FormatID(e.OldID), FormatID(e.NewID), e.Partition)
	}
	if e.MaybeWritten {
		s += " (an earlier attempt may have been written to the deleted topic)"
	}
	return s
}

// Is matches ErrUnknownTopicID.
func (e *TopicGoneError) Is(target error) bool { return target == ErrUnknownTopicID }

// Unwrap gives the last attempt's error.
func (e *TopicGoneError) Unwrap() error { return e.Err }

// Retriable is false: the record must be produced again, to the new topic.
func (e *TopicGoneError) Retriable() bool { return false }

// MaybeWritten reports whether a record whose promise got err may be in the
// log all the same: a *RetriesExhaustedError or *TopicGoneError whose
// MaybeWritten is set. Every other error a promise gets means the record is
// not in the log and will not be.
func MaybeWritten(err error) bool {
	var re *RetriesExhaustedError
	if errors.As(err, &re) {
		return re.MaybeWritten
	}
	var tg *TopicGoneError
	return errors.As(err, &tg) && tg.MaybeWritten
}
