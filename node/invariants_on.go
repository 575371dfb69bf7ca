//go:build invariants

package node

// invariantsEnabled turns on the expensive assertions: after every Process
// that ran out of work, no group may be ready (ready.go's marks missed
// none). `make test-invariants` (run by CI) builds with the invariants tag.
const invariantsEnabled = true
