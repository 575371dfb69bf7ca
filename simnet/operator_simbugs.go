//go:build simbugs

package simnet

// OperatorBugNames are the planted bugs the operator actor's checks are
// for: they need authorization on (two seeds of three). AcceptsAnyProof is
// package sasl's (the server's SCRAM step takes a wrong proof): the
// impostor's check catches it (sasl.go). KafkaHandshakeAuthenticates is
// package kafkaproto's (the Kafka listener's SASL gate passes requests
// once SaslHandshake named a mechanism): the Kafka impostor's check
// catches it (kafka_sasl.go). LibAdminDropsRefusal is clientlib's (its
// security admin calls, users, ACLs and quotas, take a definite refusal
// for success): the intruder's clientlib calls catch it
// (judgeIntruderLib). AuthRefusesUnconfirmed is node's (a refusal decided
// on applied metadata no read index confirmed current): the grant check
// catches it (operator_grants.go). SASLRefusesUnconfirmed is package
// sasl's (a login refused on the node's credentials as they are, without
// the confirmation that they are current): the SASL refusal check
// catches it, mostly through the lag probe's login right after the users'
// creation (sasl.go usersCreated).
var OperatorBugNames = []string{"AuthSkipsAlterQuotas", "AuthRefusesUnconfirmed", "AcceptsAnyProof", "KafkaHandshakeAuthenticates", "LibAdminDropsRefusal",
	"SASLRefusesUnconfirmed"}
