//go:build simbugs

package compact

// The planted compaction bugs, for proving the checks that must catch them
// (issue 24); set with SetBugs before a run, never present in production
// builds.
var (
	// bugKeepsOlder: the offset map keeps a key's first offset in the
	// dirty section instead of its latest, and a pass removes every record
	// of the key but that one: the older of two values survives.
	bugKeepsOlder = false
	// bugTombstoneEarly: a tombstone is removed by the first pass that
	// sees it, before delete.retention.ms has passed.
	bugTombstoneEarly = false
	// bugDropsLastRecord: a batch that loses records to a pass loses its
	// last survivor too (an off-by-one copying the survivors), so a key's
	// latest value there disappears.
	bugDropsLastRecord = false
)

// SetBugs switches the planted bugs on or off.
func SetBugs(keepsOlder, tombstoneEarly bool) {
	bugKeepsOlder, bugTombstoneEarly = keepsOlder, tombstoneEarly
}

// SetRewriteBugs switches the planted rewrite bug on or off.
func SetRewriteBugs(dropsLastRecord bool) {
	bugDropsLastRecord = dropsLastRecord
}
