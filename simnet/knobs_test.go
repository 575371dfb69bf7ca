package simnet

import (
	"flag"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/strandlog/strand/node"
	"github.com/strandlog/strand/node/server"
)

// flagKnobs draws the nodes' configuration per seed (knobs.go), production's
// the most common draw: on in the standard sample (TestSim, make sim) and
// every test built on seedOptions; -sim.knobs=false (make sim KNOBS=0)
// runs the simulator's old fixed configuration (FixedKnobs) instead.
var flagKnobs = flag.Bool("sim.knobs", true, "draw every node's configuration per seed, production's timing the most common draw (false: the simulator's old fixed one, raft ticked every tick)")

// knobOptions is seedOptions with the knobs drawn (draw) or fixed.
func knobOptions(t *testing.T, seed uint64, profile, bug string, draw bool) Options {
	t.Helper()
	was := *flagKnobs
	*flagKnobs = draw
	defer func() { *flagKnobs = was }()
	return seedOptions(t, seed, profile, bug)
}

// knobExempt are node.Config's fields the draw leaves alone, each with the
// reason it cannot sensibly vary in the simulator.
var knobExempt = map[string]string{
	"ID": "the node's identity", "Nodes": "the cluster's membership (the scenario's)",
	"Disk": "the simulated disk", "Network": "the simulated network", "Clock": "the virtual clock",
	"Rand": "the node's seeded stream", "Logger": "output only",
	"Observer":            "the checker's apply hook",
	"CoordinatorRestored": "the checker's group-restore hook (offsets_replay.go)",
	"MinFreeBytes":        "the disk-full fault's floor (fulldisk.go): at 0 a full disk fails a write and fail-stops the node",
	"Authorization":       "drawn by the operator actor, which sets up users and ACLs",
	"SuperUsers":          "drawn by the operator actor, with Authorization",
	"plantedBugs":         "the planted-bug switches (-tags simbugs)",
	"TieredStorageUnfinished": "the gate of the unfinished tiered storage (issue 27): the simulator runs the parts " +
		"built; production's false refuses remote.storage.enable, which no seed then could exercise",
	"ObjectStore": "the run's shared simulated bucket (tier.go), set when a seed draws tiering",
	"Groups.OffsetsPartitions": "sized by the workloads (operator.go, wire_group.go): one or two partitions of " +
		"__strand_offsets, where production's default of 50 would add 150 raft groups to every seed",
	"Txn.Partitions": "sized by the operator (operator.go, txnPartitions): one partition of __strand_transactions, " +
		"where production's default of 8 would add 24 raft groups to every seed",
}

// productionConfig is node.Config as node/server runs it under cmd/strand's
// defaults (fillCoreConfig, and serve's marker writer): its knobs'
// production values.
func productionConfig() node.Config {
	return node.Config{TickDuration: server.TickDefault, ElectionTicks: server.ElectionTicksDefault,
		HeartbeatTicks: server.HeartbeatTicksDefault, TicksPerRaftTick: server.TicksPerRaftTickDefault,
		RequestTimeoutTicks: server.RequestTimeoutTicksDefault, RetentionCheckTicks: prodRetentionCheckTicks,
		Txn: node.TxnConfig{Markers: node.PartitionMarkers{}}}
}

// sampleConfigs is the node config of node 1 in each seed of the standard
// sample, as startNode builds it.
func sampleConfigs(seeds int) []node.Config {
	var cfgs []node.Config
	for seed := uint64(1); seed <= uint64(seeds); seed++ {
		w := newWorld(Choose(Standard(seed, Mixed)))
		cfgs = append(cfgs, w.nodeConfig(w.nodes[0], 1))
	}
	return cfgs
}

// configFields flattens cfg's fields (nested structs by their path) to
// printed values, for comparison.
func configFields(v reflect.Value, prefix string, out map[string]string) {
	for i := range v.NumField() {
		f, name := v.Type().Field(i), prefix+v.Type().Field(i).Name
		if _, ok := knobExempt[name]; ok {
			continue
		}
		fv := v.Field(i)
		if fv.Kind() == reflect.Struct && f.Type != reflect.TypeOf(time.Duration(0)) {
			configFields(fv, name+".", out)
			continue
		}
		if fv.Kind() == reflect.Func {
			out[name] = fmt.Sprint(!fv.IsNil())
			continue
		}
		out[name] = fmt.Sprint(fv.Interface())
	}
}

// Every field of node.Config (and its nested configs) is varied by the
// seeds' draw or set to production's value in some seed, unless
// knobExempt names it with a reason: a field added later without a draw
// fails here.
func TestKnobsCoverEveryConfigField(t *testing.T) {
	prod := map[string]string{}
	configFields(reflect.ValueOf(productionConfig()), "", prod)
	values := map[string]map[string]int{}
	for _, cfg := range sampleConfigs(200) {
		fields := map[string]string{}
		configFields(reflect.ValueOf(cfg), "", fields)
		for name, v := range fields {
			if values[name] == nil {
				values[name] = map[string]int{}
			}
			values[name][v]++
		}
	}
	for name, seen := range values {
		if len(seen) < 2 && seen[prod[name]] == 0 {
			t.Errorf("node.Config.%s is %v in every seed, never production's %s: draw it in knobs.go or exempt it in knobExempt with a reason",
				name, seen, prod[name])
		}
	}
}

