package ingest

import (
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/topk-dev/topk/pkg/events"
	"github.com/topk-dev/topk/pkg/internal/testenv"
	"github.com/topk-dev/topk/pkg/keys"
	"github.com/topk-dev/topk/pkg/loadgen"
	"github.com/topk-dev/topk/pkg/store"
	"github.com/topk-dev/topk/pkg/window"
)

// newTestChannelSink opens a channel sink with opts over the hour window
// of a fresh Redis, its keys under the prefix "t".
func newTestChannelSink(t *testing.T, opts ChannelOptions) (*channelSink, *store.Store, keys.Space) {
	t.Helper()
	ks := keys.New("t")
	st := store.New(testenv.Client(t, testenv.Redis(t).Addr()), ks, window.Hour, store.Options{})
	sink, err := NewChannelSink(st, opts)
	if err != nil {
		t.Fatal(err)
	}
	return sink.(*channelSink), st, ks
}

// channelRecord is the record at offset of workspace "ws"'s event on
// channel ch at at, as topic "events" holds it.
func channelRecord(offset int64, ch string, at time.Time) *kgo.Record {
	ev := events.Event{EventID: "e-" + strconv.FormatInt(offset, 10), WorkspaceID: "ws", ChannelID: ch, TS: at.UnixMilli()}
	return &kgo.Record{Topic: "events", Offset: offset, Key: []byte("ws"), Value: loadgen.Encode(ev, nil), Timestamp: at}
}
