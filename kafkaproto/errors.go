package kafkaproto

import (
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/strandlog/strand/proto/strandpb"
)

// kafkaCodeRows is the one mapping between Strand's wire error codes and
// Kafka's, read in both directions. Forward (kafkaCode), each Strand code has
// one row, its Kafka code chosen so a Kafka client does what Strand's own
// client does with the Strand code: retry (and refresh metadata) on the
// retriable ones, fail at once on the definite ones, and never fail for good
// on one that may have been written. Backward (strandCode), several Strand
// codes may share a Kafka code: the first row naming it is the one it maps
// back to, so within such a group the least definite row comes first.
// TestKafkaCodeTable round-trips every row and compares each code's
// Definite flag with kerr's Retriable one.
var kafkaCodeRows = []struct {
	strand strandpb.ErrorCode
	kafka  *kerr.Error
}{
	{strandpb.ErrorCode_ERROR_CODE_NONE, nil},
	// Refused before proposing: go to the leader (refresh metadata).
	{strandpb.ErrorCode_ERROR_CODE_NOT_LEADER, kerr.NotLeaderForPartition},
	{strandpb.ErrorCode_ERROR_CODE_UNKNOWN_TOPIC_OR_PARTITION, kerr.UnknownTopicOrPartition},
	{strandpb.ErrorCode_ERROR_CODE_RECORD_TOO_LARGE, kerr.MessageTooLarge},
	{strandpb.ErrorCode_ERROR_CODE_OFFSET_OUT_OF_RANGE, kerr.OffsetOutOfRange},
	// No quorum: retriable, the batch may have reached the log (Kafka's
	// NOT_ENOUGH_REPLICAS_AFTER_APPEND has exactly that meaning).
	{strandpb.ErrorCode_ERROR_CODE_NOT_ENOUGH_REPLICAS, kerr.NotEnoughReplicasAfterAppend},
	// The node gave up waiting; the outcome is unknown: Kafka's
	// REQUEST_TIMED_OUT is retriable with the same meaning.
	{strandpb.ErrorCode_ERROR_CODE_TIMEOUT, kerr.RequestTimedOut},
	{strandpb.ErrorCode_ERROR_CODE_INVALID_REQUEST, kerr.InvalidRequest},
	{strandpb.ErrorCode_ERROR_CODE_TOPIC_EXISTS, kerr.TopicAlreadyExists},
	{strandpb.ErrorCode_ERROR_CODE_OUT_OF_ORDER_SEQUENCE, kerr.OutOfOrderSequenceNumber},
	{strandpb.ErrorCode_ERROR_CODE_UNKNOWN_PRODUCER_ID, kerr.UnknownProducerID},
	{strandpb.ErrorCode_ERROR_CODE_PRODUCER_FENCED, kerr.InvalidProducerEpoch},
	{strandpb.ErrorCode_ERROR_CODE_UNSUPPORTED_VERSION, kerr.UnsupportedVersion},
	{strandpb.ErrorCode_ERROR_CODE_CORRUPT_BATCH, kerr.CorruptMessage},
	{strandpb.ErrorCode_ERROR_CODE_NOT_CONTROLLER, kerr.NotController},
	// An unexpected failure after the request was taken: it may have been
	// written, and UNKNOWN_SERVER_ERROR would make a Kafka client fail for
	// good. REQUEST_TIMED_OUT says "outcome unknown" (it maps back to
	// TIMEOUT, also maybe written).
	{strandpb.ErrorCode_ERROR_CODE_INTERNAL, kerr.RequestTimedOut},
	// Too many requests wait at the leader; nothing was proposed. Of the
	// retriable codes, only REQUEST_TIMED_OUT and
	// NOT_ENOUGH_REPLICAS_AFTER_APPEND make franz-go resend after its
	// backoff without refreshing metadata (kgo's sink.go), as Strand's
	// client does; both read as maybe written, which is only cautious.
	{strandpb.ErrorCode_ERROR_CODE_BUSY, kerr.RequestTimedOut},
	// No leader yet, or the node is stopping: retriable after a metadata
	// refresh.
	{strandpb.ErrorCode_ERROR_CODE_UNAVAILABLE, kerr.LeaderNotAvailable},
	{strandpb.ErrorCode_ERROR_CODE_INVALID_CONFIG, kerr.InvalidConfig},
	{strandpb.ErrorCode_ERROR_CODE_INVALID_REPLICATION_FACTOR, kerr.InvalidReplicationFactor},
	// Delete of a missing topic (definite on Strand; Kafka has only the
	// one code, which its clients treat as "not there").
	{strandpb.ErrorCode_ERROR_CODE_TOPIC_NOT_FOUND, kerr.UnknownTopicOrPartition},
	{strandpb.ErrorCode_ERROR_CODE_UNKNOWN_TOPIC_ID, kerr.UnknownTopicID},
	{strandpb.ErrorCode_ERROR_CODE_CLUSTER_ID_MISMATCH, kerr.InconsistentClusterID},
	// Consumer groups: Kafka has a code with the same meaning for each,
	// except STALE_HEARTBEAT (a late resend of a heartbeat already
	// applied), which is retriable: COORDINATOR_LOAD_IN_PROGRESS makes a
	// Kafka client send its next heartbeat without rejoining.
	{strandpb.ErrorCode_ERROR_CODE_NOT_COORDINATOR, kerr.NotCoordinator},
	{strandpb.ErrorCode_ERROR_CODE_COORDINATOR_NOT_AVAILABLE, kerr.CoordinatorNotAvailable},
	{strandpb.ErrorCode_ERROR_CODE_UNKNOWN_MEMBER_ID, kerr.UnknownMemberID},
	{strandpb.ErrorCode_ERROR_CODE_FENCED_MEMBER_EPOCH, kerr.FencedMemberEpoch},
	{strandpb.ErrorCode_ERROR_CODE_STALE_MEMBER_EPOCH, kerr.StaleMemberEpoch},
	{strandpb.ErrorCode_ERROR_CODE_GROUP_NOT_EMPTY, kerr.NonEmptyGroup},
	{strandpb.ErrorCode_ERROR_CODE_GROUP_NOT_FOUND, kerr.GroupIDNotFound},
	{strandpb.ErrorCode_ERROR_CODE_STALE_HEARTBEAT, kerr.CoordinatorLoadInProgress},
	{strandpb.ErrorCode_ERROR_CODE_GROUP_SUBSCRIBED_TO_TOPIC, kerr.GroupSubscribedToTopic},
	// Security: Kafka's codes with the same meaning (definite).
	{strandpb.ErrorCode_ERROR_CODE_TOPIC_AUTHORIZATION_FAILED, kerr.TopicAuthorizationFailed},
	{strandpb.ErrorCode_ERROR_CODE_GROUP_AUTHORIZATION_FAILED, kerr.GroupAuthorizationFailed},
	{strandpb.ErrorCode_ERROR_CODE_CLUSTER_AUTHORIZATION_FAILED, kerr.ClusterAuthorizationFailed},
	{strandpb.ErrorCode_ERROR_CODE_TRANSACTIONAL_ID_AUTHORIZATION_FAILED, kerr.TransactionalIDAuthorizationFailed},
	{strandpb.ErrorCode_ERROR_CODE_SASL_AUTHENTICATION_FAILED, kerr.SaslAuthenticationFailed},
	{strandpb.ErrorCode_ERROR_CODE_UNSUPPORTED_SASL_MECHANISM, kerr.UnsupportedSaslMechanism},
	// A full disk refuses writes, retriably, as Kafka's log-dir failure;
	// KAFKA_STORAGE_ERROR maps back to it.
	{strandpb.ErrorCode_ERROR_CODE_NOT_ENOUGH_SPACE, kerr.KafkaStorageError},
	// A replica rebuilding from its peers serves nothing: the client
	// refreshes metadata and asks the leader, as after a leader move.
	{strandpb.ErrorCode_ERROR_CODE_REPLICA_RECOVERING, kerr.NotLeaderForPartition},
	{strandpb.ErrorCode_ERROR_CODE_INVALID_PARTITIONS, kerr.InvalidPartitions},
	{strandpb.ErrorCode_ERROR_CODE_INVALID_RECORD, kerr.InvalidRecord},
	// Answers of the native handshake, never of a Kafka request.
	{strandpb.ErrorCode_ERROR_CODE_PEER_NOT_AUTHENTICATED, kerr.ClusterAuthorizationFailed},
	{strandpb.ErrorCode_ERROR_CODE_TLS_REQUIRED, kerr.SaslAuthenticationFailed},
	// Membership answers come only from Strand's own requests; mapped for
	// completeness.
	{strandpb.ErrorCode_ERROR_CODE_NODE_REMOVED, kerr.BrokerIDNotRegistered},
	{strandpb.ErrorCode_ERROR_CODE_UNKNOWN_NODE, kerr.BrokerIDNotRegistered},
	{strandpb.ErrorCode_ERROR_CODE_MEMBERSHIP_REFUSED, kerr.InvalidRequest},
	// Partition moves (Kafka's reassignment codes).
	{strandpb.ErrorCode_ERROR_CODE_REASSIGNMENT_IN_PROGRESS, kerr.ReassignmentInProgress},
	{strandpb.ErrorCode_ERROR_CODE_INVALID_REPLICA_ASSIGNMENT, kerr.InvalidReplicaAssignment},
	{strandpb.ErrorCode_ERROR_CODE_INVALID_TXN_STATE, kerr.InvalidTxnState},
	{strandpb.ErrorCode_ERROR_CODE_INVALID_PRODUCER_ID_MAPPING, kerr.InvalidProducerIDMapping},
	{strandpb.ErrorCode_ERROR_CODE_INVALID_TRANSACTION_TIMEOUT, kerr.InvalidTransactionTimeout},
	{strandpb.ErrorCode_ERROR_CODE_CONCURRENT_TRANSACTIONS, kerr.ConcurrentTransactions},
	{strandpb.ErrorCode_ERROR_CODE_TRANSACTIONAL_ID_NOT_FOUND, kerr.TransactionalIDNotFound},
	{strandpb.ErrorCode_ERROR_CODE_TRANSACTION_COORDINATOR_FENCED, kerr.TransactionCoordinatorFenced},
	// A node without a marker writer: definite, as Kafka's answer to a
	// request the broker does not support.
	{strandpb.ErrorCode_ERROR_CODE_TRANSACTIONS_NOT_ENABLED, kerr.UnsupportedVersion},
	{strandpb.ErrorCode_ERROR_CODE_UNSTABLE_OFFSET_COMMIT, kerr.UnstableOffsetCommit},
	{strandpb.ErrorCode_ERROR_CODE_FENCED_INSTANCE_ID, kerr.FencedInstanceID},
}

