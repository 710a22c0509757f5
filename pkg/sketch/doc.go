// Package sketch holds bounded-memory summaries of weighted item streams:
// the structures behind topk's global (cross-workspace) view, where exact
// per-item counts would grow without bound.
//
// # Space-Saving
//
// SpaceSaving is the weighted Space-Saving summary of Metwally, Agrawal and
// El Abbadi ("Efficient Computation of Frequent and Top-k Elements in Data
// Streams", ICDT 2005). It monitors at most m items, each with a count and an
// error. After a stream of total weight N (Total), for every item x with
// true count f(x):
//
//   - a monitored x has Count >= f(x) and Count - Err <= f(x), so
//     [Count-Err, Count] always contains the true count;
//   - an unmonitored x has f(x) <= Min() (and Min() <= N/m);
//   - hence every x with f(x) > N/m is monitored;
//   - the counts of the monitored items sum to exactly N.
//
// GuaranteedTop reports when the first k entries are provably a true top-k
// set (the paper's QueryTop-k test).
//
// The update rule is a cross-language contract: a Lua implementation inside
// Redis must produce identical summaries from the same sequence of updates,
// so the tie-breaks are part of it (see SpaceSaving.Add and
// SpaceSaving.Entries). Both are the orders of a Redis sorted set whose
// score is the count: eviction takes ZRANGE key 0 0 (smallest count, then
// smallest member in byte order) and Entries lists ZREVRANGE key 0 -1
// (largest count, then largest member). Redis scores are float64, so the two
// sides agree exactly while counts stay below 2^53.
//
// # Count-Min Sketch
//
// CountMin is the Count-Min Sketch of Cormode and Muthukrishnan (J.
// Algorithms, 2005): depth rows of width counters; an item adds its weight to
// one counter per row and is estimated by the minimum of its counters. With
// width = ceil(e/ε) and depth = ceil(ln(1/δ)), every estimate is >= the true
// count, and exceeds it by more than ε·N with probability at most δ. The
// sketch does not know which items exist, so CMSTopK pairs it with a
// min-heap of the k items with the largest estimates seen so far. Both are a
// reference point for accuracy comparisons with SpaceSaving; hashing is
// deterministic for a given seed, so runs are reproducible.
//
// None of the types is safe for concurrent use.
package sketch
