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
//
// Where gofakes3 differs from S3:
//
//   - It does not check request signatures: any credentials are
//     accepted, so refused credentials (ErrAccessDenied) are tested on
//     versitygw only.
//   - A range whose end lies near 2⁶³ overflows when it adds the start to
//     the length, and the server drops the connection. objstore/s3 sends
//     an open-ended range ("bytes=off-") whenever the end lies past the
//     largest object it reads, which gofakes3 answers correctly
//     (TestGoFakeS3Answers, and the conformance suite's GetRange).
//   - Its in-memory backend checks If-None-Match under the lock that
//     writes the object, so concurrent creates of one key have exactly one
//     winner, as on S3; the other errors it answers (412
//     PreconditionFailed, NoSuchKey, NoSuchBucket) carry S3's codes, and
//     the backend's classification holds unchanged.
package gofakes3
