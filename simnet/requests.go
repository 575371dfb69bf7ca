package simnet

import (
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/strandlog/strand/proto/strandpb"
)

// requestCoveragePrefix names the coverage rows counting the requests that
// reached a node's Handle, one per request type: "request/alter_configs".
const requestCoveragePrefix = "request/"

// requestTypes lists the request types of the wire protocol: the fields of
// strandpb.Request's body oneof, in declaration order, read from the
// descriptor so a request type added to wire.proto gets a coverage row
// (and fails TestSimRequestCoverage until the simulator sends it).
func requestTypes() []string {
	fields := requestBody().Fields()
	out := make([]string, fields.Len())
	for i := range fields.Len() {
		out[i] = string(fields.Get(i).Name())
	}
	return out
}

// requestBody is the descriptor of strandpb.Request's body oneof.
func requestBody() protoreflect.OneofDescriptor {
	return (&strandpb.Request{}).ProtoReflect().Descriptor().Oneofs().ByName("body")
}

// RequestCoverageNames are the coverage rows of every request type, sorted
// as the coverage table sorts them.
func RequestCoverageNames() []string {
	types := requestTypes()
	out := make([]string, len(types))
	for i, t := range types {
		out[i] = requestCoveragePrefix + t
	}
	return out
}

// requestType is the name of req's body field ("" for an empty request).
func requestType(req *strandpb.Request) string {
	m := req.ProtoReflect()
	f := m.WhichOneof(requestBody())
	if f == nil {
		return ""
	}
	return string(f.Name())
}

// coverRequest counts one request that reached a node's Handle. The rows'
// names are made once per run, by the body field's index (joining prefix
// and type for every request was an allocation per request).
func (w *world) coverRequest(req *strandpb.Request) {
	if w.requestBody == nil {
		w.requestBody = requestBody()
		fields := w.requestBody.Parent().(protoreflect.MessageDescriptor).Fields()
		w.requestRows = make([]string, fields.Len())
		for i := range fields.Len() {
			w.requestRows[i] = requestCoveragePrefix + string(fields.Get(i).Name())
		}
	}
	if f := req.ProtoReflect().WhichOneof(w.requestBody); f != nil {
		w.coverage.Inc(w.requestRows[f.Index()])
	}
}
