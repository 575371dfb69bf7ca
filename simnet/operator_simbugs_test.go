//go:build simbugs

package simnet

import (
	"fmt"
	"runtime/debug"
	"testing"
)

// An authorization check skipped for one request type (AlterQuotas) is
// caught by the operator actor: its intruder's AlterQuotas is answered as
// if allowed, or its quota shows in the read-back. Without the operator
// (the simulator before it: authorization never on) the same seed passes.
// Catch rates: TestSimAuthCatchRate.
func TestSimCatchesAuthSkipsAlterQuotas(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(400))
	const seed = 1 // authorization on; the first catching seed of 1-200
	o := seedOptions(t, seed, "mixed", "AuthSkipsAlterQuotas")
	o.StopAtFailure = true
	if res := runSeed(t, o, ""); !failsWith(res, "authorization:") && !failsWith(res, "operator:") {
		t.Errorf("seed %d: AuthSkipsAlterQuotas not caught by the operator: %q", seed, res.Failures)
	}
	o = seedOptions(t, seed, "mixed", "AuthSkipsAlterQuotas")
	o.Operator = false
	if res := runSeed(t, o, ""); res.Failed() {
		t.Errorf("seed %d without the operator failed (it should not see the bug): %s", seed, firstLine(res.Failures[0]))
	}
}

// The standard sample (sampleOptions: groups, moves, joins, ... drawn per
// seed) catches AuthSkipsAlterQuotas in at least half of seeds 1-200, as
// issue 21 asks: authorization is on in two seeds of three whatever the
// workload mix. Before the group members, the mover and the joins'
// administrator had principals it was on only in seeds without those
// workloads, 28 of 200, and the bug was caught in 3 of seeds 1-30; after,
// 118 of 200. CI asks 9 catches within seeds 1-60 (the ninth comes at
// seed 13): a floor whose wide window keeps a shift of the traces from
// failing it; make sim-bugs measures the 200 the half is about.
func TestSimCatchesAuthSkipsAlterQuotasInSample(t *testing.T) {
	requireCatches(t, "AuthSkipsAlterQuotas", 1, 60, 9, "", sampleOptions, nil)
}

// A refusal decided on a node's applied metadata without a read index
// confirming it current (AuthRefusesUnconfirmed) is caught by the grant
// check (operator_grants.go): a request of the workload's or the
// operator's principal that reached a node lagging an acknowledged grant is
// refused. Seed 45 without features is the one that found the production
// bug (a follower confirmed once per term refused User:app on metadata
// without the admin's grant); seeds 2 and 3 of the standard sample catch
// it through the grant probe. make sim-bugs BUGS=AuthRefusesUnconfirmed
// SEEDS=30: 17 of seeds 1-30 (about two in three draw authorization); 13
// with 8 probes a run, 0 with the bootstrap grants alone (0 of 30 without
// features either: their lag window is a run's first few hundred ms).
// Re-pinned after the fifteenth session's merges moved the traces (seed 1
// no longer catches): 7 of seeds 1-12 [2 3 4 5 6 7 9]; pinned on 2 and 3.
func TestSimCatchesAuthRefusesUnconfirmed(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(400))
	const marker = "after the ACL grants allowing it were acknowledged"
	for _, seed := range []uint64{2, 3} {
		o := sampleOptions(t, seed, "mixed", "AuthRefusesUnconfirmed")
		o.StopAtFailure = true
		if res := runSeed(t, o, ""); !failsWith(res, marker) {
			t.Errorf("seed %d: AuthRefusesUnconfirmed not caught by the grant check: %q (re-pin: make sim-bugs BUGS=AuthRefusesUnconfirmed SEEDS=30 lists the catching seeds)", seed, res.Failures)
		}
	}
	o := seedOptions(t, 45, "mixed", "AuthRefusesUnconfirmed")
	o.StopAtFailure = true
	if res := runSeed(t, o, ""); !failsWith(res, marker) {
		t.Errorf("seed 45 without features: AuthRefusesUnconfirmed not caught by the grant check: %q", res.Failures)
	}
}

// TestSimAuthCatchRate prints how often AuthSkipsAlterQuotas is caught
// over -sim.catchrate seeds with the operator and without it (make
// sim-bugs prints the first only). For humans; skipped unless
// -sim.catchrate is set.
func TestSimAuthCatchRate(t *testing.T) {
	if *flagCatchRate <= 0 {
		t.Skip("set -sim.catchrate=N")
	}
	defer debug.SetGCPercent(debug.SetGCPercent(400))
	for _, operatorOn := range []bool{false, true} {
		caught := 0
		for i := range *flagCatchRate {
			o := seedOptions(t, *flagSeedStart+uint64(i), *flagProfile, "AuthSkipsAlterQuotas")
			o.Operator, o.StopAtFailure = operatorOn, true
			if runSeed(t, o, "").Failed() {
				caught++
			}
		}
		fmt.Printf("catchrate: AuthSkipsAlterQuotas operator=%v caught %d/%d\n", operatorOn, caught, *flagCatchRate)
	}
}

