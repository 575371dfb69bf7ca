package node

// tickService is one subsystem the host runs on Core.Tick. Services are
// registered once, in Open, in the order they run: the order is part of
// the node's behaviour (and so of the simulator's trace), so a new service
// goes where its dependencies put it, not at a random place.
type tickService struct {
	// raftTick: the service runs only on raft ticks, before the groups'
	// raft clocks advance; otherwise on every Tick, after them.
	raftTick bool
	// needsMeta: the service runs only once the metadata group is open.
	needsMeta bool
	tick      func()
}

// registerServices lists the subsystems Tick runs, in their order.
func (c *Core) registerServices() {
	c.services = []tickService{
		{raftTick: true, tick: c.checkStall},       // stall.go; first: the liveness frames carry its verdict
		{raftTick: true, tick: c.livenessRaftTick}, // liveness.go
		{needsMeta: true, tick: c.expireMetaWaits}, // meta.go
		{needsMeta: true, tick: c.maybeRegister},   // meta.go
		{needsMeta: true, tick: c.maybeChangeMembership},
		{needsMeta: true, tick: c.maybeReportLeaders}, // identity.go
		{tick: c.retentionTick},                       // retention.go
		{tick: c.expireSessions},                      // longpoll.go
		{tick: c.sweepGroups},                         // groups_sweep.go
		{tick: c.sweepTxn},                            // txn_sweep.go
		{tick: c.rejoinTick},                          // rejoin.go
		{tick: c.campaignFresh},                       // elect.go
		{tick: c.moveTick},                            // moves.go
		{tick: c.runRepairs},                          // repair.go
		{tick: c.checkSpace},                          // diskfull.go
	}
}

// tickServices runs the registered services of one phase: those that run
// on raft ticks before the groups' clocks (raftTick), or the others.
func (c *Core) tickServices(raftTick bool) {
	for _, s := range c.services {
		if s.raftTick == raftTick && (!s.needsMeta || c.meta != nil) {
			s.tick()
		}
	}
}
