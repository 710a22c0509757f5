// Package redisread holds the one way topk's readers read several keys as
// of one moment: a MULTI/EXEC of read commands.
package redisread

import (
	"context"
	"errors"
	"fmt"

	"github.com/redis/rueidis"
)

// ErrBadReply means Redis answered with an unexpected shape, which points
// at scripts and code from different versions (store.ErrBadReply is it).
var ErrBadReply = errors.New("unexpected reply from Redis")

// Together sends cmds in one MULTI/EXEC, so that what they read belongs
// together (a ranking and its metadata, a sum and its marker), and returns
// their replies in order.
func Together(ctx context.Context, c rueidis.Client, cmds ...rueidis.Completed) ([]rueidis.RedisMessage, error) {
	all := make(rueidis.Commands, 0, len(cmds)+2)
	all = append(all, c.B().Multi().Build())
	all = append(all, cmds...)
	all = append(all, c.B().Exec().Build())
	resp := c.DoMulti(ctx, all...)
	for _, r := range resp {
		if err := r.Error(); err != nil {
			return nil, err
		}
	}
	replies, err := resp[len(resp)-1].ToArray()
	if err != nil || len(replies) != len(cmds) {
		return nil, fmt.Errorf("%w: EXEC reply %v", ErrBadReply, err)
	}
	return replies, nil
}
