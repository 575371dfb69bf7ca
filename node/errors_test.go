package node

import (
	"errors"
	"fmt"
	"testing"

	"github.com/strandlog/strand/engine/groups"
	"github.com/strandlog/strand/engine/metadata"
	"github.com/strandlog/strand/proto/strandpb"
)

// An error no sentinel explains is INTERNAL (maybe written) on every path
// to the wire — a request's, a metadata refusal's, a group answer's — where
// a metadata refusal used to default to the definite INVALID_REQUEST. Each
// path otherwise sends the code the sentinel carries, through wrapping;
// a group answer says NOT_COORDINATOR for a partition led elsewhere.
func TestWireErrorCodes(t *testing.T) {
	c := &Core{}
	unexplained := errors.New("node: something unforeseen")
	for _, tc := range []struct {
		path string
		got  *strandpb.Error
		want strandpb.ErrorCode
	}{
		{"request, unexplained", c.wireError(unexplained, 0, nil), strandpb.ErrorCode_ERROR_CODE_INTERNAL},
		{"metadata, unexplained", metaError(unexplained), strandpb.ErrorCode_ERROR_CODE_INTERNAL},
		{"group, unexplained", c.groupError(unexplained), strandpb.ErrorCode_ERROR_CODE_INTERNAL},
		{"request", c.wireError(fmt.Errorf("%w: t/0", ErrNotEnoughSpace), 0, nil), strandpb.ErrorCode_ERROR_CODE_NOT_ENOUGH_SPACE},
		{"request, corrupt", c.wireError(fmt.Errorf("%w: %w: crc", ErrCorruptBatch, ErrInvalidRequest), 0, nil), strandpb.ErrorCode_ERROR_CODE_CORRUPT_BATCH},
		{"request, lost leadership", c.wireError(ErrLeadershipLost, 0, nil), strandpb.ErrorCode_ERROR_CODE_TIMEOUT},
		{"metadata, missing topic", metaError(fmt.Errorf("%w: %q", metadata.ErrUnknownTopic, "t")), strandpb.ErrorCode_ERROR_CODE_TOPIC_NOT_FOUND},
		{"metadata, bad ACL", metaError(fmt.Errorf("%w: host", metadata.ErrInvalidACL)), strandpb.ErrorCode_ERROR_CODE_INVALID_REQUEST},
		{"group, unknown member", c.groupError(groups.ErrUnknownMember), strandpb.ErrorCode_ERROR_CODE_UNKNOWN_MEMBER_ID},
		{"group, not leader", c.groupError(ErrNotLeader), strandpb.ErrorCode_ERROR_CODE_NOT_COORDINATOR},
		{"group, timeout", c.groupError(ErrTimeout), strandpb.ErrorCode_ERROR_CODE_TIMEOUT},
	} {
		if tc.got.GetCode() != tc.want {
			t.Errorf("%s: %v, want %v", tc.path, tc.got.GetCode(), tc.want)
		}
	}
	if metaError(nil) != nil || c.groupError(nil) != nil || c.wireError(nil, 0, nil) != nil {
		t.Error("no error gave a wire error")
	}
}
