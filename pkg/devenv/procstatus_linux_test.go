package devenv

import (
	"os"
	"testing"
)

func TestProcStatus(t *testing.T) {
	self, err := ProcStatus(0, "VmRSS")
	if err != nil || self <= 0 {
		t.Fatalf("own VmRSS = %d, %v", self, err)
	}
	byPID, err := ProcStatus(os.Getpid(), "VmHWM")
	if err != nil || byPID < self/2 {
		t.Fatalf("VmHWM by pid = %d, %v (VmRSS %d)", byPID, err, self)
	}
	if _, err := ProcStatus(0, "NoSuchField"); err == nil {
		t.Fatal("an unknown field gave no error")
	}
}
