// Package doctor checks a topk deployment's Redis and Kafka and reports each
// finding in one short line an SRE can act on, with a longer explanation
// behind it (`topk doctor`, `--verbose`).
//
// Every check has a level: ok, warn (works, but something will hurt: a
// restart loses data, a lag grows, a check could not be made) or fail (topk
// is broken or will silently lose counts). Checks never write to Redis or
// Kafka: they read INFO, CONFIG GET, SCRIPT EXISTS, COMMAND INFO and the
// scheduler's beat key, and Kafka metadata, offsets and group descriptions.
package doctor

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/redis/rueidis"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/topk-dev/topk/lua"
	"github.com/topk-dev/topk/pkg/kafka"
	"github.com/topk-dev/topk/pkg/keys"
	"github.com/topk-dev/topk/pkg/store"
	"github.com/topk-dev/topk/pkg/window"
)

// Level is how bad a finding is.
type Level string

// Levels, from good to bad.
const (
	OK   Level = "ok"
	Warn Level = "warn"
	Fail Level = "fail"
)

// Check is one finding: Message is one short line, what was found and, when
// something is wrong, what to do; Detail explains why it matters and how,
// in as many words as that takes.
type Check struct {
	Level   Level  `json:"level"`
	Name    string `json:"check"`
	Message string `json:"message"`
	Detail  string `json:"detail,omitempty"`
}

// Failed reports whether any check failed.
func Failed(checks []Check) bool {
	for _, c := range checks {
		if c.Level == Fail {
			return true
		}
	}
	return false
}

// WriteText prints one line per check: `ok|warn|fail  <check>: <message>`,
// and with verbose each check's Detail under it, indented and wrapped.
func WriteText(w io.Writer, checks []Check, verbose bool) error {
	for _, c := range checks {
		if _, err := fmt.Fprintf(w, "%-4s  %s: %s\n", c.Level, c.Name, c.Message); err != nil {
			return err
		}
		if !verbose || c.Detail == "" {
			continue
		}
		for _, line := range wrap(c.Detail, 90) {
			if _, err := fmt.Fprintf(w, "      %s\n", line); err != nil {
				return err
			}
		}
	}
	return nil
}

// wrap breaks s into lines of at most width bytes, at spaces (a longer
// word gets a line of its own).
func wrap(s string, width int) []string {
	var lines []string
	line := ""
	for _, word := range strings.Fields(s) {
		if line != "" && len(line)+1+len(word) > width {
			lines = append(lines, line)
			line = ""
		}
		if line != "" {
			line += " "
		}
		line += word
	}
	if line != "" {
		lines = append(lines, line)
	}
	return lines
}

// check is a finding whose message is format with args; because adds its
// explanation.
func check(level Level, name, format string, args ...any) Check {
	return Check{Level: level, Name: name, Message: fmt.Sprintf(format, args...)}
}

// because sets the check's Detail.
func (c Check) because(format string, args ...any) Check {
	c.Detail = fmt.Sprintf(format, args...)
	return c
}

// DefaultTimeout bounds each step of the checks (a dial, a round of
// commands, a Kafka request).
const DefaultTimeout = 5 * time.Second

// MinRedisVersion is the oldest Redis topk's scripts run on: they call
// EXPIREAT with NX/GT and EXPIRETIME, both new in Redis 7.0.
var MinRedisVersion = [3]int{7, 0, 0}

// RedisOptions configures CheckRedis.
type RedisOptions struct {
	// Client is how to connect: InitAddress, credentials, TLS. Its timeouts
	// are replaced by Timeout and its retries turned off.
	Client rueidis.ClientOption
	// Prefix is the key prefix (for the scheduler's beat key).
	Prefix string
	// Timeout bounds the dial and each round of commands (DefaultTimeout).
	Timeout time.Duration
}

