package strandpb

import (
	"errors"
	"fmt"
)

// CodeInfo is what a wire error code means to whoever receives it: the one
// table the node's mapping, the Go client's classification and the fake
// cluster share (hand-written next to the generated enum; TestErrorCodeTable
// fails when an enum value has no row).
type CodeInfo struct {
	// Name is the user-facing name: lower case, without the ERROR_CODE_
	// prefix ("not_leader").
	Name string
	// Retriable: the same request may succeed later; back off and resend.
	Retriable bool
	// RefreshMetadata: the sender's view of leaders or topics is stale.
	RefreshMetadata bool
	// MaybeWritten: a write answered this way may still have happened (the
	// node gave up waiting for a proposal it had made).
	MaybeWritten bool
}

// Definite reports whether the code is a definite failure: nothing was
// written and a resend cannot change the answer, so a caller fails at once.
func (i CodeInfo) Definite() bool { return !i.Retriable && !i.MaybeWritten }

// errorCodeInfo is the table, indexed by code.
var errorCodeInfo = map[ErrorCode]CodeInfo{
	ErrorCode_ERROR_CODE_NONE: {Name: "none"},
	// This node does not lead the partition (or no longer): go where the
	// hint or fresh metadata says.
	ErrorCode_ERROR_CODE_NOT_LEADER: {Name: "not_leader", Retriable: true, RefreshMetadata: true},
	// From a node whose metadata may lag a create; the client decides how
	// long a topic may stay unknown (clientlib.UnknownTopicRetries).
	ErrorCode_ERROR_CODE_UNKNOWN_TOPIC_OR_PARTITION: {Name: "unknown_topic_or_partition", Retriable: true, RefreshMetadata: true},
	ErrorCode_ERROR_CODE_RECORD_TOO_LARGE:           {Name: "record_too_large"},
	ErrorCode_ERROR_CODE_OFFSET_OUT_OF_RANGE:        {Name: "offset_out_of_range"},
	// No quorum right now: the proposal may have reached the raft log.
	ErrorCode_ERROR_CODE_NOT_ENOUGH_REPLICAS: {Name: "not_enough_replicas", Retriable: true, MaybeWritten: true},
	// The node gave up waiting: the outcome is unknown.
	ErrorCode_ERROR_CODE_TIMEOUT:         {Name: "timeout", Retriable: true, MaybeWritten: true},
	ErrorCode_ERROR_CODE_INVALID_REQUEST: {Name: "invalid_request"},
	ErrorCode_ERROR_CODE_TOPIC_EXISTS:    {Name: "topic_exists"},
	// Retriable here; the idempotent window decides what it means for a
	// given batch.
	ErrorCode_ERROR_CODE_OUT_OF_ORDER_SEQUENCE: {Name: "out_of_order_sequence", Retriable: true},
	// The partition lost (or never had) the producer's state: retriable
	// as OUT_OF_ORDER_SEQUENCE, which the idempotent window treats alike.
	ErrorCode_ERROR_CODE_UNKNOWN_PRODUCER_ID: {Name: "unknown_producer_id", Retriable: true},
	ErrorCode_ERROR_CODE_PRODUCER_FENCED:     {Name: "producer_fenced"},
	ErrorCode_ERROR_CODE_UNSUPPORTED_VERSION: {Name: "unsupported_version"},
	// Damaged in transit: a resend carries a fresh copy.
	ErrorCode_ERROR_CODE_CORRUPT_BATCH:  {Name: "corrupt_batch", Retriable: true},
	ErrorCode_ERROR_CODE_NOT_CONTROLLER: {Name: "not_controller", Retriable: true, RefreshMetadata: true},
	// A bug or an unexpected failure after the request was taken.
	ErrorCode_ERROR_CODE_INTERNAL: {Name: "internal", MaybeWritten: true},
	// The node has too many requests waiting: nothing was proposed, and
	// the leader has not moved, so the sender backs off without a refresh.
	ErrorCode_ERROR_CODE_BUSY: {Name: "busy", Retriable: true},
	// No leader yet, or the node is shutting down: elections take seconds.
	ErrorCode_ERROR_CODE_UNAVAILABLE:                {Name: "unavailable", Retriable: true, RefreshMetadata: true},
	ErrorCode_ERROR_CODE_INVALID_CONFIG:             {Name: "invalid_config"},
	ErrorCode_ERROR_CODE_INVALID_REPLICATION_FACTOR: {Name: "invalid_replication_factor"},
	ErrorCode_ERROR_CODE_TOPIC_NOT_FOUND:            {Name: "topic_not_found"},
	// The topic or cluster the request was made for is gone: a resend
	// would read or write another log.
	ErrorCode_ERROR_CODE_UNKNOWN_TOPIC_ID:    {Name: "unknown_topic_id"},
	ErrorCode_ERROR_CODE_CLUSTER_ID_MISMATCH: {Name: "cluster_id_mismatch"},
	// Consumer groups. The coordinator moved or is not elected yet: find
	// it again and resend (a commit answered so was not applied).
	ErrorCode_ERROR_CODE_NOT_COORDINATOR:           {Name: "not_coordinator", Retriable: true, RefreshMetadata: true},
	ErrorCode_ERROR_CODE_COORDINATOR_NOT_AVAILABLE: {Name: "coordinator_not_available", Retriable: true, RefreshMetadata: true},
	// The member must rejoin (epoch 0); the same request cannot succeed.
	ErrorCode_ERROR_CODE_UNKNOWN_MEMBER_ID:   {Name: "unknown_member_id"},
	ErrorCode_ERROR_CODE_FENCED_MEMBER_EPOCH: {Name: "fenced_member_epoch"},
	ErrorCode_ERROR_CODE_STALE_MEMBER_EPOCH:  {Name: "stale_member_epoch"},
	ErrorCode_ERROR_CODE_GROUP_NOT_EMPTY:     {Name: "group_not_empty"},
	ErrorCode_ERROR_CODE_GROUP_NOT_FOUND:     {Name: "group_not_found"},
	ErrorCode_ERROR_CODE_STALE_HEARTBEAT:     {Name: "stale_heartbeat", Retriable: true},
	// An offset delete of a topic the group's members subscribe to: kept.
	ErrorCode_ERROR_CODE_GROUP_SUBSCRIBED_TO_TOPIC: {Name: "group_subscribed_to_topic"},
	// The replica's disk is full: refused before anything was written;
	// writes resume once space returns.
	ErrorCode_ERROR_CODE_NOT_ENOUGH_SPACE: {Name: "not_enough_space", Retriable: true},
	// The replica is rebuilding from its peers: ask again, maybe elsewhere.
	ErrorCode_ERROR_CODE_REPLICA_RECOVERING: {Name: "replica_recovering", Retriable: true, RefreshMetadata: true},
	// A partition count the topic cannot take (partitions are only added).
	ErrorCode_ERROR_CODE_INVALID_PARTITIONS: {Name: "invalid_partitions"},
	// A peer without a certificate naming its node id on a TLS node.
	ErrorCode_ERROR_CODE_PEER_NOT_AUTHENTICATED: {Name: "peer_not_authenticated"},
	// A plaintext client on a TLS listener: connect with TLS.
	ErrorCode_ERROR_CODE_TLS_REQUIRED: {Name: "tls_required"},
	// Security: refused by the ACLs (or the credentials); nothing was
	// written or read, and a resend gets the same answer until an admin
	// changes the ACLs.
	ErrorCode_ERROR_CODE_TOPIC_AUTHORIZATION_FAILED:   {Name: "topic_authorization_failed"},
	ErrorCode_ERROR_CODE_GROUP_AUTHORIZATION_FAILED:   {Name: "group_authorization_failed"},
	ErrorCode_ERROR_CODE_CLUSTER_AUTHORIZATION_FAILED: {Name: "cluster_authorization_failed"},
	ErrorCode_ERROR_CODE_SASL_AUTHENTICATION_FAILED:   {Name: "sasl_authentication_failed"},
	ErrorCode_ERROR_CODE_UNSUPPORTED_SASL_MECHANISM:   {Name: "unsupported_sasl_mechanism"},
	// WRITE or DESCRIBE on the transactional id refused.
	ErrorCode_ERROR_CODE_TRANSACTIONAL_ID_AUTHORIZATION_FAILED: {Name: "transactional_id_authorization_failed"},
	// Membership (strand node ...): all definite.
	ErrorCode_ERROR_CODE_NODE_REMOVED:       {Name: "node_removed"},
	ErrorCode_ERROR_CODE_UNKNOWN_NODE:       {Name: "unknown_node"},
	ErrorCode_ERROR_CODE_MEMBERSHIP_REFUSED: {Name: "membership_refused"},
	// A move of the partition is in progress: wait for it to finish.
	ErrorCode_ERROR_CODE_REASSIGNMENT_IN_PROGRESS: {Name: "reassignment_in_progress"},
	// A move target that repeats, or names unknown or fenced nodes.
	ErrorCode_ERROR_CODE_INVALID_REPLICA_ASSIGNMENT: {Name: "invalid_replica_assignment"},
	// Transactions: the coordinator refused the operation; nothing changed.
	ErrorCode_ERROR_CODE_INVALID_TXN_STATE:           {Name: "invalid_txn_state"},
	ErrorCode_ERROR_CODE_INVALID_PRODUCER_ID_MAPPING: {Name: "invalid_producer_id_mapping"},
	ErrorCode_ERROR_CODE_INVALID_TRANSACTION_TIMEOUT: {Name: "invalid_transaction_timeout"},
	// The previous transaction's markers are still being written.
	ErrorCode_ERROR_CODE_CONCURRENT_TRANSACTIONS:    {Name: "concurrent_transactions", Retriable: true},
	ErrorCode_ERROR_CODE_TRANSACTIONAL_ID_NOT_FOUND: {Name: "transactional_id_not_found"},
	// A newer coordinator owns the id: this one's markers are refused.
	ErrorCode_ERROR_CODE_TRANSACTION_COORDINATOR_FENCED: {Name: "transaction_coordinator_fenced"},
	// The node writes no transaction markers yet: EndTxn cannot complete.
	ErrorCode_ERROR_CODE_TRANSACTIONS_NOT_ENABLED: {Name: "transactions_not_enabled"},
	ErrorCode_ERROR_CODE_UNSTABLE_OFFSET_COMMIT:   {Name: "unstable_offset_commit", Retriable: true},
	ErrorCode_ERROR_CODE_FENCED_INSTANCE_ID:       {Name: "fenced_instance_id"},
	// A keyless record to a compacted topic: nothing of the batch written.
	ErrorCode_ERROR_CODE_INVALID_RECORD: {Name: "invalid_record"},
}

