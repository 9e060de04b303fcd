// Package azurite runs cutline on Azure Blob Storage zones
// (objstore/azblob) served by Azurite, one emulator process per zone, on
// 127.0.0.1.
//
// TestAzuriteTakeover is the takeover of package zonekill: zone-c's
// Azurite process is killed while star A appends, B fences and settles
// with zone-c down, and zone-c's process is started again on its
// workspace before B appends. Azurite saves its metadata every few
// seconds, so the restarted zone may have lost the newest blobs, as a
// zone that lost its disk would: the chain keeps every guarantee with one
// zone of three losing data.
//
// When Azurite is not installed the test is skipped, except with CI=true,
// where it fails (scripts/install-servers.sh installs it).
package azurite
