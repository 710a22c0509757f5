package api_test

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/topk-dev/topk/pkg/activity"
	"github.com/topk-dev/topk/pkg/api"
	"github.com/topk-dev/topk/pkg/internal/testenv"
	"github.com/topk-dev/topk/pkg/keys"
	"github.com/topk-dev/topk/pkg/rawstore"
	"github.com/topk-dev/topk/pkg/usercount"
)

// TestActivityDeletePartial (issue 14, 2): run as a Redis user that cannot
// run the counters' script, DELETE /v1/users/{id}/activity deleted the raw
// events, kept the counters and answered a bare 503. Now it answers 503
// saying exactly what each store did (raw events deleted, counters not),
// and the same DELETE as a user with every right finishes the job: no key
// of the user is left in Redis (not even on the rollup's work lists), and
// no raw event in PostgreSQL. Likewise for a Redis user that can run the
// script but not take the user off the work lists (SREM): the counters'
// part fails before anything is gone, so the second call still finds every
// key from the watermark.
func TestActivityDeletePartial(t *testing.T) {
	ctx := context.Background()
	raw := openRaw(t, testenv.Postgres(t))
	r := testenv.Redis(t)
	admin := testenv.Client(t, r.Addr())
	full := usercount.New(admin, keys.New(""), usercount.Options{})
	// An id that needs escaping in the URL and in the keys' hash tag.
	const user, other = "gone}% é/x", "stays"
	now := time.Now().UTC().Truncate(time.Millisecond)

	userKeys := func() (n int) {
		t.Helper()
		var cursor uint64
		for {
			e, err := admin.Do(ctx, admin.B().Scan().Cursor(cursor).Match("*{u:"+keys.EscapeTag(user)+"}*").Count(1000).Build()).AsScanEntry()
			if err != nil {
				t.Fatal(err)
			}
			n += len(e.Elements)
			if e.Cursor == 0 {
				return n
			}
			cursor = e.Cursor
		}
	}
	onWorkLists := func() (n int) {
		t.Helper()
		h := now.Unix() / 3600
		for hour := h - 3; hour <= h; hour++ {
			if in, err := admin.Do(ctx, admin.B().Sismember().Key(keys.New("").ActiveUsers(hour)).Member(user).Build()).AsBool(); err != nil {
				t.Fatal(err)
			} else if in {
				n++
			}
		}
		return n
	}
	count := func(u string) int64 {
		t.Helper()
		n, err := full.Count(ctx, u, "", now.Truncate(time.Minute).Add(-3*time.Hour), now.Truncate(time.Minute).Add(time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	listed := func(u string) int {
		t.Helper()
		got, _, err := raw.List(ctx, u, now.Add(-3*time.Hour), now.Add(time.Minute), "", 100)
		if err != nil {
			t.Fatal(err)
		}
		return len(got)
	}
	del := func(counts api.UserCounts, wantCode int) api.DeleteResponse {
		t.Helper()
		srv := serveActivity(t, &api.Activity{Raw: raw, Counts: counts})
		path := "/v1/users/" + url.PathEscape(user) + "/activity"
		code, body := send(t, srv, http.MethodDelete, path, nil)
		if code != wantCode {
			t.Fatalf("DELETE %s: %d %s, want %d", path, code, body, wantCode)
		}
		return decodeAs[api.DeleteResponse](t, "DELETE "+path, body)
	}

	for round, tc := range []struct {
		name   string
		rules  []string // the limited user's ACL rules
		denied string   // the command Redis refuses it
	}{
		// EVAL, EVALSHA and the rest of @scripting refused with NOPERM.
		{"no scripts", []string{"~*", "&*", "+@all", "-@scripting"}, "evalsha"},
		{"no SREM", []string{"~*", "&*", "+@all", "-srem"}, "srem"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// The user's events and counters, over two hours (so two work
			// lists), and another user's, offsets distinct per round.
			var evs []rawstore.Event
			b := usercount.NewBatch()
			for i := range 8 {
				u := user
				if i%4 == 3 {
					u = other
				}
				off := int64(round*100 + i)
				e := rawstore.Event{UserID: u, Type: "login", TS: now.Add(-time.Duration(i) * 20 * time.Minute),
					Topic: activity.Topic, Partition: 0, Offset: off}
				evs = append(evs, e)
				b.Add(activity.Topic+"/0", off, u, e.Type, e.TS.UnixMilli())
			}
			if err := raw.Write(ctx, evs); err != nil {
				t.Fatal(err)
			}
			if err := full.Apply(ctx, b); err != nil {
				t.Fatal(err)
			}
			keysBefore, listsBefore := userKeys(), onWorkLists()
			if keysBefore < 4 || listsBefore < 2 || count(user) != 6 || listed(user) != 6 {
				t.Fatalf("before: %d keys, on %d work lists, count %d, %d raw events; want at least 4 keys (2 minute hashes, roll, fence), 2 lists, 6, 6",
					keysBefore, listsBefore, count(user), listed(user))
			}

			name := "limited" + strconv.Itoa(round)
			if err := admin.Do(ctx, admin.B().AclSetuser().Username(name).Rule(append([]string{"on", ">" + name + "-Pa55"}, tc.rules...)...).Build()).Error(); err != nil {
				t.Fatalf("ACL SETUSER: %v", err)
			}
			limited, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{r.Addr()}, DisableCache: true,
				Username: name, Password: name + "-Pa55"})
			if err != nil {
				t.Fatal(err)
			}
			defer limited.Close()

			// As the limited user: the raw events go, the counters stay,
			// and the answer says which, and that Redis' ACL refused.
			res := del(usercount.New(limited, keys.New(""), usercount.Options{}), http.StatusServiceUnavailable)
			want := api.DeleteResponse{UserID: user, RawEventsDeleted: 6,
				Counters: api.StoreDeletion{Status: "failed",
					Error: "Redis refused: permission denied by Redis ACL: topk serve's Redis user lacks the command '" + tc.denied + "' (see config/redis-acl.conf)"},
				RawEvents: api.StoreDeletion{Status: "deleted"},
				Error:     "the user's counters may not be deleted; delete again to finish"}
			if res != want {
				t.Fatalf("first DELETE:\n%+v\nwant\n%+v", res, want)
			}
			if n := listed(user); n != 0 {
				t.Errorf("after the first DELETE: %d raw events, want 0 (it said deleted)", n)
			}
			if n := userKeys(); n != keysBefore || count(user) != 6 {
				t.Errorf("after the first DELETE: %d keys of the user (count %d), want all %d left (it said failed)", n, count(user), keysBefore)
			}

			// The same DELETE with every right finishes it.
			res = del(full, http.StatusOK)
			if !res.Complete || res.CounterKeysDeleted != keysBefore || res.RawEventsDeleted != 0 ||
				res.Counters.Status != "deleted" || res.RawEvents.Status != "deleted" || res.Error != "" {
				t.Fatalf("second DELETE: %+v, want complete with the %d counter keys", res, keysBefore)
			}
			if n, l := userKeys(), onWorkLists(); n != 0 || l != 0 || count(user) != 0 {
				t.Errorf("after the second DELETE: %d keys of the user, on %d work lists, count %d; want none", n, l, count(user))
			}
			// The other user is untouched.
			if c, l := count(other), listed(other); c != int64(2*(round+1)) || l != 2*(round+1) {
				t.Errorf("the other user: count %d, %d raw events; want %d and %d", c, l, 2*(round+1), 2*(round+1))
			}
			// And a third is a complete no-op.
			if res := del(full, http.StatusOK); !res.Complete || res.CounterKeysDeleted != 0 || res.RawEventsDeleted != 0 {
				t.Errorf("third DELETE: %+v", res)
			}
		})
	}
}
