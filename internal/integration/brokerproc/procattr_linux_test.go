package brokerproc_test

import "syscall"

// procAttr kills a broker process when the test process that started it
// dies without running its cleanups (a SIGKILL, a crash), so that no
// broker outlives its test.
func procAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
