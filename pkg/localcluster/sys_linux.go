package localcluster

import "syscall"

func unmount(path string) error {
	if err := syscall.Unmount(path, 0); err != nil {
		return syscall.Unmount(path, syscall.MNT_DETACH)
	}
	return nil
}

func killPid(pid int) error { return syscall.Kill(pid, syscall.SIGKILL) }