// CheckRedis connects to Redis and checks every node it finds: reachable and
// its version, RedisBloom, the embedded scripts, persistence and the
// eviction policy; then whether a scheduler is refreshing the rankings; and
// through sentinels, the topology and the commit guard (sentinel.go).
func CheckRedis(ctx context.Context, o RedisOptions) []Check {
	if o.Timeout <= 0 {
		o.Timeout = DefaultTimeout
	}
	if o.Prefix == "" {
		o.Prefix = keys.DefaultPrefix
	}
	addrs := strings.Join(o.Client.InitAddress, ",")
	opt := o.Client
	opt.DisableCache = true
	opt.DisableRetry = true
	opt.Dialer.Timeout = o.Timeout
	opt.ConnWriteTimeout = o.Timeout
	client, err := rueidis.NewClient(opt)
	if err != nil {
		return []Check{check(Fail, "redis "+addrs, "cannot reach Redis: %v", err).because(
			"Check --redis (host:port, comma-separated), that redis-server runs and listens there, " +
				"the network path, and --redis-tls* / --redis-user / --redis-password if the server needs them; " +
				"workers and the scheduler cannot run without it.")}
	}
	defer client.Close()

	nodes := client.Nodes()
	names := make([]string, 0, len(nodes))
	for a := range nodes {
		names = append(names, a)
	}
	sort.Strings(names)
	mode := "standalone"
	switch client.Mode() {
	case rueidis.ClientModeCluster:
		mode = fmt.Sprintf("Redis Cluster, %d nodes known", len(names))
	case rueidis.ClientModeSentinel:
		mode = "Sentinel master " + o.Client.Sentinel.MasterSet
	}

	var out, blooms []Check
	bloomOn := map[string]bool{}
	for _, addr := range names {
		n := nodeReport(ctx, o.Timeout, addr, nodes[addr], mode)
		out = append(out, n.checks...)
		if n.bloomErr != nil {
			blooms = append(blooms, check(Warn, "redisbloom", "cannot tell whether RedisBloom is loaded on %s: %v", addr, n.bloomErr).because(
				"COMMAND INFO TOPK.RESERVE failed; the user needs +command|info, which the worker ACL has."))
		} else if n.reachable {
			bloomOn[addr] = n.bloom
		}
	}
	out = append(out, bloomCheck(bloomOn, blooms)...)
	out = append(out, beatCheck(ctx, o.Timeout, client, o.Prefix), longBeatCheck(ctx, o.Timeout, client, o.Prefix))
	if o.Client.Sentinel.MasterSet != "" {
		out = append(out, sentinelChecks(ctx, o, client)...)
	}
	return out
}

// node is what nodeReport found on one node.
type node struct {
	checks    []Check
	reachable bool
	bloom     bool
	bloomErr  error
}

// nodeReport checks one node: reachability and version, scripts,
// persistence and memory. RedisBloom is summarised by the caller.
func nodeReport(ctx context.Context, timeout time.Duration, addr string, c rueidis.Client, mode string) node {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var n node
	if err := c.Do(ctx, c.B().Ping().Build()).Error(); err != nil {
		n.checks = append(n.checks, check(Fail, "redis "+addr, "does not answer PING: %v", err).because(
			"Start it or fix the address; its scripts, persistence and memory were not checked."))
		return n
	}
	n.reachable = true

	rs := c.DoMulti(ctx,
		c.B().Info().Section("server").Build(),
		c.B().Info().Section("replication").Build(),
		c.B().Info().Section("persistence").Build(),
		c.B().Info().Section("memory").Build(),
	)
	sections := make([]map[string]string, len(rs))
	errs := make([]error, len(rs))
	for i, r := range rs {
		s, err := r.ToString()
		sections[i], errs[i] = parseInfo(s), err
	}
	role := sections[1]["role"]
	if role == "slave" {
		role = "replica"
	}
	n.checks = append(n.checks, versionCheck(addr, sections[0], errs[0], role, mode))
	n.checks = append(n.checks, scriptsCheck(ctx, addr, c, role))
	n.checks = append(n.checks, persistenceCheck(ctx, addr, c, sections[2], errs[2]))
	n.checks = append(n.checks, memoryCheck(addr, sections[3], errs[3]))

	backend, err := store.DetectGlobalBackend(ctx, c)
	n.bloom, n.bloomErr = backend == store.BackendRedisBloom, err
	return n
}

// parseInfo reads the `field:value` lines of an INFO reply.
func parseInfo(s string) map[string]string {
	m := map[string]string{}
	for _, line := range strings.Split(s, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || line[0] == '#' {
			continue
		}
		if k, v, ok := strings.Cut(line, ":"); ok {
			m[k] = v
		}
	}
	return m
}