// kafkaCodes and strandCodes are kafkaCodeRows as lookups, forward and
// backward.
var (
	kafkaCodes  = forwardCodes()
	strandCodes = backwardCodes()
)

// forwardCodes indexes kafkaCodeRows by Strand code.
func forwardCodes() map[strandpb.ErrorCode]*kerr.Error {
	m := make(map[strandpb.ErrorCode]*kerr.Error, len(kafkaCodeRows))
	for _, row := range kafkaCodeRows {
		m[row.strand] = row.kafka
	}
	return m
}

// backwardCodes indexes kafkaCodeRows by Kafka code, the first row of each
// code winning.
func backwardCodes() map[int16]strandpb.ErrorCode {
	m := make(map[int16]strandpb.ErrorCode, len(kafkaCodeRows))
	for _, row := range kafkaCodeRows {
		if row.kafka == nil {
			continue
		}
		if _, ok := m[row.kafka.Code]; !ok {
			m[row.kafka.Code] = row.strand
		}
	}
	// PRODUCER_FENCED is no row's code (a fenced produce is Kafka's
	// INVALID_PRODUCER_EPOCH), but the transactional requests answer it
	// (txnCode, txn.go): it reads back as Strand's own.
	m[kerr.ProducerFenced.Code] = strandpb.ErrorCode_ERROR_CODE_PRODUCER_FENCED
	return m
}

