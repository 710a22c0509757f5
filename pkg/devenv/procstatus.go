package devenv

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// ProcStatus returns a memory field of /proc/<pid>/status, such as VmRSS or
// VmHWM, in bytes; pid 0 means this process. The benchmarks use it to watch
// their own memory and that of the processes they start. Linux only:
// elsewhere the file does not exist and it returns an error.
func ProcStatus(pid int, field string) (int64, error) {
	path := "/proc/self/status"
	if pid != 0 {
		path = fmt.Sprintf("/proc/%d/status", pid)
	}
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), field+":"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb << 10, err
		}
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	return 0, fmt.Errorf("no %s in %s", field, path)
}
