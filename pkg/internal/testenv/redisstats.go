package testenv

import (
	"context"
	"strconv"
	"strings"
	"testing"

	"github.com/redis/rueidis"
)

// RedisSpent runs fn with the benchmark timer running (it is stopped on
// entry and on return) and returns the server's CPU seconds and commands
// it took.
func RedisSpent(b *testing.B, c rueidis.Client, fn func() error) (cpu, cmds float64) {
	cpu0, cmds0 := RedisCPU(b, c)
	b.StartTimer()
	err := fn()
	b.StopTimer()
	if err != nil {
		b.Fatal(err)
	}
	cpu1, cmds1 := RedisCPU(b, c)
	return cpu1 - cpu0, cmds1 - cmds0
}

// RedisCPU returns the server's CPU seconds so far and the commands it has
// run (inside scripts included, from commandstats).
func RedisCPU(b testing.TB, c rueidis.Client) (cpu, cmds float64) {
	for k, v := range RedisInfo(b, c) {
		switch {
		case k == "used_cpu_sys" || k == "used_cpu_user":
			f, _ := strconv.ParseFloat(v, 64)
			cpu += f
		case strings.HasPrefix(k, "cmdstat_") && k != "cmdstat_info":
			calls, _, _ := strings.Cut(strings.TrimPrefix(v, "calls="), ",")
			n, _ := strconv.ParseFloat(calls, 64)
			cmds += n
		}
	}
	return cpu, cmds
}

// RedisInfo returns every field of INFO ALL.
func RedisInfo(b testing.TB, c rueidis.Client) map[string]string {
	info, err := c.Do(context.Background(), c.B().Info().Section("all").Build()).ToString()
	if err != nil {
		b.Fatal(err)
	}
	out := map[string]string{}
	for _, line := range strings.Split(info, "\r\n") {
		if k, v, ok := strings.Cut(line, ":"); ok {
			out[k] = v
		}
	}
	return out
}
