package node

import (
	"errors"
	"testing"

	"go.etcd.io/raft/v3/raftpb"

	"github.com/strandlog/strand/engine/metadata"
	"github.com/strandlog/strand/proto/strandpb"
	"github.com/strandlog/strand/sasl"
)

// TestConfirmMetadataBeforeSASLRefusal is the SASL twin of
// TestAuthorizationConfirmsAfterGrant: a follower of the metadata group
// that has not heard of a user the leader created and acknowledged (its
// appends lost) must not refuse that user's login. Its SASL session asks
// for a confirmation instead of refusing (sasl.ServerStep.Confirm);
// ConfirmMetadata answers only once the follower applied up to a metadata
// ReadIndex started after the call, and the same step then goes on and
// authenticates. Before, the session refused the first step at once
// (SASL_AUTHENTICATION_FAILED: the simulator's sasl/refused-metadata-lag).
// A user the confirmed state lacks is still refused, after the same wait.
func TestConfirmMetadataBeforeSASLRefusal(t *testing.T) {
	admin := Caller{Principal: "User:admin", Host: "127.0.0.1"}
	c := newCluster(t, 1, 3, nil, func(cfg *Config) {
		cfg.Authorization = true
		cfg.SuperUsers = []Principal{admin.Principal}
	})
	c.waitRegistered(3)
	c.tick(20)
	st1, _ := c.cores[1].MetadataStatus()
	leader := NodeID(st1.Leader)
	lag := NodeID(3)
	if leader == 0 || leader == lag {
		lag = 2
	}
	lookup := func(name, mech string) (metadata.Credential, bool) {
		_, creds, _ := c.cores[lag].SecurityState()
		for _, cr := range creds {
			if cr.Name == name && cr.Mechanism == mech {
				return cr, true
			}
		}
		return metadata.Credential{}, false
	}
	c.drop = func(e envelope) bool { return e.to == lag && frameCarries(e.frame, raftpb.MessageType_MsgApp) }
	cred, err := sasl.NewCredential(metadata.ScramSHA256, "carol", "carol-pw", metadata.ScramIterationsMin)
	if err != nil {
		t.Fatal(err)
	}
	created := c.handleAs(leader, admin, wrap(&strandpb.AlterUsersRequest{Upserts: []*strandpb.AlterUsersRequest_Upsert{{Name: "carol", Credential: cred}}})(t))
	if created.GetError() != nil || len(created.GetAlterUsers().GetResults()) != 1 || created.GetAlterUsers().GetResults()[0].GetError() != nil {
		t.Fatalf("admin creates carol on the metadata leader %d: %v", leader, created)
	}
	c.tick(3)
	if _, ok := lookup("carol", metadata.ScramSHA256); ok {
		t.Fatalf("node %d applied carol with its appends dropped: the test no longer shows the window", lag)
	}

	// carol's login on the lagging follower, and a stranger's.
	login := func(user string) (*sasl.ServerSession, *strandpb.Request) {
		cl, err := sasl.NewClient(metadata.ScramSHA256, user, user+"-pw")
		if err != nil {
			t.Fatal(err)
		}
		req, _ := cl.Session().First()
		return sasl.NewServerSession(lookup, nil), req
	}
	carol, carolReq := login("carol")
	dave, daveReq := login("dave")
	for _, s := range []struct {
		sess *sasl.ServerSession
		req  *strandpb.Request
	}{{carol, carolReq}, {dave, daveReq}} {
		if st := s.sess.Step(s.req); !st.Confirm || st.Refused != nil {
			t.Fatalf("a first step on node %d, which lacks the user: %+v, want a confirmation asked", lag, st)
		}
	}
	var carolDone, daveDone bool
	var carolErr, daveErr error
	c.cores[lag].ConfirmMetadata(func(err error) { carolDone, carolErr = true, err })
	c.cores[lag].ConfirmMetadata(func(err error) { daveDone, daveErr = true, err })
	if err := c.cores[lag].Process(); err != nil { // starts the metadata read
		t.Fatal(err)
	}
	if carolDone || daveDone {
		t.Fatalf("node %d confirmed its metadata (%v, %v) with its appends dropped", lag, carolErr, daveErr)
	}
	c.drop = nil
	for ticks := 0; (!carolDone || !daveDone) && ticks < requestTimeoutTicksDefault; ticks++ {
		c.tick(1)
	}
	if !carolDone || carolErr != nil || !daveDone || daveErr != nil {
		t.Fatalf("confirmations on node %d after its appends flow again: carol %v %v, dave %v %v", lag, carolDone, carolErr, daveDone, daveErr)
	}
	if st := carol.Confirmed(carolReq, nil); st.Refused != nil || st.Answer.GetSaslAuthenticate() == nil {
		t.Fatalf("carol's first step once confirmed: %+v, want the exchange going on", st)
	}
	if st := dave.Confirmed(daveReq, nil); !errors.Is(st.Refused, sasl.ErrAuthentication) ||
		st.Answer.GetError().GetCode() != strandpb.ErrorCode_ERROR_CODE_SASL_AUTHENTICATION_FAILED {
		t.Fatalf("dave (no such user) once confirmed: %+v, want SASL_AUTHENTICATION_FAILED", st)
	}
}
