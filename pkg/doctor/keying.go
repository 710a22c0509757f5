package doctor

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/topk-dev/topk/pkg/events"
	"github.com/topk-dev/topk/pkg/kafka"
)

// DefaultKeyingSample is how many of the events topic's latest records the
// keying check reads, spread over its partitions.
const DefaultKeyingSample = 1000

// keying is what the keying check found in the records it read.
type keying struct {
	read, events int                // records read, and those that are events
	unkeyed      int                // events not keyed by their workspace id
	example      [2]string          // the first such event's key and workspace
	partitions   map[string][]int32 // workspace -> the partitions its keyed events are in
	partial      bool               // some partition's latest records were not all read in time
}

// keyingCheck reads up to o.KeyingSample of the events topic's latest records
// and says whether they are keyed by their workspace id, as --hour-counts
// worker needs (events.KeyedByWorkspace: one partition, so one worker, owns
// a workspace's hour), and whether a workspace's events are in more than one
// partition (a partition count change, or a producer's own partitioner).
// With o.WorkerHourCounts either fails; otherwise it is what switching to
// worker mode would meet, reported as ok.
func keyingCheck(ctx context.Context, o KafkaOptions, adm *kadm.Client) Check {
	from, ends, err := latestRecords(ctx, o, adm)
	if err != nil {
		return check(Warn, "keying", "cannot read the latest records of %s: %v", o.Topic, err).because(
			"The check reads them to see how producers key events; the Kafka user needs READ on the topic.")
	}
	k, err := readKeying(ctx, o, from, ends)
	if err != nil {
		return check(Warn, "keying", "cannot read the latest records of %s: %v", o.Topic, err).because(
			"The check reads them to see how producers key events; the Kafka user needs READ on the topic.")
	}
	c := judgeKeying(k, o.WorkerHourCounts)
	if k.partial && k.read > 0 {
		c.Detail += fmt.Sprintf(" Judged on %d record(s): not every partition's latest came within --timeout (or its last offset is a transaction marker).", k.read)
	}
	return c
}

// latestRecords returns, for each partition of o.Topic with records, the
// offset of the first of its latest ones to read and its end offset, so
// that about o.KeyingSample records are read in all.
func latestRecords(ctx context.Context, o KafkaOptions, adm *kadm.Client) (map[int32]kgo.Offset, map[int32]int64, error) {
	step, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	starts, err := adm.ListStartOffsets(step, o.Topic)
	if err == nil {
		err = starts.Error()
	}
	if err != nil {
		return nil, nil, err
	}
	last, err := adm.ListEndOffsets(step, o.Topic)
	if err == nil {
		err = last.Error()
	}
	if err != nil {
		return nil, nil, err
	}
	per := int64(max(1, (o.KeyingSample+len(last[o.Topic])-1)/max(1, len(last[o.Topic]))))
	from, ends := map[int32]kgo.Offset{}, map[int32]int64{}
	last.Each(func(end kadm.ListedOffset) {
		start := max(end.Offset-per, 0)
		if s, ok := starts.Lookup(o.Topic, end.Partition); ok {
			start = max(start, s.Offset)
		}
		if start < end.Offset {
			from[end.Partition] = kgo.NewOffset().At(start)
			ends[end.Partition] = end.Offset
		}
	})
	return from, ends, nil
}

// keyingIdle ends the read of a sample whose partitions' last offsets
// never come: a transaction's commit marker, or compacted records.
const keyingIdle = 500 * time.Millisecond

// readKeying reads each partition's records from from up to its end, or
// what of them arrives within o.Timeout, and tallies how they are keyed.
func readKeying(ctx context.Context, o KafkaOptions, from map[int32]kgo.Offset, ends map[int32]int64) (keying, error) {
	k := keying{partitions: map[string][]int32{}}
	if len(from) == 0 {
		return k, nil
	}
	cl, err := kafka.NewClient(o.Config, append(timeouts(o.Timeout), kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{o.Topic: from}))...)
	if err != nil {
		return k, err
	}
	defer cl.Close()
	step, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	for len(ends) > 0 && step.Err() == nil {
		wait, stop := step, context.CancelFunc(func() {})
		if k.read > 0 {
			wait, stop = context.WithTimeout(step, keyingIdle)
		}
		fetches := cl.PollFetches(wait)
		idle := wait.Err() != nil
		stop()
		if err := fetches.Err0(); err != nil && !idle {
			return k, err
		}
		fetches.EachRecord(func(r *kgo.Record) {
			end, ok := ends[r.Partition]
			if !ok || r.Offset >= end {
				return // written since the check began: not part of the sample
			}
			k.add(r)
			if r.Offset == end-1 {
				delete(ends, r.Partition)
			}
		})
		if idle {
			break // or out of time: judge what was read
		}
	}
	k.partial = len(ends) > 0
	return k, nil
}

