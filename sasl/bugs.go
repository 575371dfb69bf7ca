//go:build !simbugs

package sasl

// Production builds carry no planted bug: the hook below is constant
// false. The simulator's bug-planting build (-tags simbugs,
// bugs_simbugs.go) gives it content.

// bugAcceptsAnyProof (AcceptsAnyProof) takes a final client message whose
// proof is wrong as a proof.
func bugAcceptsAnyProof() bool { return false }

// bugRefusesUnconfirmed (SASLRefusesUnconfirmed) refuses on the lookup as
// it is, without asking for a confirmation.
func bugRefusesUnconfirmed() bool { return false }
