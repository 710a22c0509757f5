package fenced

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
)

func TestDecode(t *testing.T) {
	parts := func(g int) int { // group 1 is whole, group 2 has 3 parts
		switch g {
		case 0:
			return 1
		case 1:
			return 3
		}
		return -1
	}
	for _, tt := range []struct {
		reply []int64
		width int
		want  string // fmt of counters and overlaps, or the error's start
	}{
		{[]int64{7, 0}, 2, "[7 0] []"},
		{[]int64{7, 5, 2, 40}, 2, "[7 5] [{1 0 40}]"},
		{[]int64{7, 5, 2, 3, -1, 1, 1, 9}, 3, "[7 5] [{1 2 -1} {0 0 9}]"},
		{[]int64{7}, 2, "x replied"},
		{[]int64{7, 5, 2}, 2, "x replied"},
		{[]int64{7, 5, 3, 40}, 2, "x named part 1 of group 3"},
		{[]int64{7, 5, 2, 4, 1}, 3, "x named part 4 of group 2"},
		{[]int64{7, 5, 0, 40}, 2, "x named part 1 of group 0"},
	} {
		counters, overlaps, err := Decode("x", tt.reply, 2, tt.width, parts)
		got := fmt.Sprint(counters, " ", overlaps)
		if err != nil {
			got = err.Error()
		}
		if !strings.HasPrefix(got, tt.want) {
			t.Errorf("Decode(%v, width %d) = %q, want %q", tt.reply, tt.width, got, tt.want)
		}
	}
}

func TestSettle(t *testing.T) {
	ctx := context.Background()
	rounds := 0
	if err := Settle(ctx, "x", func(context.Context) (int, error) {
		rounds++
		return 3 - rounds, nil // 2 groups, then 1, then none
	}); err != nil || rounds != 3 {
		t.Fatalf("err %v after %d rounds, want nil after 3", err, rounds)
	}
	rounds = 0
	err := Settle(ctx, "x", func(context.Context) (int, error) { rounds++; return 1, nil })
	if err == nil || rounds != Rounds+1 || !strings.Contains(err.Error(), "still straddle") {
		t.Fatalf("err %v after %d rounds, want a give-up after %d", err, rounds, Rounds+1)
	}
	boom := errors.New("boom")
	if err := Settle(ctx, "x", func(context.Context) (int, error) { return 1, boom }); !errors.Is(err, boom) {
		t.Fatalf("err %v, want the round's", err)
	}
}