// add tallies one record.
func (k *keying) add(r *kgo.Record) {
	k.read++
	ev, err := events.Decode(r.Value)
	if err != nil {
		return // the dead letters' business, not the keying's
	}
	k.events++
	if !events.KeyedByWorkspace(r.Key, ev) {
		if k.unkeyed == 0 {
			k.example = [2]string{string(r.Key), ev.WorkspaceID}
		}
		k.unkeyed++
		return // spread by its key: what split looks for is keyed events apart
	}
	ps := k.partitions[ev.WorkspaceID]
	for _, p := range ps {
		if p == r.Partition {
			return
		}
	}
	k.partitions[ev.WorkspaceID] = append(ps, r.Partition)
}

// split returns how many workspaces have keyed events in several
// partitions (a partition count change, or a producer's own partitioner), and
// the first of them by id with its partitions.
func (k keying) split() (int, string) {
	var names []string
	for ws, ps := range k.partitions {
		if len(ps) > 1 {
			names = append(names, ws)
		}
	}
	if len(names) == 0 {
		return 0, ""
	}
	sort.Strings(names)
	ps := append([]int32(nil), k.partitions[names[0]]...)
	sort.Slice(ps, func(i, j int) bool { return ps[i] < ps[j] })
	var s []string
	for _, p := range ps {
		s = append(s, fmt.Sprint(p))
	}
	return len(names), fmt.Sprintf("%q in partitions %s", names[0], strings.Join(s, ", "))
}

// judgeKeying turns a tally into the check: worker says whether the
// workers own the hour counts (--hour-counts worker).
func judgeKeying(k keying, worker bool) Check {
	switch {
	case k.read == 0 && k.partial:
		return check(Warn, "keying", "no record of the latest read within --timeout").because(
			"The check reads them to see how producers key events (--hour-counts worker needs every record keyed by its workspace id); " +
				"check that the Kafka user may read the topic, or give a longer --timeout.")
	case k.events == 0:
		return check(OK, "keying", "no event among the latest %d record(s) to judge how they are keyed", k.read).because(
			"--hour-counts worker needs every record keyed by its workspace id.")
	}
	split, example := k.split()
	var found, examples []string
	if k.unkeyed > 0 {
		found = append(found, fmt.Sprintf("%d not keyed by workspace id", k.unkeyed))
		examples = append(examples, fmt.Sprintf("key %q for workspace %q", k.example[0], k.example[1]))
	}
	if split > 0 {
		found = append(found, fmt.Sprintf("%d workspace(s) in 2+ partitions", split))
		examples = append(examples, "workspace "+example)
	}
	switch {
	case len(found) == 0:
		return check(OK, "keying", "the latest %d events are keyed by their workspace id, each workspace in one partition", k.events).because(
			"As --hour-counts worker needs: one partition, so one worker, owns each workspace's hour counts.")
	case worker:
		return check(Fail, "keying", "latest %d events: %s", k.events, strings.Join(found, ", ")).because(
			"For example %s. --hour-counts worker needs every record keyed by its workspace id (the Kafka key) and the "+
				"partition count unchanged: the workers send other records to the dead letters as misrouted (produced again keyed "+
				"by workspace, they count), and a workspace in two partitions has two owners. Fix the producers, or run every "+
				"worker and scheduler with --hour-counts redis, which takes records keyed any way (docs/owned-hour.md).",
			strings.Join(examples, "; "))
	}
	return check(OK, "keying", "latest %d events: %s: not for --hour-counts worker", k.events, strings.Join(found, ", ")).because(
		"For example %s. --hour-counts redis (this deployment) takes records keyed any way; --hour-counts worker would send "+
			"records not keyed by their workspace id to the dead letters as misrouted, and give a workspace in two partitions "+
			"two owners. Key every record by its workspace id before switching.", strings.Join(examples, "; "))
}
