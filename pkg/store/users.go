package store

import (
	"context"
	"time"

	"github.com/topk-dev/topk/pkg/uniq"
)

// ReadUsers ranks workspace ws's channels by distinct users over the hour
// window at now (uniq.Store.ReadTop), for the API and topk get --by users.
// Which workspaces are counted is the writers' choice (topk ingest
// --unique-users), so a reader reads whatever counts exist: a workspace
// not counted has an empty ranking.
func (s *Store) ReadUsers(ctx context.Context, ws string, now time.Time, k int) (uniq.Ranking, error) {
	return uniq.New(s.c, s.keys, uniq.Options{All: true}).ReadTop(ctx, ws, now, k)
}
