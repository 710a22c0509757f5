package ingest

import "time"

// SetSinkClock sets a channel sink's clock: its holds' and the hour counts
// it owns.
func SetSinkClock(s Sink, now func() time.Time) { s.(*channelSink).now = now }

// SetQuietFor sets how long a worker must find nothing new to count as
// caught up (see defaultQuietFor): tests that model a live stream with a few
// records set it long, so that the worker waits for its batches' age and
// its holds' end as it would under a steady stream.
func SetQuietFor(c *Config, d time.Duration) { c.quietFor = d }
