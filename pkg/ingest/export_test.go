package ingest

import "time"

// SetSinkClock sets a channel sink's clock: its holds' and the hour counts
// it owns.
func SetSinkClock(s Sink, now func() time.Time) { s.(*channelSink).now = now }
