package sketch_test

import (
	"fmt"

	"github.com/topk-dev/topk/pkg/sketch"
)

// The worked example: capacity 3, stream A B C D A B D D. When D arrives the
// summary is full and A, B, C all have count 1: A, the smallest id, is
// evicted, and D inherits its count as error. The next A evicts B, the next
// B evicts C. Every true count lies in [Count-Err, Count]; C, unmonitored,
// has true count 1 <= Min() = 2.
func ExampleSpaceSaving() {
	s, err := sketch.NewSpaceSaving(3)
	if err != nil {
		panic(err)
	}
	for _, item := range []string{"A", "B", "C", "D", "A", "B", "D", "D"} {
		s.Add(item, 1)
	}
	for _, e := range s.Entries() {
		fmt.Printf("%s count=%d err=%d\n", e.ID, e.Count, e.Err)
	}
	fmt.Println("total", s.Total(), "min", s.Min())
	top, guaranteed := s.GuaranteedTop(1)
	fmt.Println("top 1:", top[0].ID, "guaranteed:", guaranteed)
	// Output:
	// D count=4 err=1
	// B count=2 err=1
	// A count=2 err=1
	// total 8 min 2
	// top 1: D guaranteed: true
}
