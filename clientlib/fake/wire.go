package fake

import (
	"bufio"
	"fmt"
	"net"
	"time"

	"github.com/strandlog/strand/proto/frame"
	"github.com/strandlog/strand/proto/strandpb"
)

// protocolVersion is the wire version the fake's own connections speak.
const protocolVersion = 1

// wireCallTimeout bounds one request of the fake's own connections.
const wireCallTimeout = 5 * time.Second

// call sends one request to addr on a fresh connection (the Hello first)
// and returns the answer. The fake's own questions (metadata, logs, topic
// creation) go straight to the servers, never through the proxies, so a
// test's controls never see them.
func call(addr string, req *strandpb.Request) (*strandpb.Response, error) {
	nc, err := net.DialTimeout("tcp", addr, wireCallTimeout)
	if err != nil {
		return nil, err
	}
	defer nc.Close()
	nc.SetDeadline(time.Now().Add(wireCallTimeout))
	br := bufio.NewReader(nc)
	hello := &strandpb.Request{CorrelationId: 1, Body: &strandpb.Request_Hello{Hello: &strandpb.HelloRequest{
		VersionMin: protocolVersion, VersionMax: protocolVersion, ClientId: "strand-fake"}}}
	if _, err := roundTrip(nc, br, hello); err != nil {
		return nil, fmt.Errorf("hello: %w", err)
	}
	req.CorrelationId = 2
	resp, err := roundTrip(nc, br, req)
	if err != nil {
		return nil, err
	}
	if resp.GetCorrelationId() != 2 {
		return nil, fmt.Errorf("answer for request %d, sent 2", resp.GetCorrelationId())
	}
	return resp, nil
}

func roundTrip(nc net.Conn, br *bufio.Reader, req *strandpb.Request) (*strandpb.Response, error) {
	out, err := frame.Append(nil, req)
	if err != nil {
		return nil, err
	}
	if _, err := nc.Write(out); err != nil {
		return nil, err
	}
	resp := &strandpb.Response{}
	if _, err := frame.Decode(br, nil, frame.BytesMaxDefault, resp); err != nil {
		return nil, err
	}
	if e := resp.GetError(); e != nil {
		return nil, fmt.Errorf("%v: %s", e.GetCode(), e.GetMessage())
	}
	return resp, nil
}

// metadata asks one server for its view of the cluster and topics.
func metadata(addr string, topics ...string) (*strandpb.MetadataResponse, error) {
	resp, err := call(addr, &strandpb.Request{Body: &strandpb.Request_Metadata{Metadata: &strandpb.MetadataRequest{Topics: topics}}})
	if err != nil {
		return nil, err
	}
	return resp.GetMetadata(), nil
}
