// Package observe wraps an objstore.Bucket so that every request is
// reported once it returns: the bucket's name, the operation and its
// error. It is where a host counts its object store requests (metrics,
// traces, logs) without a wrapper of its own around every method.
//
// Outcome sorts a request's error into a few stable words, fit for a
// metric's label: ok, not_found, exists, canceled (a request its caller
// no longer needed: a reader asks every zone and drops the slower ones
// once enough copies agree) and error.
//
//	zone, err := observe.Wrap(bucket, func(bucket string, op observe.Op, err error) {
//		requests.WithLabelValues(bucket, string(op), observe.Outcome(err)).Inc()
//	})
//
// The wrapper adds nothing else and passes the conformance suite
// (objstore/objstoretest) like its inner bucket.
package observe