// Info is code's row of the table. A code this build does not know (a newer
// node's) is a definite failure named by its number.
func (x ErrorCode) Info() CodeInfo {
	if i, ok := errorCodeInfo[x]; ok {
		return i
	}
	return CodeInfo{Name: fmt.Sprintf("error_code_%d", int32(x))}
}

// Name is code's user-facing name (Info().Name).
func (x ErrorCode) Name() string { return x.Info().Name }

// sentinel is an error that carries its wire code. Packages make their
// sentinels with NewSentinel, so mapping an error to the wire needs no
// table beside them: CodeOf finds the code through any wrapping.
type sentinel struct {
	code ErrorCode
	text string
}

// NewSentinel returns an error with text whose wire code is code. errors.Is
// matches it by identity, as it does errors.New's.
func NewSentinel(code ErrorCode, text string) error {
	return &sentinel{code: code, text: text}
}

// Error implements error.
func (s *sentinel) Error() string { return s.text }

// CodeOf is err's wire code: NONE for nil, else the code of the first
// sentinel in err's tree (errors.As order: err, then what it wraps, depth
// first, left to right), else INTERNAL. INTERNAL is the one default, since
// an error no sentinel explains came after the request was taken and a
// write may have happened.
func CodeOf(err error) ErrorCode {
	if err == nil {
		return ErrorCode_ERROR_CODE_NONE
	}
	var s *sentinel
	if errors.As(err, &s) {
		return s.code
	}
	return ErrorCode_ERROR_CODE_INTERNAL
}
