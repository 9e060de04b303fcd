//go:build !linux

package testservers

import "syscall"

// procAttr: outside Linux a server is stopped only by the test's cleanups.
func procAttr() *syscall.SysProcAttr { return nil }
