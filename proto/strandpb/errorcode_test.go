package strandpb

import (
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
