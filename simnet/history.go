package simnet

import (
	"time"

	"github.com/strandlog/strand/linearizability"
)

// history records the workload in a linearizability.History in virtual
// time. One produce op spans every attempt of a logical record (a retry
// resends the same batch with the same producer sequence), so the op is
// ok when any attempt is acknowledged. Every fetch attempt is its own op.
type history struct {
	h   *linearizability.History
	tps []linearizability.TopicPartition
}

// histOp is a recorded operation still owned by a client.
type histOp struct {
	id linearizability.OpID
}

func newHistory(partitions int) *history {
	hs := &history{h: linearizability.NewHistory()}
	for _, tp := range groupTopics(partitions) {
		hs.tps = append(hs.tps, linearizability.TopicPartition{Topic: tp.Topic, Partition: tp.Partition})
	}
	return hs
}

func ns(t time.Duration) int64 { return int64(t) }

// produceCall records the call of a batch's produce (every attempt).
func (hs *history) produceCall(client, p, inc int, recs []linearizability.Record, t time.Duration) *histOp {
	return &histOp{id: hs.h.CallProduceBatch(linearizability.ClientID(client), hs.key(p, inc), recs, ns(t))}
}

// produceIn files a pending produce under group p's incarnation inc,
// once the client says where it went.
func (hs *history) produceIn(op *histOp, p, inc int) { hs.h.MoveProduce(op.id, hs.key(p, inc)) }

func (hs *history) produceOK(op *histOp, offset int64, t time.Duration) {
	hs.h.ReturnProduce(op.id, offset, ns(t))
}

func (hs *history) produceUnknown(op *histOp, t time.Duration) { hs.h.Indefinite(op.id, ns(t)) }

// produceFailed records a produce refused before anything was proposed.
func (hs *history) produceFailed(op *histOp, t time.Duration) { hs.h.Fail(op.id, ns(t)) }

// fetchCall records the call of one fetch attempt: a poll from the
// client's position for consumers and the drain, a seek for readers.
// Every fetch the workload sends asks for one partition, so an answer
// below the high-water mark must carry a record (Op.Alone).
func (hs *history) fetchCall(client, p, inc int, offset int64, poll bool, t time.Duration) *histOp {
	var id linearizability.OpID
	if poll {
		id = hs.h.CallPoll(linearizability.ClientID(client), hs.key(p, inc), offset, 0, ns(t))
	} else {
		id = hs.h.CallFetch(linearizability.ClientID(client), hs.key(p, inc), offset, 0, ns(t))
	}
	hs.h.Alone(id)
	return &histOp{id: id}
}

// fetchOK records a fetch's records, high-water mark and log start.
func (hs *history) fetchOK(op *histOp, r *reply, t time.Duration) {
	recs := make([]linearizability.Record, len(r.records))
	for i, rec := range r.records {
		recs[i] = linearizability.Record{Offset: rec.offset, Key: rec.key, Value: rec.value}
	}
	hs.h.ReturnFetch(op.id, recs, r.hwm, r.logStart, ns(t))
}

// fetchOutOfRange records a fetch refused for its offset.
func (hs *history) fetchOutOfRange(op *histOp, r *reply, t time.Duration) {
	hs.h.ReturnOutOfRange(op.id, r.logStart, r.hwm, ns(t))
}

// fetchFail records a fetch attempt that returned nothing usable: refused
// (definite) or timed out (indefinite; a read has no effect either way).
func (hs *history) fetchFail(op *histOp, t time.Duration) { hs.h.Fail(op.id, ns(t)) }
