package store

import (
	"context"
	"time"

	"github.com/topk-dev/topk/pkg/uniq"
)

// Users returns the unique-user counting of the workspaces o names, over
// the store's client and key space (for the channel sink).
func (s *Store) Users(o uniq.Options) *uniq.Store { return uniq.New(s.c, s.keys, o) }

// ReadUsers ranks workspace ws's channels by distinct users over the hour
// window at now (uniq.Store.ReadTop), for the API and topk get --by users.
// Which workspaces are counted is the writers' choice (topk ingest
// --unique-users), so a reader reads whatever counts exist: a workspace
// not counted has an empty ranking.
func (s *Store) ReadUsers(ctx context.Context, ws string, now time.Time, k int) (uniq.Ranking, error) {
	return s.Users(uniq.Options{All: true}).ReadTop(ctx, ws, now, k)
}
