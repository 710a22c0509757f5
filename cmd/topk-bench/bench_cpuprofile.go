package main

import (
	"fmt"
	"os"
	"runtime/pprof"

	"github.com/urfave/cli/v2"
)

// cpuProfileFlag asks for this process's Go CPU profile: on this machine
// the workers share the cores with Redis, so their CPU is half the story
// of a pipeline run (what the producer and the in-process broker take is
// in it too, under their own functions).
func cpuProfileFlag() cli.Flag {
	return &cli.StringFlag{Name: "cpuprofile", Usage: "write this process's Go CPU profile over the whole run to this file (read it with go tool pprof)"}
}

// startCPUProfile starts the profile cpuProfileFlag asks for, if any, and
// returns what ends it.
func startCPUProfile(c *cli.Context) (stop func(), err error) {
	path := c.String("cpuprofile")
	if path == "" {
		return func() {}, nil
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("--cpuprofile: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("--cpuprofile: %w", err)
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
	}, nil
}
