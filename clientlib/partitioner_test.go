package clientlib

import "testing"

// Murmur2 matches Kafka's own test vectors. They are UtilsTest.testMurmur2
// in apache/kafka, clients/src/test/java/org/apache/kafka/common/utils/
// UtilsTest.java (commit f55581dc73953c3509a4702433aeeeddc2970779).
func TestMurmur2KafkaVectors(t *testing.T) {
	cases := []struct {
		key  string
		want int32
	}{
		{"21", -973932308},
		{"foobar", -790332482},
		{"a-little-bit-long-string", -985981536},
		{"a-little-bit-longer-string", -1486304829},
		{"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8", -58897971},
		{"abc", 479470107},
	}
	for _, c := range cases {
		if got := Murmur2([]byte(c.key)); got != c.want {
			t.Errorf("Murmur2(%q) = %d, want %d", c.key, got, c.want)
		}
	}
}

// KeyPartition masks the sign bit like Utils.toPositive instead of taking
// an absolute value: a negative hash maps as Kafka maps it.
func TestKeyPartitionToPositive(t *testing.T) {
	// murmur2("21") = -973932308; toPositive = -973932308 & 0x7fffffff.
	want := int32((-973932308 & 0x7fffffff) % 7)
	if got := KeyPartition([]byte("21"), 7); got != want {
		t.Fatalf("KeyPartition(21, 7) = %d, want %d", got, want)
	}
	if abs := int32(973932308 % 7); abs == want {
		t.Fatalf("test vector does not tell masking from abs")
	}
}

// SaltedKey cycles through key:1..key:n.
func TestSaltedKey(t *testing.T) {
	got := map[string]bool{}
	for i := uint32(0); i < 8; i++ {
		got[string(SaltedKey([]byte("user"), 4, i))] = true
	}
	if len(got) != 4 || !got["user:1"] || !got["user:4"] {
		t.Fatalf("salted keys %v, want user:1..user:4", got)
	}
	if s := string(SaltedKey([]byte("k"), 0, 9)); s != "k:1" {
		t.Fatalf("salts 0 gives %q, want k:1", s)
	}
}
