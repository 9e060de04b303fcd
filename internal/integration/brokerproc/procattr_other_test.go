//go:build unix && !linux

package brokerproc_test

import "syscall"

// procAttr: only Linux kills a child when its parent dies; elsewhere the
// test's cleanups stop the brokers.
func procAttr() *syscall.SysProcAttr { return nil }
