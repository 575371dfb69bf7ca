//go:build !invariants

package node

// invariantsEnabled is off in normal builds: see invariants_on.go.
const invariantsEnabled = false
