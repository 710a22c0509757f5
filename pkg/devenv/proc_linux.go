package devenv

import "syscall"

// childAttr puts the redis-server child in its own process group (Ctrl-C in
// the terminal reaches only the parent, which then stops the child) and has
// the kernel send it SIGTERM if the parent dies without stopping it (killed,
// or dead of SIGPIPE as in `topk run | head`), so no server is left behind.
// (Linux ties the signal to the thread that started the child; Go keeps its
// threads for the life of the process unless a locked goroutine exits.)
func childAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
}
