// Package lifecycle runs a stream's whole life on real backends: records
// of several streams are appended through a lease.Star and
// batch.Producer, their epochs settled, compacted into segments
// (settle.Compactor), their flights trimmed, the streams retained to a
// point and the segments below it collected; then every acknowledged
// record at or above the retention point must read back exactly once
// through settle.StreamReader, a read below it must be a
// *settle.TrimmedError naming the point, and the objects and metastore
// keys stored must have dropped. A second scenario races two compactors
// on one epoch, after a third crashed before naming its segments: nothing
// is lost, and a later Collect deletes what they left behind.
//
// Both run on the fs backend (three zones in temporary directories) and
// on three versitygw S3 zones, one server process each, with an embedded
// etcd server as the metastore. When a server cannot be started the tests
// are skipped, except with CI=true, where they fail.
package lifecycle