// parseVersion reads "7.0.15" (missing parts are 0).
func parseVersion(s string) ([3]int, bool) {
	var v [3]int
	parts := strings.SplitN(s, ".", 3)
	for i, p := range parts {
		n, err := strconv.Atoi(p)
		if err != nil {
			return v, false
		}
		v[i] = n
	}
	return v, s != ""
}

func versionLess(a, b [3]int) bool {
	for i := range a {
		if a[i] != b[i] {
			return a[i] < b[i]
		}
	}
	return false
}

func versionCheck(addr string, info map[string]string, err error, role, mode string) Check {
	name := "redis " + addr
	if err != nil {
		return check(Warn, name, "answers PING, but INFO is refused: %v", err).because(
			"Run doctor as a user allowed +info, +config|get, +script|exists and +command|info (an admin user), " +
				"or the version, persistence and memory checks cannot be made.")
	}
	ver := info["redis_version"]
	where := mode
	if role != "" {
		where = role + ", " + mode
	}
	v, ok := parseVersion(ver)
	switch {
	case !ok:
		return check(Warn, name, "answers, but reports no version it can read (redis_version %q)", ver).because(
			"topk needs Redis 7.0 or later.")
	case versionLess(v, MinRedisVersion):
		return check(Fail, name, "Redis %s (%s) is too old: upgrade this node to Redis 7.0 or later", ver, where).because(
			"topk's scripts call EXPIREAT with NX/GT and EXPIRETIME, new in Redis 7.0, " +
				"so every ingest flush and refresh would fail with an error.")
	}
	return check(OK, name, "answers; Redis %s (%s)", ver, where)
}

// scriptsCheck asks SCRIPT EXISTS for the SHA1 of every embedded script.
func scriptsCheck(ctx context.Context, addr string, c rueidis.Client, role string) Check {
	name := "scripts " + addr
	all := lua.All()
	shas := make([]string, len(all))
	for i, s := range all {
		shas[i] = s.SHA1
	}
	found, err := c.Do(ctx, c.B().ScriptExists().Sha1(shas...).Build()).AsIntSlice()
	if err != nil || len(found) != len(all) {
		if err == nil {
			err = fmt.Errorf("%d answers for %d scripts", len(found), len(all))
		}
		return check(Warn, name, "cannot tell whether the scripts are loaded: %v", err).because(
			"SCRIPT EXISTS failed; the user needs +script|exists.")
	}
	var missing []string
	for i, f := range found {
		if f == 0 {
			missing = append(missing, fmt.Sprintf("%s (%s)", all[i].Name, all[i].SHA1[:12]))
		}
	}
	if len(missing) == 0 {
		return check(OK, name, "all %d embedded scripts are loaded", len(all)).because(
			"Under this binary's SHA1s (topk scripts list).")
	}
	// A warning, on masters too: nothing is broken (see the message), only
	// the first calls of each missing script are slower. Failing here made
	// a healthy pipeline that had not run every script yet exit 1.
	where := ""
	if role == "replica" {
		where = " on this replica (needed once it is promoted)"
	}
	return check(Warn, name, "%d of %d embedded scripts are not loaded%s: run topk scripts load --redis %s", len(missing), len(all), where, addr).because(
		"Not loaded under this binary's SHA1s (topk scripts list): %s. "+
			"Never loaded, or a restart, failover or SCRIPT FLUSH emptied the script cache, or only another topk version's were loaded; "+
			"topk scripts load loads every node. Meanwhile workers and scheduler still work: a call gets NOSCRIPT "+
			"from EVALSHA and rueidis resends it as EVAL with the whole source, which caches the script again, so the first calls "+
			"of each missing script on each node are slower (one more round trip, carrying the script; the user needs +eval).",
		strings.Join(missing, ", "))
}

