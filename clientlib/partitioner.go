package clientlib

import "strconv"

// Murmur2 is Kafka's murmur2 hash (org.apache.kafka.common.utils.Utils.murmur2),
// bit for bit, returned as Java's signed int so it compares with Kafka's own
// test vectors.
func Murmur2(data []byte) int32 {
	const (
		seed uint32 = 0x9747b28c
		m    uint32 = 0x5bd1e995
		r           = 24
	)
	length := len(data)
	h := seed ^ uint32(length)
	for i := 0; i+4 <= length; i += 4 {
		k := uint32(data[i]) | uint32(data[i+1])<<8 | uint32(data[i+2])<<16 | uint32(data[i+3])<<24
		k *= m
		k ^= k >> r
		k *= m
		h *= m
		h ^= k
	}
	tail := data[length&^3:]
	switch len(tail) {
	case 3:
		h ^= uint32(tail[2]) << 16
		fallthrough
	case 2:
		h ^= uint32(tail[1]) << 8
		fallthrough
	case 1:
		h ^= uint32(tail[0])
		h *= m
	}
	h ^= h >> 13
	h *= m
	h ^= h >> 15
	return int32(h)
}

// KeyPartition is Kafka's default partitioner for a keyed record:
// Utils.toPositive(Utils.murmur2(key)) % numPartitions. toPositive masks the
// sign bit (it is not Math.abs), so every key maps exactly as in Kafka.
func KeyPartition(key []byte, partitions int32) int32 {
	if partitions <= 0 {
		panic("clientlib: KeyPartition with no partitions")
	}
	return (Murmur2(key) & 0x7fffffff) % partitions
}

// SaltedKey spreads one hot key over salts keys "key:1" … "key:salts",
// choosing by pick (a counter or a random number): SaltedKey(k, 4, i)
// cycles through k:1..k:4 as i grows (R17). It trades per-key order for
// spread: records of one key land on up to salts partitions, so a consumer
// sees them in order per salted key only. A salts below 1 counts as 1.
func SaltedKey(key []byte, salts int, pick uint32) []byte {
	if salts < 1 {
		salts = 1
	}
	n := 1 + int(pick%uint32(salts))
	out := make([]byte, 0, len(key)+1+len(strconv.Itoa(n)))
	out = append(out, key...)
	out = append(out, ':')
	return strconv.AppendInt(out, int64(n), 10)
}
