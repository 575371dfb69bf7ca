package server

import (
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/strandlog/strand/clientlib"
	"github.com/strandlog/strand/node"
	"github.com/strandlog/strand/proto/strandpb"
	"github.com/strandlog/strand/sasl"
)

// startSecureServer starts a one-node runtime requiring SASL and ACLs,
// with admin (password admin-secret) as its bootstrap super user.
func startSecureServer(t *testing.T) *Server {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	rt, err := Start(Config{
		Core:                  node.Config{ID: 1, Nodes: []node.Peer{{ID: 1, Address: ln.Addr().String()}}, Authorization: true},
		DataDir:               t.TempDir(),
		Listener:              ln,
		KafkaListen:           "127.0.0.1:0",
		SASL:                  true,
		SASLBootstrapUser:     "admin",
		SASLBootstrapPassword: "admin-secret",
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rt.Close() })
	return rt
}

// nativeAs is a native client authenticating as user (no SASL when user
// is empty).
func nativeAs(t *testing.T, rt *Server, user, password string) *clientlib.Client {
	t.Helper()
	opts := []clientlib.Opt{clientlib.SeedAddresses(rt.Addr().String()), clientlib.MaxRetries(3)}
	if user != "" {
		opts = append(opts, clientlib.SASL("SCRAM-SHA-256", user, password))
	}
	cl, err := clientlib.NewClient(opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.Close() })
	return cl
}

