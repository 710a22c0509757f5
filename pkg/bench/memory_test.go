package bench

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/topk-dev/topk/pkg/internal/testenv"
	"github.com/topk-dev/topk/pkg/keys"
)

func TestRunMemory(t *testing.T) {
	r := testenv.Redis(t)
	c := testenv.Client(t, r.Addr())
	ctx := context.Background()
	// Workload A scaled down to 20 workspaces of 300 channels, so that
	// closed buckets are truncated (Keep 50) within seconds.
	rep, err := RunMemory(ctx, c, MemoryConfig{
		Mode: MemoryMode30d, Rate: 40, Minutes: 60, SampleMinutes: 6, Hours: 2, K: 10, Keep: 50,
		Workspaces: 20, Channels: 300,
	})
	if err != nil {
		t.Fatal(err)
	}

	h := rep.Hour
	if h == nil || h.Events != 60*60*40 || len(h.PerMinute) != 60 || h.Minutes != 60 {
		t.Fatalf("hour run: %+v, want 144000 events over 60 minutes", h)
	}
	for i, m := range h.PerMinute {
		if m.Pairs < 1 || m.Pairs > 40*60 || (i > 0 && m.UsedMemory <= h.PerMinute[i-1].UsedMemory) {
			t.Fatalf("minute %d: %+v (memory must grow with each minute's buckets)", i+1, m)
		}
	}
	if len(h.Hours) != 1 || h.Hours[0].Pairs < h.PerMinute[0].Pairs || h.Hours[0].Pairs > 20*300 || h.Hours[0].Kept > 20*50 {
		t.Fatalf("hour run's hours: %+v", h.Hours)
	}
	ws := int64(h.Workspaces)
	if ws < 2 || ws > 20 {
		t.Fatalf("hour run: %d workspaces", ws)
	}
	hc := h.Classes
	if len(hc) != numClasses {
		t.Fatalf("hour run: %d classes", len(hc))
	}
	if b := hc[clMinute]; b.Keys < 3 || b.Bytes <= 0 {
		t.Fatalf("buckets: %+v", b)
	}
	if w := hc[clWin]; w.Keys != ws {
		t.Fatalf("running sums: %+v, want one per workspace (%d)", w, ws)
	}
	// The tick at the end folds the minutes whose lateness has passed (the
	// first 59) into one open hour bucket per workspace.
	if o := hc[clHourOpen]; o.Keys != ws || hc[clHourClosed].Keys != 0 {
		t.Fatalf("hour buckets: open %+v, closed %+v", o, hc[clHourClosed])
	}
	// The tick after closes the hour: truncated, so smaller.
	if ac := h.AfterClose; len(ac) != numClasses || ac[clHourOpen].Keys != 0 || ac[clHourClosed].Keys != ws ||
		ac[clHourClosed].Bytes >= hc[clHourOpen].Bytes || ac[clAll].Keys < ws || ac[clDayOpen].Keys != ws || h.CloseSeconds <= 0 {
		t.Fatalf("after the close: %+v (close %.3f s)", ac, h.CloseSeconds)
	}
	if top := hc[clTop1h]; top.Keys != 2*ws {
		t.Fatalf("1h caches: %+v, want a ranking and a meta hash per workspace (%d)", top, ws)
	}
	for _, cl := range []int{clTop24h, clTop7d, clTop30d, clTopAll} {
		if top := hc[cl]; top.Keys != 3*ws {
			t.Fatalf("%s: %+v, want a ranking, a meta hash and an error hash per workspace (%d)", memoryClassNames[cl], top, ws)
		}
	}
	if hc[clGlobalMinute].Keys < 3 || hc[clGlobalTop].Keys < 3 {
		t.Fatalf("global: %+v %+v", hc[clGlobalMinute], hc[clGlobalTop])
	}
	if h.HeaviestBytes <= 0 || h.HeaviestChannels < 1 || h.HeaviestID != "w-01" {
		t.Fatalf("heaviest workspace: %s %d bytes %d channels", h.HeaviestID, h.HeaviestBytes, h.HeaviestChannels)
	}

	d := rep.Day
	if d == nil || d.Minutes != 12 || d.Events != 12*60*40 || len(d.Hours) != 2 || d.Ticks < 13 || d.Ticks >= 121 || d.SampleMinutes != 6 {
		t.Fatalf("day run: %+v", d)
	}
	if d.End.UTC().Hour() != 0 || d.End.UTC().Minute() != 0 {
		t.Fatalf("day run ends at %s, want a minute into a UTC day", d.End.UTC())
	}
	ws = int64(d.Workspaces)
	dc := d.Classes
	// Both hours and the day closed; closed buckets keep at most Keep.
	if d.ClosedHours != 2 || d.ClosedDays != 1 || dc[clHourOpen].Keys != 0 || dc[clDayOpen].Keys != 0 {
		t.Fatalf("day run: %d closed hours, %d closed days, open %+v %+v", d.ClosedHours, d.ClosedDays, dc[clHourOpen], dc[clDayOpen])
	}
	if k := dc[clHourClosed].Keys; k < ws || k > 2*ws {
		t.Fatalf("closed hour buckets: %+v, want one per workspace and active hour (%d workspaces)", dc[clHourClosed], ws)
	}
	if dc[clDayClosed].Keys != ws || dc[clAll].Keys < ws {
		t.Fatalf("closed days %+v, all-time %+v, want one per workspace (%d)", dc[clDayClosed], dc[clAll], ws)
	}
	for i, hr := range d.Hours {
		if hr.Kept > hr.Pairs || hr.Kept > 50*20 || len(hr.Classes) != numClasses || hr.UsedMemory <= 0 {
			t.Fatalf("day run, hour %d: %+v", i+1, hr)
		}
	}
	// Minute buckets live 2 h on the simulated clock: the sweep after the
	// second hour removed nothing yet, but the buckets' count is bounded.
	if dc[clMinute].Keys == 0 || dc[clMinute].Keys > 120*ws {
		t.Fatalf("day run's minute buckets: %+v", dc[clMinute])
	}
	if dc[clRollup].Keys < 2*ws || d.Parts[ptRollFold].Keys < ws {
		t.Fatalf("rollup bookkeeping: %+v %+v", dc[clRollup], d.Parts)
	}
	for _, cl := range []int{clTop1h, clTop24h, clTop7d, clTop30d, clTopAll, clGlobalHour, clGlobalDay, clGlobalTop} {
		if dc[cl].Keys == 0 || dc[cl].Bytes <= 0 {
			t.Fatalf("day run: no %s", memoryClassNames[cl])
		}
	}
	if d.GlobalHours != 2 || d.GlobalDays != 1 || d.OpenDayBytes <= 0 {
		t.Fatalf("day run: global hours %d, days %d, open day %d bytes", d.GlobalHours, d.GlobalDays, d.OpenDayBytes)
	}
	if len(d.Expected) != 2 || d.Expected[0].Events != 6*60*40 || d.Expected[1].Events != 3600*40 || d.Expected[0].Pairs >= d.Expected[1].Pairs {
		t.Fatalf("expectations: %+v", d.Expected)
	}

	if len(rep.Extrapolation) < 10 || rep.Total <= 0 || rep.TotalFullDays <= rep.Total {
		t.Fatalf("extrapolation: %+v total %d, full %d", rep.Extrapolation, rep.Total, rep.TotalFullDays)
	}
	var sum int64
	for _, row := range rep.Extrapolation {
		sum += row.Bytes
		if row.Bytes < 0 || row.Formula == "" {
			t.Fatalf("row %+v", row)
		}
	}
	if sum != rep.Total {
		t.Fatalf("rows sum to %d, total %d", sum, rep.Total)
	}
	// The runs delete their keys.
	if n, err := c.Do(ctx, c.B().Dbsize().Build()).AsInt64(); err != nil || n != 0 {
		t.Fatalf("DBSIZE after the run = %d (%v), want 0", n, err)
	}
	var md strings.Builder
	rep.WriteMarkdown(&md)
	for _, want := range []string{"| 60 |", "busiest (w-01", "Closing the hour", "hour buckets, closed", "× 744 hours", "Extrapolation", "**total**"} {
		if !strings.Contains(md.String(), want) {
			t.Fatalf("markdown lacks %q:\n%s", want, md.String())
		}
	}
}

