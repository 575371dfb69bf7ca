//go:build simbugs

package clientlib

// The planted bugs' switches (the simulator sets them per run; see
// bugs.go for what each hook does). Package state, as engine/groups'
// planted bugs are: they exist only in a -tags simbugs build.
var bugAutoCommitFetchedOn, bugSeekSkipsTargetOn, bugExhaustedDefiniteOn, bugStallNotSentOn bool

// SetBugs switches the client's planted bugs on or off.
func SetBugs(autoCommitFetched bool) { bugAutoCommitFetchedOn = autoCommitFetched }

func bugAutoCommitFetched() bool { return bugAutoCommitFetchedOn }

// SetConsumerBugs switches the plain consumer's planted bugs on or off.
func SetConsumerBugs(seekSkipsTarget bool) { bugSeekSkipsTargetOn = seekSkipsTarget }

func bugSeekSkipsTarget() bool { return bugSeekSkipsTargetOn }

// SetProducerBugs switches the producer's planted bugs on or off.
func SetProducerBugs(exhaustedDefinite bool) { bugExhaustedDefiniteOn = exhaustedDefinite }

func bugExhaustedDefinite() bool { return bugExhaustedDefiniteOn }

var bugAdminDropsRefusalOn bool

// SetAdminBugs switches the admin calls' planted bugs on or off.
func SetAdminBugs(dropsRefusal bool) { bugAdminDropsRefusalOn = dropsRefusal }

func bugAdminDropsRefusal() bool { return bugAdminDropsRefusalOn }

var bugIgnoresThrottleOn bool

// SetConnBugs switches the connections' planted bugs on or off.
func SetConnBugs(stallNotSent, ignoresThrottle bool) {
	bugStallNotSentOn, bugIgnoresThrottleOn = stallNotSent, ignoresThrottle
}

func bugStallNotSent() bool { return bugStallNotSentOn }

func bugIgnoresThrottle() bool { return bugIgnoresThrottleOn }

var bugCommitSkipsFlushOn bool

// SetTxnBugs switches the transactional producer's planted bugs on or off.
func SetTxnBugs(commitSkipsFlush bool) { bugCommitSkipsFlushOn = commitSkipsFlush }

func bugCommitSkipsFlush() bool { return bugCommitSkipsFlushOn }

var bugUnsureForgottenOn bool

// SetUnsureBugs switches the admin calls' in-attempt planted bug on or off.
func SetUnsureBugs(forgotten bool) { bugUnsureForgottenOn = forgotten }

func bugUnsureForgotten() bool { return bugUnsureForgottenOn }

var bugCoordinatorBehindThrottleOn bool

// SetCoordinatorBugs switches the coordinator connection's planted bug on
// or off.
func SetCoordinatorBugs(behindThrottle bool) { bugCoordinatorBehindThrottleOn = behindThrottle }

func bugCoordinatorBehindThrottle() bool { return bugCoordinatorBehindThrottleOn }