// kafkaAs is a franz-go client authenticating with SCRAM-SHA-512 (no SASL
// when user is empty).
func kafkaAs(t *testing.T, rt *Server, user, password string) *kgo.Client {
	t.Helper()
	opts := []kgo.Opt{kgo.SeedBrokers(rt.KafkaAddr().String()), kgo.RecordRetries(2), kgo.RequestRetries(2)}
	if user != "" {
		opts = append(opts, kgo.SASL(scram.Auth{User: user, Pass: password}.AsSha512Mechanism()))
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

func wantCode(t *testing.T, what string, err error, code strandpb.ErrorCode) {
	t.Helper()
	var e *clientlib.Error
	if !errors.As(err, &e) || e.Code != code {
		t.Fatalf("%s: %v, want %v", what, err, code)
	}
}

func binding(principal, rtype, name, op, perm string) *strandpb.AclBinding {
	return &strandpb.AclBinding{Principal: principal, ResourceType: rtype, ResourceName: name, PatternType: "literal",
		Operation: op, Permission: perm, Host: "*"}
}

// TestSecureClusterRefusesAndAllows runs a node that requires SASL and
// ACLs: the bootstrap admin creates users, topics and ACLs over the native
// protocol; an unauthenticated client and a wrong password are refused on
// both protocols; over Kafka (franz-go, SCRAM-SHA-512) alice may produce
// to the topic her ACL names, bob (no ACL) and carol (denied) get
// TOPIC_AUTHORIZATION_FAILED, and bob's metadata lists no topic.
func TestSecureClusterRefusesAndAllows(t *testing.T) {
	rt := startSecureServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	admin := nativeAs(t, rt, "admin", "admin-secret")
	var err error
	for ctx.Err() == nil { // the bootstrap user appears once the metadata group elected
		if err = admin.CreateTopic(ctx, "orders", 1, 1, nil); err == nil {
			break
		}
		time.Sleep(50 * time.Millisecond) // polling readiness, bounded by ctx
	}
	if err != nil {
		t.Fatalf("admin create: %v", err)
	}
	for _, u := range []string{"alice", "bob", "carol"} {
		for _, mech := range []string{"SCRAM-SHA-256", "SCRAM-SHA-512"} {
			if err := admin.CreateUser(ctx, u, u+"-pw", mech); err != nil {
				t.Fatalf("create user %s: %v", u, err)
			}
		}
	}
	if _, _, err := admin.AlterACLs(ctx, []*strandpb.AclBinding{
		binding("User:alice", "topic", "orders", "write", "allow"),
		binding("User:alice", "topic", "orders", "describe", "allow"),
		binding("User:carol", "topic", "*", "all", "allow"),
		binding("User:carol", "topic", "orders", "write", "deny"),
		binding("User:carol", "cluster", "kafka-cluster", "all", "allow"),
	}, nil); err != nil {
		t.Fatalf("ACLs: %v", err)
	}
	users, err := admin.ListUsers(ctx)
	if err != nil || len(users) != 4 {
		t.Fatalf("users %v, %v", users, err)
	}

	_, err = nativeAs(t, rt, "", "").Metadata(ctx)
	wantCode(t, "native unauthenticated", err, strandpb.ErrorCode_ERROR_CODE_SASL_AUTHENTICATION_FAILED)
	_, err = nativeAs(t, rt, "alice", "wrong").Metadata(ctx)
	wantCode(t, "native wrong password", err, strandpb.ErrorCode_ERROR_CODE_SASL_AUTHENTICATION_FAILED)
	err = nativeAs(t, rt, "bob", "bob-pw").CreateUser(ctx, "eve", "x", "SCRAM-SHA-256")
	wantCode(t, "native bob creates a user", err, strandpb.ErrorCode_ERROR_CODE_CLUSTER_AUTHORIZATION_FAILED)
	info, err := nativeAs(t, rt, "bob", "bob-pw").Metadata(ctx)
	if err != nil || len(info.Topics) != 0 {
		t.Fatalf("bob's native metadata: %+v, %v", info.Topics, err)
	}

	pctx, pcancel := context.WithTimeout(ctx, 20*time.Second)
	defer pcancel()
	var rec *kgo.Record
	for pctx.Err() == nil { // the partition elects its leader
		if rec, err = kafkaAs(t, rt, "alice", "alice-pw").ProduceSync(pctx, &kgo.Record{Topic: "orders", Value: []byte("v")}).First(); err == nil {
			break
		}
	}
	if err != nil {
		t.Fatalf("alice produce: %v", err)
	}
	for _, who := range []string{"bob", "carol"} {
		_, err := kafkaAs(t, rt, who, who+"-pw").ProduceSync(pctx, &kgo.Record{Topic: "orders", Value: []byte("x")}).First()
		if !errors.Is(err, kerr.TopicAuthorizationFailed) {
			t.Fatalf("%s produce: %v, want TOPIC_AUTHORIZATION_FAILED", who, err)
		}
	}
	// DescribeProducers needs READ on the topic (KIP-664): carol's ALL
	// on every topic allows it and shows alice's idempotent producer;
	// alice's WRITE and DESCRIBE do not.
	seen, err := kadm.NewClient(kafkaAs(t, rt, "carol", "carol-pw")).DescribeProducers(ctx, kadm.TopicsSet{"orders": {0: {}}})
	if p := seen["orders"].Partitions[0]; err != nil || p.Err != nil || len(p.ActiveProducers) != 1 {
		t.Fatalf("carol's describe producers: %v %+v", err, p)
	}
	if _, err := kadm.NewClient(kafkaAs(t, rt, "alice", "alice-pw")).DescribeProducers(ctx, kadm.TopicsSet{"orders": {0: {}}}); !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Fatalf("alice's describe producers: %v, want TOPIC_AUTHORIZATION_FAILED", err)
	}
	for _, tc := range []struct{ user, pw string }{{"", ""}, {"alice", "wrong"}} {
		fctx, fcancel := context.WithTimeout(ctx, 2*time.Second)
		_, err := kafkaAs(t, rt, tc.user, tc.pw).ProduceSync(fctx, &kgo.Record{Topic: "orders", Value: []byte("x")}).First()
		fcancel()
		if err == nil {
			t.Fatalf("Kafka produce as %q with password %q succeeded", tc.user, tc.pw)
		}
	}
	// Nothing written but alice's record.
	offs, err := admin.ListOffsets(ctx, "orders", nil, clientlib.OffsetLatest())
	if err != nil || len(offs) != 1 || offs[0].Offset != rec.Offset+1 {
		t.Fatalf("latest offsets %+v, %v; alice's record at %d", offs, err, rec.Offset)
	}
}

// kafkaRaw sends one Kafka request on nc and reads its answer into resp;
// it returns io.EOF-like errors when the node closed the connection.
func kafkaRaw(t *testing.T, nc net.Conn, corr int32, req kmsg.Request, resp kmsg.Response) error {
	t.Helper()
	b := binary.BigEndian.AppendUint32(nil, 0)
	b = binary.BigEndian.AppendUint16(b, uint16(req.Key()))
	b = binary.BigEndian.AppendUint16(b, uint16(req.GetVersion()))
	b = binary.BigEndian.AppendUint32(b, uint32(corr))
	b = binary.BigEndian.AppendUint16(b, 4)
	b = append(b, "test"...)
	if req.IsFlexible() {
		b = append(b, 0)
	}
	b = req.AppendTo(b)
	binary.BigEndian.PutUint32(b, uint32(len(b)-4))
	nc.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := nc.Write(b); err != nil {
		return err
	}
	var size [4]byte
	if _, err := io.ReadFull(nc, size[:]); err != nil {
		return err
	}
	body := make([]byte, binary.BigEndian.Uint32(size[:]))
	if _, err := io.ReadFull(nc, body); err != nil {
		return err
	}
	body = body[4:] // correlation id
	if req.IsFlexible() && req.Key() != 18 {
		body = body[1:] // empty tag section
	}
	resp.SetVersion(req.GetVersion())
	return resp.ReadFrom(body)
}

// scramOverKafka runs SaslHandshake and SaslAuthenticate steps on a fresh
// connection, sending msgs (nil: a real client's messages for user and
// password, recorded into the returned slice), and returns the error code
// of the last step and whether the connection was closed after it.
func scramOverKafka(t *testing.T, rt *Server, user, password string, msgs [][]byte, cutFinal bool) (int16, bool, [][]byte) {
	t.Helper()
	nc, err := net.Dial("tcp", rt.KafkaAddr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	hs := kmsg.NewPtrSASLHandshakeRequest()
	hs.SetVersion(1)
	hs.Mechanism = "SCRAM-SHA-256"
	hsResp := kmsg.NewPtrSASLHandshakeResponse()
	if err := kafkaRaw(t, nc, 1, hs, hsResp); err != nil || hsResp.ErrorCode != 0 {
		t.Fatalf("handshake: %v, code %d", err, hsResp.ErrorCode)
	}
	var cl *sasl.Client
	if msgs == nil {
		cl, _ = sasl.NewClient("SCRAM-SHA-256", user, password)
	}
	var recorded [][]byte
	var in []byte
	var code int16
	for i := 0; i < 2 && (cl != nil || i < len(msgs)); i++ {
		var out []byte
		if cl != nil {
			out, _ = cl.Step(in)
			if cutFinal && i == 1 {
				out = out[:len(out)/2]
			}
		} else {
			out = msgs[i]
		}
		recorded = append(recorded, out)
		auth := kmsg.NewPtrSASLAuthenticateRequest()
		auth.SetVersion(2)
		auth.SASLAuthBytes = out
		resp := kmsg.NewPtrSASLAuthenticateResponse()
		if err := kafkaRaw(t, nc, int32(2+i), auth, resp); err != nil {
			t.Fatalf("authenticate step %d: %v", i, err)
		}
		if code = resp.ErrorCode; code != 0 {
			break
		}
		in = resp.SASLAuthBytes
	}
	md := kmsg.NewPtrMetadataRequest()
	md.SetVersion(1)
	closed := kafkaRaw(t, nc, 9, md, kmsg.NewPtrMetadataResponse()) != nil
	return code, closed, recorded
}

// TestKafkaSASLExchanges shows the Kafka listener's SASL at the wire: a
// good exchange authenticates (the next request is served); a wrong
// password, a replay of a recorded good exchange, and a truncated
// client-final are SASL_AUTHENTICATION_FAILED and the connection closes;
// a request before authenticating (also after an unfinished exchange)
// closes the connection unanswered, as Kafka does; ApiVersions advertises
// keys 17 and 36.
func TestKafkaSASLExchanges(t *testing.T) {
	rt := startSecureServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	admin := nativeAs(t, rt, "admin", "admin-secret")
	var err error
	for ctx.Err() == nil {
		if err = admin.CreateUser(ctx, "alice", "alice-pw", "SCRAM-SHA-256"); err == nil {
			break
		}
		time.Sleep(50 * time.Millisecond) // polling readiness, bounded by ctx
	}
	if err != nil {
		t.Fatal(err)
	}
	code, closed, good := scramOverKafka(t, rt, "alice", "alice-pw", nil, false)
	if code != 0 || closed {
		t.Fatalf("good exchange: code %d, closed %v", code, closed)
	}
	if code, closed, _ := scramOverKafka(t, rt, "alice", "wrong", nil, false); code != kerr.SaslAuthenticationFailed.Code || !closed {
		t.Fatalf("wrong password: code %d, closed %v", code, closed)
	}
	if code, closed, _ := scramOverKafka(t, rt, "", "", good, false); code != kerr.SaslAuthenticationFailed.Code || !closed {
		t.Fatalf("replayed exchange: code %d, closed %v", code, closed)
	}
	if code, closed, _ := scramOverKafka(t, rt, "alice", "alice-pw", nil, true); code != kerr.SaslAuthenticationFailed.Code || !closed {
		t.Fatalf("truncated client-final: code %d, closed %v", code, closed)
	}
	if code, closed, _ := scramOverKafka(t, rt, "", "", good[:1], false); code != 0 || !closed {
		t.Fatalf("exchange stopped after client-first: code %d, closed %v", code, closed)
	}

	nc, err := net.Dial("tcp", rt.KafkaAddr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	av := kmsg.NewPtrApiVersionsRequest()
	av.SetVersion(3)
	avResp := kmsg.NewPtrApiVersionsResponse()
	if err := kafkaRaw(t, nc, 1, av, avResp); err != nil {
		t.Fatal(err)
	}
	keys := map[int16]bool{}
	for _, k := range avResp.ApiKeys {
		keys[k.ApiKey] = true
	}
	if !keys[17] || !keys[36] {
		t.Fatalf("ApiVersions lacks SASL keys: %v", keys)
	}
	fc := kmsg.NewPtrFindCoordinatorRequest()
	fc.SetVersion(1)
	fc.CoordinatorKey = "g"
	if err := kafkaRaw(t, nc, 2, fc, kmsg.NewPtrFindCoordinatorResponse()); err == nil {
		t.Fatal("FindCoordinator before SASL answered; want the connection closed")
	}
}

// TestKafkaACLAdmin shows kadm managing the metadata group's ACLs over the
// Kafka listener: the admin creates, describes and deletes a binding, a
// topic's and a transactional id's (resource type 5, prefixed); bob,
// without ALTER on the cluster, is refused CLUSTER_AUTHORIZATION_FAILED
// and adds nothing.
func TestKafkaACLAdmin(t *testing.T) {
	rt := startSecureServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	admin := nativeAs(t, rt, "admin", "admin-secret")
	var err error
	for ctx.Err() == nil {
		if err = admin.CreateUser(ctx, "bob", "bob-pw", "SCRAM-SHA-512"); err == nil {
			break
		}
		time.Sleep(50 * time.Millisecond) // polling readiness, bounded by ctx
	}
	if err != nil {
		t.Fatal(err)
	}
	adm := kadm.NewClient(kafkaAs(t, rt, "admin", "admin-secret"))
	b := kadm.NewACLs().Allow("User:alice").Topics("orders").Operations(kadm.OpWrite).ResourcePatternType(kadm.ACLPatternLiteral)
	created, err := adm.CreateACLs(ctx, b)
	if err != nil || len(created) != 1 || created[0].Err != nil {
		t.Fatalf("create: %v %+v", err, created)
	}
	bobAdm := kadm.NewClient(kafkaAs(t, rt, "bob", "bob-pw"))
	denied, err := bobAdm.CreateACLs(ctx, kadm.NewACLs().Allow("User:bob").Topics("orders").Operations(kadm.OpAll).ResourcePatternType(kadm.ACLPatternLiteral))
	if err != nil || len(denied) != 1 || !errors.Is(denied[0].Err, kerr.ClusterAuthorizationFailed) {
		t.Fatalf("bob's create: %v %+v", err, denied)
	}
	filter := kadm.NewACLs().Allow("User:alice").AllowHosts().Topics("orders").Operations(kadm.OpAny).ResourcePatternType(kadm.ACLPatternAny)
	described, err := adm.DescribeACLs(ctx, filter)
	if err != nil || len(described) != 1 || described[0].Err != nil || len(described[0].Described) != 1 {
		t.Fatalf("describe: %v %+v", err, described)
	}
	deleted, err := adm.DeleteACLs(ctx, filter)
	if err != nil || len(deleted) != 1 || deleted[0].Err != nil || len(deleted[0].Deleted) != 1 {
		t.Fatalf("delete: %v %+v", err, deleted)
	}
	txnACL := kadm.NewACLs().Allow("User:alice").TransactionalIDs("etl-").Operations(kadm.OpWrite).ResourcePatternType(kadm.ACLPatternPrefixed)
	if created, err := adm.CreateACLs(ctx, txnACL); err != nil || len(created) != 1 || created[0].Err != nil {
		t.Fatalf("create a transactional-id binding: %v %+v", err, created)
	}
	native, err := admin.DescribeACLs(ctx, "User:alice", "")
	if bs := native.GetBindings(); err != nil || len(bs) != 1 || bs[0].GetResourceType() != "transactional-id" ||
		bs[0].GetResourceName() != "etl-" || bs[0].GetPatternType() != "prefixed" {
		t.Fatalf("the transactional-id binding natively: %v %v", native, err)
	}
	txnFilter := kadm.NewACLs().Allow("User:alice").AllowHosts().TransactionalIDs("etl-").Operations(kadm.OpAny).ResourcePatternType(kadm.ACLPatternAny)
	if described, err := adm.DescribeACLs(ctx, txnFilter); err != nil || len(described) != 1 || len(described[0].Described) != 1 ||
		described[0].Described[0].Type != kmsg.ACLResourceTypeTransactionalId {
		t.Fatalf("describe the transactional-id binding: %v %+v", err, described)
	}
	if deleted, err := adm.DeleteACLs(ctx, txnFilter); err != nil || len(deleted) != 1 || len(deleted[0].Deleted) != 1 {
		t.Fatalf("delete the transactional-id binding: %v %+v", err, deleted)
	}
	left, err := admin.DescribeACLs(ctx, "", "")
	if err != nil || len(left.GetBindings()) != 0 {
		t.Fatalf("bindings left: %v %v", left, err)
	}
}
