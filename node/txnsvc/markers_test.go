package txnsvc

import (
	"testing"

	"github.com/strandlog/strand/proto/strandpb"
)

// TestDriveMarkers shows the markers a decided transaction needs are
// started once each (partitions', then groups'), none again while in
// flight, and one again once its flight ends.
func TestDriveMarkers(t *testing.T) {
	co := New(1, 1, 0, 0)
	co.State.Apply(grantCmd(0, 1000, 10))
	co.State.Apply(initCmd(0))
	d, err := co.State.Describe("app")
	if err != nil {
		t.Fatal(err)
	}
	p := &strandpb.TxnProducer{ProducerId: d.Producer.ID, Epoch: int32(d.Producer.Epoch)}
	for _, cmd := range []*strandpb.TxnCommand{
		{NowMs: 1000, Body: &strandpb.TxnCommand_AddPartitions{AddPartitions: &strandpb.TxnAddPartitions{
			TransactionalId: "app", Producer: p, Topics: []*strandpb.TxnPartitions{{Topic: "t", Partitions: []int32{0, 1}}}}}},
		addOffsetsCmd(0, d.Producer),
		{NowMs: 1000, Body: &strandpb.TxnCommand_EndTxn{EndTxn: &strandpb.TxnEnd{TransactionalId: "app", Producer: p, Commit: true}}},
	} {
		if r := co.State.Apply(cmd); r.Err != nil {
			t.Fatal(r.Err)
		}
	}
	var written []Marker
	write := func(m Marker, key string) {
		if !co.InFlight[key] || key != m.Key() {
			t.Errorf("marker %v written without its key %q in flight", m, key)
		}
		written = append(written, m)
	}
	co.DriveMarkers(write)
	if len(written) != 3 || written[0].Partition != 0 || written[1].Partition != 1 || written[2].Group != "g" || !written[2].Commit {
		t.Fatalf("wrote %+v, want t/0, t/1, then group g, committing", written)
	}
	co.DriveMarkers(write)
	if len(written) != 3 {
		t.Fatalf("wrote %d markers in flight again", len(written)-3)
	}
	delete(co.InFlight, written[1].Key())
	co.DriveMarkers(write)
	if len(written) != 4 || written[3] != written[1] {
		t.Fatalf("after t/1's flight ended wrote %+v, want t/1 again", written[3:])
	}
}