// A server step that takes a wrong SCRAM proof (sasl's AcceptsAnyProof)
// is caught by the impostor (simnet/sasl.go): claiming User:app with a
// wrong password, its exchange completes and its request reaches
// HandleAs. Without authorization (Operator off) nothing requires SASL and
// the same seed passes. make sim-bugs BUGS=AcceptsAnyProof measures the
// rate: 60 of seeds 1-100 (about 67 draw authorization) with six impostor
// attempts per run, 55 with three.
func TestSimCatchesAcceptsAnyProof(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(400))
	for _, seed := range []uint64{1, 2} { // authorization on in both
		o := seedOptions(t, seed, "mixed", "AcceptsAnyProof")
		o.StopAtFailure = true
		if res := runSeed(t, o, ""); !failsWith(res, "sasl: the impostor") {
			t.Errorf("seed %d: AcceptsAnyProof not caught by the impostor check: %q", seed, res.Failures)
		}
	}
	o := seedOptions(t, 1, "mixed", "AcceptsAnyProof")
	o.Operator = false
	if res := runSeed(t, o, ""); res.Failed() {
		t.Errorf("seed 1 without the operator failed (nothing requires SASL): %s", firstLine(res.Failures[0]))
	}
}

// A login refused on a node's credentials as they are, without the
// confirmation that they are current (sasl's SASLRefusesUnconfirmed), is
// caught by the SASL refusal check (simnet/sasl.go stepped): a node that
// has not applied the users the admin created and saw acknowledged refuses
// a login on a connection dialed after the acknowledgement — the lag
// probe's, right after the creation (usersCreated), or a client's. Without
// the bug the same seed passes: the refusal waits for a metadata read
// index and the login goes on. make sim-bugs BUGS=SASLRefusesUnconfirmed
// SEEDS=30: 10 of seeds 1-30, all among the 18 that draw authorization
// (10 of 18); the lag probe finds a node lagging the creation only now and
// then (53 probe logins over the standard sample's 200 seeds), so most
// catches are clients reaching a node that was down or wiped when the
// users were created. Pinned seeds: 3 and 4; re-pinned 2026-12-07 after
// the s14 merges moved the traces (seed 1 no longer catches): make
// sim-bugs BUGS=SASLRefusesUnconfirmed SEEDS=10 catches in 6 of seeds 1-10
// [3 4 5 6 7 9]. Re-pin from that command's list when the trace moves.
func TestSimCatchesSASLRefusesUnconfirmed(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(400))
	const marker = "a refusal decided on metadata not confirmed current"
	for _, seed := range []uint64{3, 4} {
		o := sampleOptions(t, seed, "mixed", "SASLRefusesUnconfirmed")
		o.StopAtFailure = true
		if res := runSeed(t, o, ""); !failsWith(res, marker) {
			t.Errorf("seed %d: SASLRefusesUnconfirmed not caught by the SASL refusal check: %q (re-pin: make sim-bugs BUGS=SASLRefusesUnconfirmed SEEDS=10 lists the catching seeds)", seed, res.Failures)
		}
	}
	if res := runSeed(t, sampleOptions(t, 1, "mixed", ""), ""); res.Failed() {
		t.Errorf("seed 1 without the bug failed: %s", firstLine(res.Failures[0]))
	}
}

// A Kafka listener whose SASL gate takes SaslHandshake as authentication
// (kafkaproto's KafkaHandshakeAuthenticates) is caught by the Kafka
// impostor (simnet/kafka_sasl.go): its fetch sent right after the
// handshake passes the gate. Without authorization nothing requires SASL
// and the same seed passes. make sim-bugs BUGS=KafkaHandshakeAuthenticates
// measures the rate: 23 of seeds 1-40, 121 of 1-200 (about two in three draw
// authorization).
func TestSimCatchesKafkaHandshakeAuthenticates(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(400))
	for _, seed := range []uint64{1, 2, 3} {
		o := seedOptions(t, seed, "mixed", "KafkaHandshakeAuthenticates")
		o.StopAtFailure = true
		if res := runSeed(t, o, ""); !failsWith(res, "kafka-sasl: the Kafka impostor's request passed") {
			t.Errorf("seed %d: KafkaHandshakeAuthenticates not caught by the Kafka impostor check: %q", seed, res.Failures)
		}
	}
	o := seedOptions(t, 1, "mixed", "KafkaHandshakeAuthenticates")
	o.Operator = false
	if res := runSeed(t, o, ""); res.Failed() {
		t.Errorf("seed 1 without the operator failed (nothing requires SASL): %s", firstLine(res.Failures[0]))
	}
}

// clientlib's security admin calls taking a definite refusal for success
// (LibAdminDropsRefusal: cmd/strand would print "created user" for a
// CreateUser the cluster refused) are caught by the intruder's clientlib
// calls: its SetQuota, AlterACLs, DescribeACLs or CreateUser succeeds as if
// allowed. The simulator before the operator went through clientlib
// called none of them (0 of any seeds); make sim-bugs
// BUGS=LibAdminDropsRefusal measures the rate: 13 of seeds 1-20, 125 of
// 1-200 (about the seeds with authorization on, two in three). Without the
// operator the seed passes.
func TestSimCatchesLibAdminDropsRefusal(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(400))
	for _, seed := range []uint64{1, 2} { // authorization on in both
		o := seedOptions(t, seed, "mixed", "LibAdminDropsRefusal")
		o.StopAtFailure = true
		if res := runSeed(t, o, ""); !failsWith(res, "clientlib's call succeeded as if allowed") {
			t.Errorf("seed %d: LibAdminDropsRefusal not caught by the intruder's clientlib calls: %q", seed, res.Failures)
		}
	}
	o := seedOptions(t, 1, "mixed", "LibAdminDropsRefusal")
	o.Operator = false
	if res := runSeed(t, o, ""); res.Failed() {
		t.Errorf("seed 1 without the operator failed (nothing calls the admin calls): %s", firstLine(res.Failures[0]))
	}
}
