package roll_test

import "github.com/cutline/cutline/cutlinetest"

// The storage, the parties and the kill switch of these tests are
// settletest's, shared with package settle's tests.

// Records in these tests are cutlinetest's "<stream>|<offset>|<id>": the
// stream and offset are what the host's index needs (locate), the id names
// the producer's record so that exactly-once can be checked across the
// rolls and a restart, where a retried record gets a new offset.
var (
	record = cutlinetest.Record
	locate = cutlinetest.Locate
)

const (
	starA  = "star-a"
	stream = "s"
)