// persistenceCheck warns when a restart would lose everything.
func persistenceCheck(ctx context.Context, addr string, c rueidis.Client, info map[string]string, infoErr error) Check {
	name := "persistence " + addr
	const lost = "a restart of this node loses every counter, fence and cached ranking. topk rebuild recounts the last hour " +
		"(--since 65m) from the events topic; the 24h, 7d, 30d and all-time windows, the global summaries older than that " +
		"and user-activity counts are not recovered"
	aof := info["aof_enabled"] == "1"
	var problems, why []string // short, and their explanations
	if infoErr == nil {
		if s := info["rdb_last_bgsave_status"]; s != "" && s != "ok" {
			problems = append(problems, "the last RDB snapshot failed")
			why = append(why, "rdb_last_bgsave_status:"+s+": check the Redis log (disk full, permissions?)")
		}
		if s := info["aof_last_write_status"]; aof && s != "" && s != "ok" {
			problems = append(problems, "the last AOF write failed")
			why = append(why, "aof_last_write_status:"+s+": check the Redis log")
		}
	}
	save, err := c.Do(ctx, c.B().ConfigGet().Parameter("save").Build()).AsStrMap()
	if err != nil {
		if aof && len(problems) == 0 {
			return check(OK, name, "AOF is on (appendonly yes); the RDB schedule is unknown").because("CONFIG GET save refused: %v.", err)
		}
		if infoErr != nil {
			return check(Warn, name, "cannot tell whether AOF or RDB snapshots are on").because(
				"INFO persistence: %v; CONFIG GET save: %v. Run doctor as a user allowed +info and +config|get.", infoErr, err)
		}
		return check(Warn, name, "cannot tell whether RDB snapshots are scheduled (CONFIG GET save refused); AOF is %s", onOff(aof)).because(
			"CONFIG GET save: %v. %s.", err, strings.Join(append(why, "If neither is on, "+lost), "; "))
	}
	schedule := strings.TrimSpace(save["save"])
	if infoErr != nil {
		// CONFIG GET appendonly stands in for INFO persistence.
		ao, err := c.Do(ctx, c.B().ConfigGet().Parameter("appendonly").Build()).AsStrMap()
		aof = err == nil && ao["appendonly"] == "yes"
	}
	if !aof && schedule == "" {
		return check(Warn, name, "neither AOF nor RDB snapshots are on: a restart loses the counts").because(
			"appendonly no, save \"\": %s. Turn on appendonly yes (appendfsync everysec) or a save schedule, then CONFIG REWRITE.", lost)
	}
	var on []string
	if aof {
		on = append(on, "AOF (appendonly yes)")
	}
	if schedule != "" {
		on = append(on, fmt.Sprintf("RDB snapshots (save %q)", schedule))
	}
	if len(problems) > 0 {
		return check(Warn, name, "%s on, but %s", strings.Join(on, " and "), strings.Join(problems, " and ")).because("%s.", strings.Join(why, "; "))
	}
	if !aof {
		return check(OK, name, "%s on: a restart reloads the counters as of the last snapshot", strings.Join(on, " and ")).because(
			"What came after the last snapshot is lost (topk rebuild recounts the last hour from Kafka).")
	}
	return check(OK, name, "%s on: a restart reloads the counters", strings.Join(on, " and "))
}

func onOff(b bool) string {
	if b {
		return "on"
	}
	return "off"
}

