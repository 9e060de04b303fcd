package node

import "syscall"

// fileLimit returns the process's limit of open file descriptors (its
// soft limit, which Go raises to the hard one at start), and whether it
// is known; an unlimited one is not.
func fileLimit() (uint64, bool) {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil || rl.Cur >= 1<<62 {
		return 0, false
	}
	return rl.Cur, true
}
