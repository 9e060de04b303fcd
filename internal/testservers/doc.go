// Package testservers starts real storage servers as child processes for
// tests, each on 127.0.0.1 and a free port and stopped when the test
// ends: one versitygw (an S3 gateway over a posix directory) per zone,
// and one Azurite (the Azure Blob Storage emulator, run with node) per
// zone.
//
// A zone can be stopped for real (the process is killed) and restarted on
// the same port and directory, which is how tests take a zone down in the
// middle of an operation.
//
// When a server's executable cannot be found the test is skipped with a
// hint to run scripts/install-servers.sh, except when CI=true: then it
// fails, so that a CI run never passes without the real backends.
package testservers