// memoryCheck judges maxmemory-policy. Counting keys (minute, hour and day
// buckets, running window sums, fences, global summaries, user-activity
// hashes) all carry a TTL, so a volatile-* policy evicts them as readily as
// an allkeys-* one; keys without a TTL are the workspace index and dirty
// set, rollup watermarks and all-time summaries.
func memoryCheck(addr string, info map[string]string, err error) Check {
	name := "memory " + addr
	if err != nil {
		return check(Warn, name, "cannot read maxmemory-policy: %v", err).because("INFO memory failed; run doctor as a user allowed +info.")
	}
	policy := info["maxmemory_policy"]
	maxmem, _ := strconv.ParseInt(info["maxmemory"], 10, 64)
	used, _ := strconv.ParseInt(info["used_memory"], 10, 64)
	// used is the message's; usage the detail's, in INFO's terms.
	usage := fmt.Sprintf("used_memory %s, maxmemory %s", human(used), human(maxmem))
	usedOf := fmt.Sprintf("used %s of %s", human(used), human(maxmem))
	if maxmem == 0 {
		usage = fmt.Sprintf("used_memory %s, maxmemory 0 (no limit)", human(used))
		usedOf = fmt.Sprintf("used %s, no maxmemory", human(used))
	}
	var evicts string
	switch {
	case strings.HasPrefix(policy, "allkeys-"):
		evicts = "evicts any key once used_memory reaches maxmemory"
	case strings.HasPrefix(policy, "volatile-"):
		evicts = "evicts keys that have a TTL once used_memory reaches maxmemory, and every topk counting key has one " +
			"(minute, hour and day buckets, running window sums, fences, global summaries, user-activity counts; only the " +
			"workspace index, the dirty set, rollup watermarks and all-time summaries have none)"
	case policy == "noeviction":
		if maxmem > 0 && used*10 >= maxmem*9 {
			return check(Warn, name, "maxmemory-policy noeviction, %s: over 90%% of the limit", usedOf).because(
				"%s. At the limit writes fail with OOM; workers retry and commit nothing, so events wait in Kafka and lag grows. "+
					"Raise maxmemory, add memory or shard (Redis Cluster).", usage)
		}
		if maxmem == 0 {
			return check(OK, name, "maxmemory-policy noeviction, %s", usedOf).because(
				"%s: nothing is ever evicted; watch used_memory against the host's RAM.", usage)
		}
		return check(OK, name, "maxmemory-policy noeviction, %s", usedOf).because(
			"%s: nothing is evicted; at the limit writes fail with OOM, workers retry and commit nothing, so events wait in Kafka (no count is lost).", usage)
	default:
		return check(Warn, name, "unknown maxmemory-policy %q (%s): set noeviction", policy, usedOf).because(
			"%s: topk needs noeviction so that no counter is evicted.", usage)
	}
	harm := "counts silently vanish from the rankings, and an evicted fence lets a replayed batch count twice. " +
		"Set maxmemory-policy noeviction (CONFIG SET maxmemory-policy noeviction, then CONFIG REWRITE) and size maxmemory for the data."
	if maxmem == 0 {
		return check(Warn, name, "maxmemory-policy %s evicts counts once a limit is set (%s): set noeviction", policy, usedOf).because(
			"%s: nothing is evicted while there is no limit, but once maxmemory is set this policy %s: %s", usage, evicts, harm)
	}
	return check(Fail, name, "maxmemory-policy %s evicts counts (%s): set noeviction", policy, usedOf).because(
		"%s: this policy %s: %s", usage, evicts, harm)
}

func human(b int64) string {
	const unit = 1024
	if b < unit {
		return fmt.Sprintf("%d B", b)
	}
	div, exp := int64(unit), 0
	for n := b / unit; n >= unit; n /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(b)/float64(div), "KMGTPE"[exp])
}

// bloomCheck says which global backend --global-backend auto picks, from
// every reachable node's answer (store.DetectGlobalBackend asks one).
func bloomCheck(on map[string]bool, errs []Check) []Check {
	if len(on) == 0 {
		return errs
	}
	var with, without []string
	for a, b := range on {
		if b {
			with = append(with, a)
		} else {
			without = append(without, a)
		}
	}
	sort.Strings(with)
	sort.Strings(without)
	switch {
	case len(with) > 0 && len(without) > 0:
		errs = append(errs, check(Fail, "redisbloom", "loaded on %s but not on %s: load it everywhere, or set --global-backend",
			strings.Join(with, ", "), strings.Join(without, ", ")).because(
			"--global-backend auto asks one node, so workers and schedulers may pick different backends for the same global view. "+
				"Load RedisBloom on every node, or set --global-backend lua (or redisbloom) explicitly everywhere."))
	case len(with) > 0:
		errs = append(errs, check(OK, "redisbloom", "loaded: --global-backend auto uses RedisBloom (global view: the hour only, no error bounds)").because(
			"TOPK.RESERVE is known, so --global-backend auto uses RedisBloom TOPK summaries: the global view has the hour window only "+
				"and no error bounds (--global-backend lua keeps every window with bounds); a worker ACL needs +topk.reserve +topk.incrby +topk.list."))
	default:
		errs = append(errs, check(OK, "redisbloom", "not loaded: --global-backend auto uses the Lua summaries (every window, with error bounds)").because(
			"COMMAND INFO TOPK.RESERVE knows no such command, so the global view uses the Lua Space-Saving summaries."))
	}
	return errs
}

