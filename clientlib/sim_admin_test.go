package clientlib

import (
	"bytes"
	"context"
	"testing"

	"github.com/strandlog/strand/proto/strandpb"
)

// A simulated Client's CreateUser salts the credential from the client's
// seeded source: the same seed stores the same credential (a simulator
// seed replays), another seed another salt. Before, the salt came from
// crypto/rand whatever the client.
func TestSimulatedCreateUserSaltFromSeed(t *testing.T) {
	stored := func(seed uint64) []byte {
		var salt []byte
		w := &scriptedWorld{answer: func(addr string, req *strandpb.Request) *strandpb.Response {
			if u := req.GetAlterUsers(); u != nil {
				salt = u.GetUpserts()[0].GetCredential().GetSalt()
				return &strandpb.Response{Body: &strandpb.Response_AlterUsers{AlterUsers: &strandpb.AlterUsersResponse{
					Results: []*strandpb.AlterUsersResponse_Result{{Name: "u"}}}}}
			}
			return twoNodeMetadata()
		}}
		c, err := NewClient(Simulated(w), SeedAddresses("n1"), RandSeed(seed))
		if err != nil {
			t.Fatal(err)
		}
		var cerr error
		c.SimRun(func(ctx context.Context) { cerr = c.CreateUser(ctx, "u", "password", "SCRAM-SHA-256") }, func() {})
		w.run(t, 1000)
		if cerr != nil || len(salt) == 0 {
			t.Fatalf("seed %d: CreateUser = %v, salt %x", seed, cerr, salt)
		}
		return salt
	}
	a, b, other := stored(7), stored(7), stored(8)
	if !bytes.Equal(a, b) {
		t.Errorf("seed 7 stored salts %x and %x", a, b)
	}
	if bytes.Equal(a, other) {
		t.Errorf("seeds 7 and 8 stored the same salt %x", a)
	}
}
