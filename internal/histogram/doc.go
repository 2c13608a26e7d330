// Package histogram records durations in log-linear buckets, the layout of
// an HDR histogram: every power of two is split into equal slices, so a
// recorded value is known to within 1% whatever its magnitude, in a fixed
// few tens of KiB, and a percentile costs one pass over the buckets.
//
// The load generator keeps one per connection and merges them; the store
// keeps one of its group commits' durations. A histogram is not safe for
// concurrent use: its owner serializes access (one goroutine, or a lock)
// and hands out copies (Clone). Since turns two copies taken at the start
// and the end of a window into the histogram of that window alone.
package histogram
