//go:build !invariants

package engine

// invariantsEnabled is off in normal builds: see invariants_on.go.
const invariantsEnabled = false
