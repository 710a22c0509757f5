//go:build !linux

package devenv

import "syscall"

// childAttr puts the redis-server child in its own process group, so Ctrl-C
// in the terminal reaches only the parent, which then stops the child. (Only
// Linux can also tie the child's life to the parent's; see proc_linux.go.)
func childAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
