package api_test

import (
	"context"
	"net/http"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/topk-dev/topk/pkg/api"
	"github.com/topk-dev/topk/pkg/rawstore"
)

// rangeStore is a raw event store that records the range it is listed over.
type rangeStore struct {
	rawstore.Store
	mu       sync.Mutex
	from, to time.Time
}

func (s *rangeStore) List(_ context.Context, _ string, from, to time.Time, _ string, _ int) ([]rawstore.Event, string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.from, s.to = from, to
	return nil, "", nil
}

// TestListDefaultRange: the one rule of a listing's range, shared with
// `topk activity list`: to defaults to now and from to api.DefaultListSpan
// (the raw store's retention) before to.
func TestListDefaultRange(t *testing.T) {
	now := time.Date(2026, 3, 24, 10, 30, 0, 0, time.UTC)
	raw := &rangeStore{}
	srv := serveActivity(t, &api.Activity{Raw: raw, Now: func() time.Time { return now }})
	ms := func(t time.Time) string { return strconv.FormatInt(t.UnixMilli(), 10) }
	to := now.Add(-time.Hour)
	from := now.Add(-48 * time.Hour)
	for _, tc := range []struct {
		query            string
		wantFrom, wantTo time.Time
	}{
		{"", now.Add(-api.DefaultListSpan), now},
		{"?to=" + ms(to), to.Add(-api.DefaultListSpan), to},
		{"?from=" + ms(from), from, now},
		{"?from=" + from.Format(time.RFC3339) + "&to=" + ms(to), from, to},
	} {
		path := "/v1/users/u/activity" + tc.query
		code, body := get(t, srv, path)
		if code != http.StatusOK {
			t.Errorf("%s: %d %s", path, code, body)
			continue
		}
		res := decodeAs[api.ListResponse](t, path, body)
		raw.mu.Lock()
		listed := [2]time.Time{raw.from, raw.to}
		raw.mu.Unlock()
		if !res.From.Equal(tc.wantFrom) || !res.To.Equal(tc.wantTo) || listed != [2]time.Time{tc.wantFrom, tc.wantTo} {
			t.Errorf("%s: answered from %s to %s, listed %v, want %s to %s", path, res.From, res.To, listed, tc.wantFrom, tc.wantTo)
		}
		if res.Events == nil || len(res.Events) != 0 {
			t.Errorf("%s: events %v, want []", path, res.Events)
		}
	}
	wantError(t, srv, "/v1/users/u/activity?from="+ms(now.Add(time.Hour)), http.StatusBadRequest, "is after to")
	wantError(t, srv, "/v1/users/u/activity?to=soon", http.StatusBadRequest, `to: "soon" is neither RFC 3339 nor unix milliseconds`)
}

// TestParseTime: RFC 3339 with any offset and fraction, or unix
// milliseconds; always UTC.
func TestParseTime(t *testing.T) {
	want := time.Date(2026, 3, 24, 10, 0, 0, 0, time.UTC)
	for _, s := range []string{"2026-03-24T10:00:00Z", "2026-03-24T12:00:00+02:00", "2026-03-24T10:00:00.000Z", "1774346400000"} {
		got, err := api.ParseTime(s)
		if err != nil || !got.Equal(want) || got.Location() != time.UTC {
			t.Errorf("ParseTime(%q) = %v, %v; want %v", s, got, err, want)
		}
	}
	for _, s := range []string{"", "yesterday", "2026-03-24", "2026-03-24 10:00:00"} {
		if _, err := api.ParseTime(s); err == nil {
			t.Errorf("ParseTime(%q) took it", s)
		}
	}
}
