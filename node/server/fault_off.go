//go:build !faultinject

package server

// faultState is empty in default builds: fault injection (see
// fault_on.go) exists only in binaries built with -tags faultinject.
type faultState struct{}

func (*faultState) start(<-chan struct{}) {}

// isolated is always false: no fault is ever injected.
func (*faultState) isolated() bool { return false }

// wait returns at once: connections never stall.
func (*faultState) wait(<-chan struct{}) {}

// diskWait returns at once: the disk never stalls.
func (*faultState) diskWait() {}
