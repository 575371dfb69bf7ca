package node

import (
	"errors"
	"fmt"

	"github.com/strandlog/strand/proto/frame"
	"github.com/strandlog/strand/proto/strandpb"
)

// ProtocolVersion is the version of Strand's native protocol this node
// speaks; a connection's Hello names the range its client speaks.
const ProtocolVersion = 1

// AnswerHello answers a connection's first request, the Hello that both
// clients and peers send before anything else: this node's id, the frame
// limit and the cluster id it applied (nil before the metadata fixed one),
// or, for a first frame that is no Hello or a version range without
// ProtocolVersion, an error answer and refused non-nil (the listener then
// closes the connection). Pure: node/server's listener and the simulator's
// connections answer with it. What a peer's Hello must prove beyond this
// (its certificate under TLS) is the listener's.
func AnswerHello(req *strandpb.Request, id NodeID, clusterID []byte) (resp *strandpb.Response, refused error) {
	hello := req.GetHello()
	resp = &strandpb.Response{CorrelationId: req.GetCorrelationId()}
	switch {
	case hello == nil:
		refused = errors.New("first frame is not a hello")
		resp.Error = &strandpb.Error{Code: strandpb.ErrorCode_ERROR_CODE_INVALID_REQUEST, Message: refused.Error()}
	case hello.GetVersionMin() > ProtocolVersion || hello.GetVersionMax() < ProtocolVersion:
		refused = fmt.Errorf("unsupported protocol versions %d..%d (node speaks %d)",
			hello.GetVersionMin(), hello.GetVersionMax(), ProtocolVersion)
		resp.Error = &strandpb.Error{Code: strandpb.ErrorCode_ERROR_CODE_UNSUPPORTED_VERSION, Message: refused.Error()}
	default:
		resp.Body = &strandpb.Response_Hello{Hello: &strandpb.HelloResponse{
			Version: ProtocolVersion, NodeId: uint64(id), FrameBytesMax: frame.BytesMaxDefault, ClusterId: clusterID}}
	}
	return resp, refused
}
