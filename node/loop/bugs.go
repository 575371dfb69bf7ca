//go:build !simbugs

package loop

// bugStaleSecurity is the planted StaleSecurityView: false in production
// builds (bugs_simbugs.go gives it a switch).
func bugStaleSecurity() bool { return false }