// The timing knobs take production's value more often than any other.
func TestKnobsProductionMostCommon(t *testing.T) {
	counts := map[string]map[int64]int{}
	for _, cfg := range sampleConfigs(200) {
		for name, v := range map[string]int64{"TicksPerRaftTick": int64(cfg.TicksPerRaftTick),
			"RequestTimeoutTicks": int64(cfg.RequestTimeoutTicks), "ElectionTicks": int64(cfg.ElectionTicks),
			"CheckpointEntries": int64(cfg.CheckpointEntries), "SegmentBytesMax": cfg.SegmentBytesMax,
			"FetchReadBytesPerProcess": cfg.FetchReadBytesPerProcess, "PendingRequestsMax": int64(cfg.PendingRequestsMax)} {
			if counts[name] == nil {
				counts[name] = map[int64]int{}
			}
			counts[name][v]++
		}
	}
	prod := productionConfig()
	want := map[string]int64{"TicksPerRaftTick": int64(prod.TicksPerRaftTick), "RequestTimeoutTicks": int64(prod.RequestTimeoutTicks),
		"ElectionTicks": int64(prod.ElectionTicks)}
	for name, seen := range counts {
		p := want[name] // 0 (node's default) for the others
		for v, n := range seen {
			if v != p && n >= seen[p] {
				t.Errorf("%s: %d seeds drew %d, production's %d only %d: %v", name, n, v, p, seen[p], seen)
			}
		}
	}
}

// FixedKnobs, and the draw's production values, are the simulator's old
// configuration and node/server's defaults.
func TestKnobsProductionMatchesServer(t *testing.T) {
	if prodTickDuration != server.TickDefault || prodElectionTicks != server.ElectionTicksDefault ||
		prodHeartbeatTicks != server.HeartbeatTicksDefault || prodTicksPerRaftTick != server.TicksPerRaftTickDefault ||
		prodRequestTimeoutTicks != server.RequestTimeoutTicksDefault {
		t.Errorf("knobs.go's production constants differ from node/server's defaults")
	}
	if Standard(1, Mixed).TickInterval != server.TickDefault {
		t.Errorf("Standard's tick %v is not production's %v", Standard(1, Mixed).TickInterval, server.TickDefault)
	}
}

// The same seed draws the same knobs.
func TestKnobsDeterministic(t *testing.T) {
	for seed := uint64(1); seed <= 20; seed++ {
		a, b := Choose(Standard(seed, Mixed)), Choose(Standard(seed, Mixed))
		if a.String() != b.String() {
			t.Fatalf("seed %d drew %v then %v", seed, a, b)
		}
	}
}

// Seed 30 with FixedKnobs: a wiped node killed while its metadata group
// caught up (its log past until, not yet applied) reopened, replayed past
// until and finished recovering before reconcile opened its partition
// replicas, which then opened as new and voted with empty logs: an entry
// of term 6 at index 51 overwrote a committed one. Pinned: a change to
// the draws moves the schedule (node/rejoin.go startRejoin).
func TestSimRejoinDoneOnlyAfterReplicasOpen(t *testing.T) {
	base := Standard(30, Mixed)
	base.FixedKnobs = true
	o := Choose(base)
	o.Faults.WipeRejoin = true
	if res := runSeed(t, o, ""); res.Failed() {
		t.Fatalf("seed 30 with fixed knobs: %s", res.Failures[0])
	}
}

// Every draw sees the fault mix's timing per election timeout that the
// fixed knobs see per their 100 ms one: the gap between faults, restart
// delays and network-fault lengths stretch with the drawn election
// timeout.
func TestKnobsScaleFaultTiming(t *testing.T) {
	for seed := uint64(1); seed <= 200; seed++ {
		fixed := Standard(seed, Mixed)
		fixed.FixedKnobs = true
		f, d := Choose(fixed), Choose(Standard(seed, Mixed))
		et := d.Knobs.electionTimeout(d)
		if fe := f.Knobs.electionTimeout(f); fe != electionTimeoutBase {
			t.Fatalf("seed %d: the fixed knobs' election timeout is %v, want %v", seed, fe, electionTimeoutBase)
		}
		for _, p := range []struct {
			name        string
			fixed, draw time.Duration
		}{{"interval", f.Faults.Interval, d.Faults.Interval}, {"restart-min", f.Faults.RestartMin, d.Faults.RestartMin},
			{"restart-max", f.Faults.RestartMax, d.Faults.RestartMax}, {"net-min", f.Faults.NetFaultMin, d.Faults.NetFaultMin},
			{"net-max", f.Faults.NetFaultMax, d.Faults.NetFaultMax}} {
			if p.draw*electionTimeoutBase != p.fixed*et {
				t.Errorf("seed %d: %s %v with a %v election timeout, %v with the fixed knobs' %v", seed, p.name, p.draw, et,
					p.fixed, electionTimeoutBase)
			}
		}
	}
}
