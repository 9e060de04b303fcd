// Package azurite runs cutline on Azure Blob Storage zones
// (objstore/azblob) served by Azurite, one emulator process per zone, on
// 127.0.0.1.
//
// TestAzuriteTakeover is the takeover of package zonekill: zone-c's
// Azurite process is killed while star A appends, B fences and settles
// with zone-c down, and zone-c's process is started again on its
// workspace before B appends. Azurite saves its metadata every few
// seconds, so the restarted zone may have lost the newest blobs, as a
// zone that lost its disk would. Every acknowledged record stays readable
// exactly once; a slot committed at zone-c and one other zone only (the
// writer drops the extra copy of a zone that fell far behind) is then
// left with one copy, so the final check counts zone-c's empty answers
// as unknown (cutlinetest.Run.Lossy) rather than as missing copies.
//
// When Azurite is not installed the test is skipped, except with CI=true,
// where it fails (scripts/install-servers.sh installs it).
package azurite
