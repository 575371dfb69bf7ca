//go:build simbugs

package simnet

// OperatorBugNames are the planted bugs the operator actor's checks are
// for: they need authorization on (two seeds of three). AcceptsAnyProof is
// package sasl's (the server's SCRAM step takes a wrong proof): the
// impostor's check catches it (sasl.go).
var OperatorBugNames = []string{"AuthSkipsAlterQuotas", "AcceptsAnyProof"}
