package testservers

import "syscall"

// procAttr kills a server when the test process that started it dies
// without running its cleanups (a SIGKILL, a crash), so no zone outlives
// its test.
func procAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
