package node

import (
	"testing"

	"github.com/strandlog/strand/proto/strandpb"
)

// AnswerHello answers a Hello whose range holds ProtocolVersion with the
// node's id and cluster, and refuses anything else with the error a
// client reads as definite.
func TestAnswerHello(t *testing.T) {
	hello := func(lo, hi uint32) *strandpb.Request {
		return &strandpb.Request{CorrelationId: 7, Body: &strandpb.Request_Hello{Hello: &strandpb.HelloRequest{VersionMin: lo, VersionMax: hi}}}
	}
	resp, refused := AnswerHello(hello(1, 3), 4, []byte("c1"))
	h := resp.GetHello()
	if refused != nil || resp.GetCorrelationId() != 7 || h.GetNodeId() != 4 || h.GetVersion() != ProtocolVersion ||
		string(h.GetClusterId()) != "c1" || h.GetFrameBytesMax() == 0 {
		t.Fatalf("a good Hello: %v, %v", resp, refused)
	}
	for _, c := range []struct {
		req  *strandpb.Request
		code strandpb.ErrorCode
	}{
		{hello(ProtocolVersion+1, ProtocolVersion+2), strandpb.ErrorCode_ERROR_CODE_UNSUPPORTED_VERSION},
		{&strandpb.Request{Body: &strandpb.Request_Metadata{Metadata: &strandpb.MetadataRequest{}}}, strandpb.ErrorCode_ERROR_CODE_INVALID_REQUEST},
	} {
		resp, refused := AnswerHello(c.req, 4, nil)
		if refused == nil || resp.GetError().GetCode() != c.code || resp.GetHello() != nil {
			t.Errorf("%v: answered %v (%v), want %v and a refusal", c.req, resp, refused, c.code)
		}
	}
}
