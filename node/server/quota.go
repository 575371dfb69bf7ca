package server

// Quotas (issue 13) are metered by the loop's round (package loop:
// loop.Round.Meter, the token buckets with the Core's Clock's time); the
// server pauses a throttled native connection's reads
// (listener.Conn.ThrottleFor, in handle).
