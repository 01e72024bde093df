// Package faultenv makes real filesystem faults for tests: a small tmpfs that fills up, a
// read-only bind mount, a child process under a resource limit. Production code never imports it.
//
// Mounting needs root. A test that needs it skips, saying why, when not run as root, except under
// CI=true, where it fails: CI runs as root, so a skip there would hide a broken setup.
package faultenv

import (
	"errors"
	"os"
	"os/exec"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// RequireRoot skips t when the process is not root, or fails it when CI=true.
func RequireRoot(t testing.TB) {
	t.Helper()
	if os.Geteuid() == 0 {
		return
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("this test makes real filesystem faults with mount(2) and needs root; CI runs as root")
	}
	t.Skip("needs root to mount a tmpfs or a bind mount; run as root (CI does)")
}

// Tmpfs mounts a fresh tmpfs with the given mount options (size=4m, nr_inodes=16, ...) on a new
// temp dir and returns its path. It is unmounted, and the dir removed, when t ends.
func Tmpfs(t testing.TB, options string) string {
	t.Helper()
	RequireRoot(t)
	dir := t.TempDir()
	if err := unix.Mount("tmpfs", dir, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, options); err != nil {
		t.Fatalf("mount -t tmpfs -o %s tmpfs %s: %v", options, dir, err)
	}
	t.Cleanup(func() { unmount(t, dir) })
	return dir
}

// ReadOnlyBind bind-mounts dir read-only on a new temp dir (mount --bind, then remount,bind,ro)
// and returns its path. It is unmounted when t ends.
func ReadOnlyBind(t testing.TB, dir string) string {
	t.Helper()
	RequireRoot(t)
	ro := t.TempDir()
	if err := unix.Mount(dir, ro, "", unix.MS_BIND, ""); err != nil {
		t.Fatalf("mount --bind %s %s: %v", dir, ro, err)
	}
	t.Cleanup(func() { unmount(t, ro) })
	if err := unix.Mount("", ro, "", unix.MS_REMOUNT|unix.MS_BIND|unix.MS_RDONLY, ""); err != nil {
		t.Fatalf("mount -o remount,bind,ro %s: %v", ro, err)
	}
	return ro
}

func unmount(t testing.TB, dir string) {
	if err := unix.Unmount(dir, 0); err != nil {
		// Busy: a descriptor the test leaked. Detach it so the machine is left clean, and fail.
		_ = unix.Unmount(dir, unix.MNT_DETACH)
		t.Errorf("umount %s: %v (a descriptor below it is still open)", dir, err)
	}
}

// Fill writes a file of zeros at path until its filesystem is full, and returns its size.
func Fill(t testing.TB, path string) int64 {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 64<<10)
	var size int64
	for {
		n, err := f.Write(buf)
		size += int64(n)
		if err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatalf("filling %s: %v", path, err)
			}
			return size
		}
	}
}

// Child returns a command that runs the current test binary again as a child doing the work
// named by the environment variable key=value; the child's TestMain must look for it. Only the
// tests matching run are selected in the child, so a child that ignores key runs nothing.
func Child(key, value string) *exec.Cmd {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), key+"="+value)
	return cmd
}

// OpenFiles returns the number of descriptors the process holds.
func OpenFiles() int {
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return -1
	}
	return len(entries) - 1 // ReadDir's own
}
