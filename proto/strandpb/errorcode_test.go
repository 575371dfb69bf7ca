package strandpb

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

// TestErrorCodeTable walks every ErrorCode value and fails if one has no
// row in the table, or a row whose name is not the enum's.
func TestErrorCodeTable(t *testing.T) {
	for v, name := range ErrorCode_name {
		code := ErrorCode(v)
		info, ok := errorCodeInfo[code]
		if !ok {
			t.Errorf("%s (%d) has no row in errorCodeInfo", name, v)
			continue
		}
		if want := strings.ToLower(strings.TrimPrefix(name, "ERROR_CODE_")); info.Name != want {
			t.Errorf("%s: Name %q, want %q", name, info.Name, want)
		}
		if info.RefreshMetadata && !info.Retriable {
			t.Errorf("%s: refreshes metadata but is not retriable", name)
		}
	}
	if len(errorCodeInfo) != len(ErrorCode_name) {
		t.Errorf("%d rows for %d enum values", len(errorCodeInfo), len(ErrorCode_name))
	}
}

// TestErrorCodeDefinite checks the conditions a user must see at once.
func TestErrorCodeDefinite(t *testing.T) {
	for _, code := range []ErrorCode{
		ErrorCode_ERROR_CODE_INVALID_REPLICATION_FACTOR, ErrorCode_ERROR_CODE_TOPIC_NOT_FOUND,
		ErrorCode_ERROR_CODE_TOPIC_EXISTS, ErrorCode_ERROR_CODE_INVALID_CONFIG, ErrorCode_ERROR_CODE_RECORD_TOO_LARGE,
		ErrorCode(1000),
	} {
		if !code.Info().Definite() {
			t.Errorf("%v is not definite", code)
		}
	}
	if ErrorCode(1000).Name() != "error_code_1000" {
		t.Errorf("unknown code named %q", ErrorCode(1000).Name())
	}
}

// CodeOf finds a sentinel's code through wrapping, takes the first
// sentinel of a tree (the outermost, then left to right), and gives NONE
// for nil and INTERNAL (maybe written) for an error no sentinel explains.
func TestCodeOf(t *testing.T) {
	notLeader := NewSentinel(ErrorCode_ERROR_CODE_NOT_LEADER, "not leader")
	invalid := NewSentinel(ErrorCode_ERROR_CODE_INVALID_REQUEST, "invalid")
	corrupt := NewSentinel(ErrorCode_ERROR_CODE_CORRUPT_BATCH, "corrupt")
	plain := errors.New("plain")
	for _, tc := range []struct {
		err  error
		want ErrorCode
	}{
		{nil, ErrorCode_ERROR_CODE_NONE},
		{plain, ErrorCode_ERROR_CODE_INTERNAL},
		{notLeader, ErrorCode_ERROR_CODE_NOT_LEADER},
		{fmt.Errorf("partition 3: %w", notLeader), ErrorCode_ERROR_CODE_NOT_LEADER},
		{fmt.Errorf("%w: %w: %w", corrupt, invalid, plain), ErrorCode_ERROR_CODE_CORRUPT_BATCH},
		{fmt.Errorf("%w: %w", plain, invalid), ErrorCode_ERROR_CODE_INVALID_REQUEST},
	} {
		if got := CodeOf(tc.err); got != tc.want {
			t.Errorf("CodeOf(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
	if wrapped := fmt.Errorf("x: %w", notLeader); !errors.Is(wrapped, notLeader) || errors.Is(wrapped, invalid) {
		t.Error("errors.Is does not match sentinels by identity")
	}
	if notLeader.Error() != "not leader" {
		t.Errorf("text %q", notLeader.Error())
	}
}
