package simnet

import "flag"

// flagFixedKnobs runs the seeds with FixedKnobs: the node configuration
// the simulator ran before it drew one per seed (knobs.go).
var flagFixedKnobs = flag.Bool("sim.fixed-knobs", false, "run every node with the simulator's old fixed configuration (raft ticked every tick) instead of drawing it per seed")
