package clientlib

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"time"

	"github.com/strandlog/strand/engine/recordbatch"
	"github.com/strandlog/strand/internal/clientcore"
)

// Opt configures a Client (NewClient). Options are applied in order; a
// later one overrides an earlier one.
type Opt func(*config)

// Acks is how much a produce waits for before the cluster answers (R12).
type Acks int8

// Acks levels. The zero value is AcksNone; the Client's default is AcksAll.
const (
	// AcksNone (acks=0): fire and forget. A promise succeeds once the
	// request is written to the socket; Record.Offset is -1; nothing is
	// retried and the record may be lost without an error.
	AcksNone Acks = 0
	// AcksLeader (acks=1): the leader has appended the batch to its raft
	// log. Record.Offset is -1, because offsets are assigned when an entry
	// is applied (DESIGN.md §2); a leader failure right after the answer
	// can lose the record. Not idempotent: a retry may write it twice.
	AcksLeader Acks = 1
	// AcksAll (acks=-1, default): the batch is committed by a majority of
	// its replicas and applied; Record.Offset is its offset. Idempotent.
	AcksAll Acks = -1
)

// config is every option's value.
type config struct {
	seeds           []string
	clientID        string
	dialTimeout     time.Duration
	requestTimeout  time.Duration
	backoff         Backoff
	redialBackoff   Backoff // ReconnectBackoff
	retriesMax      int
	deliveryTimeout time.Duration
	metadataMaxAge  time.Duration
	dial            func(ctx context.Context, addr string) (net.Conn, error)
	tls             *tls.Config // nil: plaintext (WithTLS)
	inFlightPerConn int
	randSeed        uint64
	randSeeded      bool
	// unknownTopicRetries: metadata answers a record waits for its topic
	// to appear in; -1: until the delivery timeout.
	unknownTopicRetries int
	stallTimeout        time.Duration

	batchBytes         int
	linger             time.Duration
	acks               Acks
	manualPartitioner  bool
	idempotent         bool
	bufferedRecordsMax int
	inFlightBatchesMax int
	sasl               *saslConfig // nil: no SASL (security.go)
	// transactionalID: a transactional producer (txn.go); "": none.
	transactionalID    string
	transactionTimeout time.Duration
	// simulated: the Client runs on the simulator's transport, clock and
	// thread (sim.go); nil in every real process.
	simulated clientcore.Transport
}

func defaultConfig() config {
	var d net.Dialer
	return config{
		seeds:           []string{"127.0.0.1:9192"},
		clientID:        "strand-go",
		dialTimeout:     5 * time.Second,
		requestTimeout:  15 * time.Second,
		backoff:         DefaultBackoff,
		redialBackoff:   DefaultReconnectBackoff,
		retriesMax:      20,
		deliveryTimeout: 2 * time.Minute,
		metadataMaxAge:  5 * time.Minute,
		dial: func(ctx context.Context, addr string) (net.Conn, error) {
			return d.DialContext(ctx, "tcp", addr)
		},
		inFlightPerConn:     16,
		unknownTopicRetries: 4,
		stallTimeout:        2 * time.Second,
		batchBytes:          16 << 10,
		linger:              5 * time.Millisecond,
		acks:                AcksAll,
		idempotent:          true,
		bufferedRecordsMax:  10000,
		inFlightBatchesMax:  5,
		transactionTimeout:  TransactionTimeoutDefault,
	}
}

