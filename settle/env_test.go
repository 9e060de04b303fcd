package settle_test

import "github.com/cutline/cutline/cutlinetest"

// The storage, the parties and the kill switch of these tests are
// settletest's, shared with package roll's tests.

// Records in these tests are cutlinetest's "<stream>|<offset>|<id>": the
// stream and offset are what the host's index needs (locate), the id names
// the producer's record so that exactly-once can be checked across a
// takeover, where the successor gives a retried record a new offset.
var (
	record      = cutlinetest.Record
	parseRecord = cutlinetest.ParseRecord
	locate      = cutlinetest.Locate
)

const (
	starA  = "star-a"
	starB  = "star-b"
	stream = "s"
)