// beatCheck reads when the scheduler last completed a pass over the hour.
func beatCheck(ctx context.Context, timeout time.Duration, c rueidis.Client, prefix string) Check {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	key := keys.New(prefix).Beat(keys.Window1h)
	ms, err := c.Do(ctx, c.B().Get().Key(key).Build()).AsInt64()
	stale := window.StaleAfterFor(keys.Window1h)
	switch {
	case rueidis.IsRedisNil(err):
		return check(Warn, "scheduler", "no scheduler has completed a pass on this Redis: run topk schedule").because(
			"%s is absent (--prefix %q): the cached rankings are not computed. One scheduler is enough.", key, prefix)
	case err != nil:
		return check(Warn, "scheduler", "cannot read %s: %v", key, err)
	}
	age := time.Since(time.UnixMilli(ms)).Round(100 * time.Millisecond)
	if age > stale {
		return check(Warn, "scheduler", "the last pass over the hour window ended %s ago: the rankings are not being refreshed", age).because(
			"Stale after %s. Check that topk schedule runs, and its logs (it cannot reach Redis?).", stale)
	}
	return check(OK, "scheduler", "the last pass over the hour window ended %s ago", age).because("Stale after %s.", stale)
}

// longBeatCheck reads when the scheduler last completed a pass over each
// long window. A window's beat moves only when every workspace's ranking of
// it is current, so a stale one also shows a workspace whose long-window
// sums wait for an hour that does not close (its rollups stopped). A
// window with no beat at all is left out: the scheduler may run without it
// (a cadence of 0), or has not completed its first pass yet.
func longBeatCheck(ctx context.Context, timeout time.Duration, c rueidis.Client, prefix string) Check {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	ks := keys.New(prefix)
	var fresh, stale []string
	for _, w := range window.Longs {
		key := ks.Beat(w.Name)
		ms, err := c.Do(ctx, c.B().Get().Key(key).Build()).AsInt64()
		switch {
		case rueidis.IsRedisNil(err):
			continue
		case err != nil:
			return check(Warn, "long windows", "cannot read %s: %v", key, err)
		}
		age, after := time.Since(time.UnixMilli(ms)).Round(time.Second), window.StaleAfterFor(w.Name)
		if age > after {
			stale = append(stale, fmt.Sprintf("%s %s ago (stale after %s)", w.Name, age, after))
		} else {
			fresh = append(fresh, fmt.Sprintf("%s %s ago", w.Name, age))
		}
	}
	switch {
	case len(stale) > 0:
		return check(Warn, "long windows", "the last complete pass over %s: their rankings are not all current", strings.Join(stale, ", ")).because(
			"Check topk schedule's logs: a failing long-window or rollup loop, or a workspace whose sums wait for an hour that its rollups never close (topk_scheduler_tick_failures_total).")
	case len(fresh) == 0:
		return check(OK, "long windows", "no complete pass recorded (the scheduler runs without them, or has not completed one yet)")
	}
	return check(OK, "long windows", "the last complete passes: %s", strings.Join(fresh, ", "))
}

// KafkaOptions configures CheckKafka.
type KafkaOptions struct {
	Config kafka.Config // brokers (none: skip), TLS, SASL
	// Topic and DLQTopic are the events topic and its dead-letter topic
	// (default Topic + kafka.DLQSuffix); Group consumes Topic.
	Topic, DLQTopic, Group string
	// ActivityTopic is the user activity topic (empty: not checked), its
	// dead-letter topics and consumer groups.
	ActivityTopic     string
	ActivityDLQTopics []string
	ActivityGroups    []string
	// MaxLag is the lag, in records, above which a group is a warning.
	MaxLag int64
	// WorkerHourCounts says the workers own the hour counts (--hour-counts
	// worker): events not keyed by their workspace id then fail the keying
	// check (keying.go), which reads KeyingSample of the events topic's
	// latest records (0: DefaultKeyingSample; negative: no check).
	WorkerHourCounts bool
	KeyingSample     int
	// Timeout bounds each Kafka request round (DefaultTimeout).
	Timeout time.Duration
}