// kafkaCode is the Kafka error code for a Strand error: 0 for none, the
// table's code, else (a code this table does not know yet, e.g. one added
// by another feature) UNKNOWN_SERVER_ERROR when definite and
// REQUEST_TIMED_OUT when the Strand code is retriable or maybe written, so a
// client never fails for good on something that may succeed.
func kafkaCode(e *strandpb.Error) int16 {
	if e == nil || e.GetCode() == strandpb.ErrorCode_ERROR_CODE_NONE {
		return 0
	}
	if k, ok := kafkaCodes[e.GetCode()]; ok {
		return k.Code
	}
	if e.GetCode().Info().Definite() {
		return kerr.UnknownServerError.Code
	}
	return kerr.RequestTimedOut.Code
}

// createTopicCode is kafkaCode for a CreateTopics answer. Fewer nodes
// registered than the replication factor is NOT_ENOUGH_REPLICAS on Strand
// (retriable: a node may still be starting); Kafka answers a create in that
// state with INVALID_REPLICATION_FACTOR and the registered count, and Kafka
// admin tools print that, so Strand answers the same (the message says how
// many nodes are available).
func createTopicCode(e *strandpb.Error) int16 {
	if e.GetCode() == strandpb.ErrorCode_ERROR_CODE_NOT_ENOUGH_REPLICAS {
		return kerr.InvalidReplicationFactor.Code
	}
	return kafkaCode(e)
}

// message is e's text for the versions whose responses carry one.
func message(e *strandpb.Error) *string {
	if e == nil || e.GetMessage() == "" {
		return nil
	}
	m := e.GetMessage()
	return &m
}

// partErr is the error of a per-partition answer: its own, else the whole
// response's (a request-level refusal applies to every partition).
func partErr(resp *strandpb.Response, own *strandpb.Error) *strandpb.Error {
	if own.GetCode() != strandpb.ErrorCode_ERROR_CODE_NONE {
		return own
	}
	return resp.GetError()
}