// With a cadence, the scheduler refreshes the long windows while the day
// run writes, as the product does, and no last tick is needed.
func TestRunMemoryLongCadence(t *testing.T) {
	r := testenv.Redis(t)
	c := testenv.Client(t, r.Addr())
	rep, err := RunMemory(context.Background(), c, MemoryConfig{
		Mode: MemoryModeDay, Rate: 40, SampleMinutes: 3, Hours: 1, K: 10, Keep: 50, Workspaces: 10, Channels: 200, LongCadence: time.Hour,
	})
	if err != nil {
		t.Fatal(err)
	}
	d := rep.Day
	for _, cl := range []int{clTop24h, clTop7d, clTop30d, clTopAll} {
		if d.Classes[cl].Keys != 3*int64(d.Workspaces) {
			t.Fatalf("%s: %+v", memoryClassNames[cl], d.Classes[cl])
		}
	}
	var md strings.Builder
	rep.WriteMarkdown(&md)
	if !strings.Contains(md.String(), "long windows refreshed every 1h0m0s") {
		t.Fatalf("markdown:\n%s", md.String())
	}
}

func TestKeyClass(t *testing.T) {
	ks := keys.New("p")
	wk := ks.Workspace("w-1")
	const closed = 100 // hours up to 100 closed; day 4 = hours 96..119 open
	for _, c := range []struct {
		key         string
		class, part int
		n           int64
	}{
		{wk.Bucket(6000), clMinute, -1, 0},
		{wk.Win("1h"), clWin, -1, 0},
		{wk.WinMinutes("1h"), clOther, -1, 0},
		{wk.Hour(100), clHourClosed, -1, 100},
		{wk.Hour(101), clHourOpen, -1, 101},
		{keys.Cut(wk.Hour(99)), clRollup, ptHourCut, 99},
		{wk.Day(3), clDayClosed, -1, 3},
		{wk.Day(4), clDayOpen, -1, 4},
		{keys.Cut(wk.Day(3)), clRollup, ptDayCutClosed, 3},
		{keys.Cut(wk.Day(4)), clRollup, ptDayCutOpen, 4},
		{wk.All(), clAll, -1, 0},
		{wk.AllErr(), clAll, -1, 0},
		{wk.Roll(), clRollup, ptRollFold, 0},
		{wk.Fold(), clRollup, ptRollFold, 0},
		{wk.Top("1h"), clTop1h, -1, 0},
		{wk.TopMeta("24h"), clTop24h, -1, 0},
		{wk.TopErr("7d"), clTop7d, -1, 0},
		{wk.Top("30d"), clTop30d, -1, 0},
		{wk.TopErr("all"), clTopAll, -1, 0},
		{wk.Fence(), clOther, -1, 0},
		{ks.Workspace("a}b:h:1").Hour(101), clHourOpen, -1, 101},
		{ks.GlobalShard(2).Summary(6000), clGlobalMinute, -1, 0},
		{ks.GlobalShard(2).Errors(6000), clGlobalMinute, -1, 0},
		{ks.GlobalShard(2).Events(6000), clGlobalMinute, -1, 0},
		{ks.GlobalShard(0).Rolled("h", 100), clGlobalHour, -1, 100},
		{ks.GlobalShard(0).RolledErr("h", 100), clGlobalHour, -1, 100},
		{ks.GlobalShard(0).RolledMeta("d", 4), clGlobalDay, -1, 4},
		{ks.GlobalShard(0).Rolled("a", 0), clGlobalAll, -1, 0},
		{ks.Global().Top("7d"), clGlobalTop, -1, 0},
		{ks.Global().TopMeta("1h"), clGlobalTop, -1, 0},
		{ks.Workspaces(), clOther, -1, 0},
		{ks.MinuteWorkspaces(6000), clOther, -1, 0},
		{ks.Beat("24h"), clOther, -1, 0},
		{ks.Dirty(), clOther, -1, 0},
	} {
		class, part, n := keyClass(ks, c.key, closed)
		if class != c.class || part != c.part || n != c.n {
			t.Errorf("%s: class %d part %d n %d, want %d %d %d", c.key, class, part, n, c.class, c.part, c.n)
		}
	}
}
