// Package gofakes3 runs cutline's S3 backend (objstore/s3) against a
// second S3 implementation beside versitygw: gofakes3, started in this
// process over HTTP on 127.0.0.1, on its in-memory backend, one server
// per zone.
//
// The tests:
//
//   - TestGoFakeS3Conformance: the objstore conformance suite.
//   - TestGoFakeS3Verify: objstore.Verify in many runs, the start-up check
//     of three zones, and its refusal of one bucket under two names.
//   - TestGoFakeS3RacyBackendRefused: gofakes3 over a backend that checks
//     for the key and then writes, with a gap between held open until
//     every concurrent create of a key has checked: Verify refuses it in
//     every run.
//   - TestGoFakeS3Answers: what gofakes3 answers where S3 implementations
//     differ, and that the backend's classification holds.
//   - TestGoFakeS3Takeover: the takeover of package zonekill, with a
//     zone's server stopped while the writer appends and restarted after
//     the fence.
package gofakes3