// CheckKafka checks the brokers, the topics, how the latest events are keyed
// (keying.go) and the consumer groups' lag.
func CheckKafka(ctx context.Context, o KafkaOptions) []Check {
	if len(o.Config.Brokers) == 0 {
		return []Check{check(Warn, "kafka", "skipped: --brokers is empty").because(
			"The topics, dead-letter topics and consumer-group lag were not checked.")}
	}
	if o.Timeout <= 0 {
		o.Timeout = DefaultTimeout
	}
	if o.DLQTopic == "" {
		o.DLQTopic = o.Topic + kafka.DLQSuffix
	}
	seeds := strings.Join(o.Config.Brokers, ",")
	cl, err := kafka.NewClient(o.Config, timeouts(o.Timeout)...)
	if err != nil {
		return []Check{check(Fail, "kafka "+seeds, "%v", err)}
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)

	step, cancel := context.WithTimeout(ctx, o.Timeout)
	meta, err := adm.BrokerMetadata(step)
	cancel()
	if err != nil {
		return []Check{check(Fail, "kafka "+seeds, "cannot reach the seed brokers within %s: %v", o.Timeout, err).because(
			"Check --brokers, that Kafka runs and this host can reach it, and --kafka-tls* / --kafka-sasl-* if the brokers need them; " +
				"topics and consumer groups were not checked.")}
	}
	out := []Check{check(OK, "kafka "+seeds, "the seed brokers answer: %d broker(s) in the cluster (%s)", len(meta.Brokers), brokerList(meta.Brokers))}

	topics := []string{o.Topic, o.DLQTopic}
	if o.ActivityTopic != "" {
		topics = append(topics, o.ActivityTopic)
		topics = append(topics, o.ActivityDLQTopics...)
	}
	step, cancel = context.WithTimeout(ctx, o.Timeout)
	details, err := adm.ListTopics(step, topics...)
	cancel()
	if err != nil {
		return append(out, check(Fail, "topics", "cannot list topics %s: %v", strings.Join(topics, ", "), err).because(
			"The Kafka user needs DESCRIBE on them."))
	}
	topicChecks, groups, parts := checkTopics(o, details)
	out = append(out, topicChecks...)
	if _, ok := parts[o.Group]; ok && o.KeyingSample >= 0 {
		if o.KeyingSample == 0 {
			o.KeyingSample = DefaultKeyingSample
		}
		out = append(out, keyingCheck(ctx, o, adm))
	}
	if len(groups) == 0 {
		return out
	}
	step, cancel = context.WithTimeout(ctx, o.Timeout)
	lags, err := adm.Lag(step, groups...)
	cancel()
	if err != nil {
		return append(out, check(Warn, "groups", "cannot read the lag of %s: %v", strings.Join(groups, ", "), err).because(
			"The Kafka user needs DESCRIBE on the groups."))
	}
	for _, g := range groups {
		out = append(out, groupCheck(g, lags[g], parts[g], o.MaxLag))
	}
	return out
}

// timeouts bound a doctor's Kafka client's dial, retries and requests by
// d, so that a silent broker fails a check in seconds.
func timeouts(d time.Duration) []kgo.Opt {
	return []kgo.Opt{kgo.DialTimeout(d), kgo.RetryTimeout(d), kgo.RequestTimeoutOverhead(d)}
}

// checkTopics checks the topics details lists (present, and how many
// partitions) and returns the consumer groups whose lag can be read, with
// the partitions of each group's topic.
func checkTopics(o KafkaOptions, details kadm.TopicDetails) (out []Check, groups []string, parts map[string]int) {
	present := func(t string) (int, error) {
		d, ok := details[t]
		if !ok {
			return 0, kerr.UnknownTopicOrPartition
		}
		return len(d.Partitions), d.Err
	}
	parts = map[string]int{}

	// The events topic and its DLQ.
	if n, err := present(o.Topic); err != nil {
		out = append(out, topicMissing(Fail, o.Topic, err, "workers have nothing to consume: create it",
			"It is the events topic. Create it with as many partitions as workers you want (one partition feeds one worker at a time)."))
	} else {
		out = append(out, check(OK, "topic "+o.Topic, "present, %d partition(s): at most %d ingest workers of a group do work", n, n))
		groups = append(groups, o.Group)
		parts[o.Group] = n
	}
	if n, err := present(o.DLQTopic); err != nil {
		out = append(out, topicMissing(Warn, o.DLQTopic, err, "no ingest worker has started here yet",
			"It is the dead-letter topic of "+o.Topic+": topk ingest creates it (1 partition) when it starts, so no worker has "+
				"started against this cluster, or the Kafka user may not create topics (then create it)."))
	} else {
		out = append(out, check(OK, "topic "+o.DLQTopic, "present, %d partition(s)", n).because(
			"Rejected events (invalid, late, too far ahead) go here."))
	}

	// User activity, optional.
	if o.ActivityTopic != "" {
		if n, err := present(o.ActivityTopic); err != nil {
			out = append(out, topicMissing(Warn, o.ActivityTopic, err, "user activity is not deployed here (ignore this if you do not use it)",
				fmt.Sprintf("It is the user activity topic; its dead-letter topics and groups %s were not checked. "+
					"To deploy user activity, create the topic and run topk activity ingest and archive (or run doctor with --activity-topic '').",
					strings.Join(o.ActivityGroups, ", "))))
		} else {
			out = append(out, check(OK, "topic "+o.ActivityTopic, "present, %d partition(s)", n))
			for _, g := range o.ActivityGroups {
				groups = append(groups, g)
				parts[g] = n
			}
			for _, t := range o.ActivityDLQTopics {
				if n, err := present(t); err != nil {
					out = append(out, topicMissing(Warn, t, err, "its consumer has not started here yet",
						"It is a dead-letter topic of "+o.ActivityTopic+": its consumer (topk activity ingest or archive) creates it "+
							"when it starts, so that consumer has not started here, or the Kafka user may not create topics."))
				} else {
					out = append(out, check(OK, "topic "+t, "present, %d partition(s)", n))
				}
			}
		}
	}
	return out, groups, parts
}

