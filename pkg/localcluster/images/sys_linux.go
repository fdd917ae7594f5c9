package images

import "syscall"

// Unmount unmounts path, lazily when it is busy.
func Unmount(path string) error {
	if err := syscall.Unmount(path, 0); err != nil {
		return syscall.Unmount(path, syscall.MNT_DETACH)
	}
	return nil
}