func (c *config) validate() error {
	switch {
	case len(c.seeds) == 0:
		return ErrNoSeeds
	case c.dialTimeout <= 0 || c.requestTimeout <= 0:
		return fmt.Errorf("clientlib: dial and request timeouts must be positive")
	case c.stallTimeout < 0:
		return fmt.Errorf("clientlib: StallTimeout %v < 0", c.stallTimeout)
	case c.unknownTopicRetries < -1:
		return fmt.Errorf("clientlib: UnknownTopicRetries %d < -1", c.unknownTopicRetries)
	case c.retriesMax < 0:
		return fmt.Errorf("clientlib: MaxRetries %d < 0", c.retriesMax)
	case c.inFlightPerConn < 1:
		return fmt.Errorf("clientlib: MaxInFlightPerConn %d < 1", c.inFlightPerConn)
	case c.batchBytes > recordbatch.BatchBytesMax:
		return &OptionError{Option: "BatchBytes", Value: c.batchBytes,
			Reason: fmt.Sprintf("over the %d-byte limit of a batch", recordbatch.BatchBytesMax)}
	case c.batchBytes < 1 || c.linger < 0 || c.bufferedRecordsMax < 1:
		return fmt.Errorf("clientlib: bad batching options")
	case c.inFlightBatchesMax < 1 || c.inFlightBatchesMax > 5:
		return fmt.Errorf("clientlib: MaxInFlightBatches %d outside 1..5", c.inFlightBatchesMax)
	case c.acks != AcksAll && c.acks != AcksLeader && c.acks != AcksNone:
		return fmt.Errorf("clientlib: acks %d", c.acks)
	}
	return c.validateTxn()
}

// Simulated runs the Client inside the simulator (simnet): requests go
// through t, time is t's virtual time, and the producer runs as a step
// function on the caller's thread instead of on goroutines (sim.go). Its
// type is internal to this module: no program outside it can build one.
func Simulated(t clientcore.Transport) Opt { return func(c *config) { c.simulated = t } }

// SeedAddresses sets the host:port addresses tried first for metadata
// (default 127.0.0.1:9192, where `strand dev` listens).
func SeedAddresses(addrs ...string) Opt {
	return func(c *config) { c.seeds = append([]string(nil), addrs...) }
}

// ClientID names the client in its handshake (default "strand-go").
func ClientID(id string) Opt { return func(c *config) { c.clientID = id } }

// DialTimeout bounds connecting and the handshake (default 5 s).
func DialTimeout(d time.Duration) Opt { return func(c *config) { c.dialTimeout = d } }

// RequestTimeout bounds the wait for one answer (default 15 s; a fetch
// adds its max wait). A request that times out closes its connection, as
// in Kafka, and counts as an outcome-unknown TIMEOUT.
func RequestTimeout(d time.Duration) Opt { return func(c *config) { c.requestTimeout = d } }

// RetryBackoff sets the exponential backoff between retries (default
// 100 ms doubling to 1 s, with jitter).
func RetryBackoff(base, max time.Duration) Opt {
	return func(c *config) { c.backoff = Backoff{Base: base, Max: max} }
}

// MaxRetries bounds retries of one batch or request (default 20; 0: no
// retries).
func MaxRetries(n int) Opt { return func(c *config) { c.retriesMax = n } }

// DeliveryTimeout bounds the time from Produce to the record's outcome, as
// Kafka's delivery.timeout.ms: it counts from the first record of the
// record's batch, including the wait for the batch to be sealed, and a
// batch past it fails when its attempt in flight ends (up to
// RequestTimeout later) (default 2 min; 0: only MaxRetries bounds it).
func DeliveryTimeout(d time.Duration) Opt { return func(c *config) { c.deliveryTimeout = d } }

// MetadataMaxAge forces a metadata refresh when the cache is older
// (default 5 min). Errors refresh it sooner.
func MetadataMaxAge(d time.Duration) Opt { return func(c *config) { c.metadataMaxAge = d } }

// Dial replaces how connections are opened (tests, proxies).
func Dial(fn func(ctx context.Context, addr string) (net.Conn, error)) Opt {
	return func(c *config) { c.dial = fn }
}

// MaxInFlightPerConn bounds pipelined requests per connection (default 16).
func MaxInFlightPerConn(n int) Opt { return func(c *config) { c.inFlightPerConn = n } }

// UnknownTopicRetries is how many metadata answers lacking a record's
// topic the producer waits through before failing the record with
// ErrUnknownTopic (default 4, about half a second: room for a topic created
// a moment ago on another node). -1 waits for the topic until the delivery
// timeout, for producers started before their topic is created. As
// franz-go's kgo.UnknownTopicRetries.
func UnknownTopicRetries(n int) Opt { return func(c *config) { c.unknownTopicRetries = n } }

