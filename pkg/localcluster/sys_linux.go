package localcluster

import "syscall"

func killPid(pid int) error { return syscall.Kill(pid, syscall.SIGKILL) }