func brokerList(bs kadm.BrokerDetails) string {
	var s []string
	for _, b := range bs {
		s = append(s, fmt.Sprintf("%d at %s:%d", b.NodeID, b.Host, b.Port))
	}
	sort.Strings(s)
	return strings.Join(s, ", ")
}

// topicMissing is the check of a topic that is absent or cannot be
// described: short says what that means, detail explains.
func topicMissing(level Level, topic string, err error, short, detail string) Check {
	if errors.Is(err, kerr.UnknownTopicOrPartition) {
		return check(level, "topic "+topic, "absent: %s", short).because("%s", detail)
	}
	return check(level, "topic "+topic, "cannot be described: %v", err).because("If it is absent, %s. %s", short, detail)
}

// groupCheck judges one consumer group from its description and lag.
func groupCheck(g string, l kadm.DescribedGroupLag, partitions int, maxLag int64) Check {
	name := "group " + g
	if err := l.Error(); err != nil {
		if errors.Is(err, kerr.GroupIDNotFound) {
			return check(Warn, name, "does not exist: no worker of this group has run here").because(
				"No worker of this group has run against this cluster, or its offsets expired.")
		}
		return check(Warn, name, "cannot be described: %v", err).because("The Kafka user needs DESCRIBE on the group.")
	}
	var total, worst int64
	var worstAt string
	var errs []string
	counted := 0
	for _, p := range l.Lag.Sorted() {
		if p.Err != nil {
			errs = append(errs, fmt.Sprintf("%s/%d: %v", p.Topic, p.Partition, p.Err))
			continue
		}
		counted++
		total += p.Lag
		if p.Lag > worst {
			worst, worstAt = p.Lag, fmt.Sprintf("%s/%d", p.Topic, p.Partition)
		}
	}
	lag := fmt.Sprintf("lag %d records over %d partition(s)", total, counted)
	if worst > 0 {
		lag += fmt.Sprintf(" (most on %s: %d)", worstAt, worst)
	}
	state := fmt.Sprintf("state %s, %d member(s)", l.State, len(l.Members))
	switch {
	case l.State == "Dead" || (len(l.Members) == 0 && counted == 0):
		return check(Warn, name, "has no members and no committed offsets: start the workers").because(
			"%s: no worker of this group has run against this cluster, or its offsets expired.", state)
	case len(errs) > 0:
		return check(Warn, name, "%s, %s; the lag of some partitions is unknown", state, lag).because("%s.", strings.Join(errs, "; "))
	case len(l.Members) == 0:
		return check(Warn, name, "%s, %s: no worker is connected", state, lag).because(
			"Nothing is consumed and the lag grows with every event. Start the workers (or ignore this if they are meant to be stopped).")
	case maxLag > 0 && total > maxLag:
		return check(Warn, name, "%s, %s: more than --max-lag %d", state, lag, maxLag).because(
			"The workers are behind: check that Redis answers quickly (the flushes wait for it), then add workers, up to the %d partition(s).", partitions)
	}
	return check(OK, name, "%s, %s", state, lag)
}