// StallTimeout is how long a node may send nothing at all while a request
// to it waits (beyond the time the request itself may take on the node,
// such as a fetch's long poll) before the client gives up on the
// connection, suspects the node, and re-routes through fresh metadata
// (default 2 s, about a Strand election; 0 disables). Each stall within a
// minute doubles the node's bound, up to RequestTimeout, so a node that is
// slow but alive is not given up on at every attempt. It also bounds the
// wait for a handshake answer. A paused node otherwise holds requests for
// the whole RequestTimeout.
func StallTimeout(d time.Duration) Opt { return func(c *config) { c.stallTimeout = d } }

// ReconnectBackoff sets how long a node the client could not connect to
// is left alone before it is dialled again (redial.go): from base,
// doubling per failure in a row up to max, with jitter (default
// DefaultReconnectBackoff).
func ReconnectBackoff(base, max time.Duration) Opt {
	return func(c *config) { c.redialBackoff = Backoff{Base: base, Max: max} }
}

// RandSeed seeds the client's own random source (backoff jitter, sticky
// partition choice); by default it is seeded from the clock at NewClient.
// The client never uses the global source.
func RandSeed(seed uint64) Opt {
	return func(c *config) { c.randSeed, c.randSeeded = seed, true }
}

// BatchBytes is the target size of a partition's batch (default 16 KiB,
// R14): a batch is sealed before a record would push it over. A record
// larger than it travels alone. NewClient refuses a value over
// recordbatch.BatchBytesMax (1 MiB + 64 KiB) with an *OptionError.
func BatchBytes(n int) Opt { return func(c *config) { c.batchBytes = n } }

// Linger is how long a partition's batch may wait for more records before
// it is sealed (default 5 ms). 0 seals a batch as soon as the partition can
// send one; records arriving meanwhile still batch up.
func Linger(d time.Duration) Opt { return func(c *config) { c.linger = d } }

// RequiredAcks sets the acks level (default AcksAll). Any level but AcksAll
// turns idempotence off and sends one batch per partition at a time.
func RequiredAcks(a Acks) Opt { return func(c *config) { c.acks = a } }

// ManualPartitioner makes every record go to Record.Partition, as
// franz-go's kgo.ManualPartitioner. Without it the Kafka default applies:
// murmur2(key) for keyed records, sticky batches for keyless ones, and
// Record.Partition is ignored.
func ManualPartitioner() Opt { return func(c *config) { c.manualPartitioner = true } }

// DisableIdempotence sends batches without producer id and sequence: a
// retry may then duplicate a batch (R15 turns idempotence on by default).
func DisableIdempotence() Opt { return func(c *config) { c.idempotent = false } }

// MaxBufferedRecords bounds records produced and not yet completed
// (default 10000); Produce blocks while the bound is reached.
func MaxBufferedRecords(n int) Opt { return func(c *config) { c.bufferedRecordsMax = n } }

// MaxInFlightBatches bounds unanswered batches per partition, 1..5
// (default 5). Order is kept at any value when idempotent.
func MaxInFlightBatches(n int) Opt { return func(c *config) { c.inFlightBatchesMax = n } }

// validateTxn checks the transactional options: a transactional producer
// is idempotent with AcksAll, and its timeout fits Kafka's int32 ms.
func (c *config) validateTxn() error {
	switch {
	case c.transactionalID == "":
		return nil
	case c.acks != AcksAll || !c.idempotent:
		return &OptionError{Option: "TransactionalID", Value: c.transactionalID,
			Reason: "a transactional producer is idempotent with AcksAll: drop DisableIdempotence and RequiredAcks"}
	case c.transactionTimeout < time.Millisecond || c.transactionTimeout/time.Millisecond > 1<<31-1:
		return &OptionError{Option: "TransactionTimeout", Value: c.transactionTimeout,
			Reason: "a timeout of 1 ms to the cluster's transaction.max.timeout.ms (15 min by default)"}
	}
	return nil
}
