// Package authz is the node's authorization: a function of the applied metadata (ACL bindings,
// topic ids) that decides, before anything is proposed or read, whether a request may run, which of
// its partitions or items are refused, and what a listing may show. It holds no state, reads no
// clock and never touches raft: the node builds an Authorizer per request from Config.SuperUsers, a
// view of its metadata replica's applied State, and Behind (whether that state can decide a
// refusal yet). Off (Config.Authorization false) the node does not call it at all.
//
// # Rules (Kafka's StandardAuthorizer)
//
// Super users may do anything; otherwise a binding must allow the access and none deny it (deny
// wins; none: no). A caller without authentication is User:ANONYMOUS. Authorize checks the
// accesses a request needs in request order and answers the first refused one for the whole
// request; a request type with no mapping needs ALTER on the cluster, so a new request is closed
// until someone decides what it needs. Produce, Fetch and ListOffsets are refused per partition
// (partitions.go: the refused partitions answered TOPIC_AUTHORIZATION_FAILED at their request
// indexes, the others served; all refused: a whole-request refusal). FilterAnswer drops from a
// listing (Metadata without topics, DescribeTopics without names, ListGroups, ListTransactions)
// what the caller may not describe, not even its name.
//
// A refusal is decided only on a metadata state the node confirmed current for the request: at least
// as new as a metadata read index taken after the request arrived (Confirmed), so it holds every ACL
// change acknowledged before the request was sent. On a state not confirmed, Authorize answers
// nothing for a request it would refuse in whole or in part and reports it pending; the node parks it
// like a linearizable read and asks again once its metadata caught up (node/auth.go:
// confirmThenHandle), or answers a retriable error when that does not happen within the request
// timeout. An allow stands on any applied state (ACL grants propagate eventually, as in Kafka). On a
// confirmed state that is still behind (Behind: a rebuilding replica) a refused access is answered
// UNAVAILABLE (retriable), since the bindings that allow it may be among what is not applied yet.
// Listings filtered by FilterAnswer read the applied state without confirmation (a listing shows
// what the node has applied, ACLs as topics). A partition named only by a
// topic id no applied topic has is not authorized but left to the handler, which answers
// UNKNOWN_TOPIC_ID, as Kafka does, so a client follows a re-created topic.
//
// # Transactions (txn.go)
//
// The TRANSACTIONAL_ID resource (ACL resource type "transactional-id"), as Kafka's authorizer:
// WRITE on the id for InitProducerId with an id, AddPartitionsToTxn (and WRITE on its topics),
// AddOffsetsToTxn (and READ on the group), EndTxn, TxnOffsetCommit and a produce carrying the id;
// DESCRIBE for FindCoordinator of an id and DescribeTransactions (per id, as Kafka answers: a
// refused id is answered in its place and the others are described; every id refused is a
// whole-request refusal); ListTransactions lists only the ids the caller may describe. A refusal
// is TRANSACTIONAL_ID_AUTHORIZATION_FAILED. DescribeProducers needs READ on each topic, refused per
// partition TOPIC_AUTHORIZATION_FAILED the same way. An operator's AbortTransaction needs ALTER on
// the cluster or WRITE on the id.
//
// Tested through the node (node/auth_test.go: TestAuthorizationNegativeTable,
// TestAuthorizationWaitsForMetadataReplay; node/auth_txn_test.go: TestAuthorizationTransactionalID,
// TestDescribeProducersAuthorization) and by the simulator's operator actor (authorization on in
// two seeds of three; the planted bug AuthSkipsAlterQuotas, a hook in the node's call site).
package authz
