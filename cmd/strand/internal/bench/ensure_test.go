package bench

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/strandlog/strand/clientlib/fake"
)

// TestEnsureTopicUsesAnExistingTopic: a bench against an existing topic
// runs whatever --replication-factor says (a one-node cluster and the
// default of 3 used to fail at the create), and a missing topic the
// cluster cannot place fails with the create's reason.
func TestEnsureTopicUsesAnExistingTopic(t *testing.T) {
	c, err := fake.New(fake.Nodes(1), fake.Topic("bench-existing", 2))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	b := Settings{Conn: Conn{Brokers: c.Addrs(), Timeout: 10 * time.Second}, topic: "bench-existing", partitions: 2, replication: 3}
	if err := b.ensureTopic(context.Background()); err != nil {
		t.Fatalf("existing topic: %v", err)
	}
	b.topic = "bench-missing"
	err = b.ensureTopic(context.Background())
	if err == nil || !strings.Contains(err.Error(), "create topic bench-missing") {
		t.Fatalf("a topic the cluster cannot place: %v", err)
	}
}
