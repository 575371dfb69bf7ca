package simnet

import (
	"testing"

	"github.com/strandlog/strand/linearizability"
)

// TestLibConsumerInDeletedIncarnationIsBehind shows a consumer still
// reading a deleted incarnation of a re-created topic has not caught up,
// even when the current incarnation has no acknowledged record (target
// 0). Counting it caught up ended it in the deleted incarnation, and the
// end's check then demanded that incarnation's acknowledged records, which
// its writes are not owed (seeds 31, 138, 188).
func TestLibConsumerInDeletedIncarnationIsBehind(t *testing.T) {
	tps := []linearizability.TopicPartition{{Topic: topicSecond, Partition: 0}}
	w := &world{opts: Options{RecreateTopic: true}, hist: &history{tps: tps}}
	ww := &wireWorkload{w: w, topics: []topicSpec{{name: topicSecond, partitions: 1}}}
	lc := &libConsumer{c: &wireClient{ww: ww}}
	lc.targetKeys = []linearizability.TopicPartition{w.hist.key(0, 2)}
	lc.targets = []int64{0} // nothing acknowledged in incarnation 2
	old := &libSession{start: 0, next: 12, inc: 1, seen: map[int64]bool{}}
	lc.sess = []*libSession{old}
	if !lc.behind(0, old) || lc.reached() {
		t.Fatalf("a session at %d of incarnation 1 counted caught up with target %d of %v", old.next, lc.targets[0], lc.targetKeys[0])
	}
	unknown := &libSession{start: -1, next: -1, inc: -1, seen: map[int64]bool{}}
	if !lc.behind(0, unknown) {
		t.Fatalf("a session of an unknown incarnation counted caught up with target 0 of %v", lc.targetKeys[0])
	}
	cur := &libSession{start: 0, next: 0, inc: 2, seen: map[int64]bool{}}
	lc.sess = []*libSession{cur}
	if lc.behind(0, cur) || !lc.reached() {
		t.Fatalf("a session at 0 of incarnation 2 counted behind target 0 of %v", lc.targetKeys[0])
	}
}
