package txnsvc

import (
	"fmt"

	"github.com/strandlog/strand/engine/txn"
)

// markersMax bounds the marker writes one DriveMarkers starts.
const markersMax = 256

// Marker is one marker of a decided transaction: a commit or abort
// control record for one partition (Topic, Partition), or the completion
// of one group's transactional offsets (Group set, Topic empty). The node
// writes it through its TxnMarkerWriter (node/txn_markers.go), adding the
// coordinator epoch.
type Marker struct {
	TransactionalID string
	Commit          bool
	// Producer is the producer id and marker epoch (the transaction's
	// epoch + 1, or its own when KeptEpoch).
	Producer  txn.Producer
	KeptEpoch bool
	Topic     string
	Partition int32
	Group     string
}

// Key names the marker's write in Coordinator.InFlight.
func (m Marker) Key() string {
	return fmt.Sprintf("\x00marker\x00%s\x00%d\x00%d\x00%s\x00%d\x00%s",
		m.TransactionalID, m.Producer.ID, m.Producer.Epoch, m.Topic, m.Partition, m.Group)
}

// DriveMarkers starts the write of every marker of every Pending
// transaction (its partitions', then its groups', in the state's order)
// whose key is not in flight yet: it marks the key in flight, then calls
// write, at most markersMax times per call. The node calls it after a
// decision and on every sweep, so a new coordinator finishes what its
// predecessor decided; the write's completion clears the key (the node's
// markerDone).
func (co *Coordinator) DriveMarkers(write func(m Marker, key string)) {
	started := 0
	for _, p := range co.State.Pending() {
		var markers []Marker
		for _, tp := range p.Partitions {
			markers = append(markers, Marker{TransactionalID: p.ID, Commit: p.Commit, Producer: p.Marker,
				KeptEpoch: p.KeptEpoch, Topic: tp.Topic, Partition: tp.Partition})
		}
		for _, grp := range p.Groups {
			markers = append(markers, Marker{TransactionalID: p.ID, Commit: p.Commit, Producer: p.Marker, KeptEpoch: p.KeptEpoch,
				Group: grp})
		}
		for _, m := range markers {
			key := m.Key()
			if co.InFlight[key] {
				continue
			}
			if started >= markersMax {
				return
			}
			started++
			co.InFlight[key] = true
			write(m, key)
		}
	}
}
