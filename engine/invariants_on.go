//go:build invariants

package engine

// invariantsEnabled turns on the expensive assertions: the O(n) check of
// the whole partition after every applied entry. `make test-invariants`
// (run by CI) builds with the invariants tag.
const invariantsEnabled = true
