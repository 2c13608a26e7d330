package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/agentpay/guard/persistence"
)

// commitBuckets bound the journal's group commits: an fdatasync takes
// from tens of microseconds (a battery-backed cache) to tens of
// milliseconds (a busy or networked disk).
var commitBuckets = []time.Duration{
	100 * time.Microsecond, 250 * time.Microsecond, 500 * time.Microsecond,
	time.Millisecond, 2500 * time.Microsecond, 5 * time.Millisecond,
	10 * time.Millisecond, 25 * time.Millisecond, 50 * time.Millisecond,
	100 * time.Millisecond, 250 * time.Millisecond, time.Second,
}

// storeCollector reads the store's counters when scraped: the commit path
// keeps its own counters and histogram, and nothing is added to it.
type storeCollector struct {
	store *persistence.Store

	commits, records, failures, failedRecords *prometheus.Desc
	checkpoints, checkpointErrors             *prometheus.Desc
	lag, overlay, largestBatch                *prometheus.Desc
	commitDuration                            *prometheus.Desc
}

// WatchStore reports the store's journal and checkpoints.
func (m *Metrics) WatchStore(s *persistence.Store) {
	m.registry.MustRegister(&storeCollector{
		store:         s,
		commits:       prometheus.NewDesc("guard_journal_commits_total", "Group commits of the journal: one write and one fdatasync each.", nil, nil),
		records:       prometheus.NewDesc("guard_journal_records_total", "Records the group commits made durable (one per change of state).", nil, nil),
		failures:      prometheus.NewDesc("guard_journal_commit_failures_total", "Group commits that failed: their changes were refused (503) and nothing of them was told to anyone.", nil, nil),
		failedRecords: prometheus.NewDesc("guard_journal_failed_records_total", "Records refused by failed group commits.", nil, nil),
		checkpoints:   prometheus.NewDesc("guard_checkpoints_total", "Checkpoint steps: durable records folded from the journal into the data file.", nil, nil),
		checkpointErrors: prometheus.NewDesc("guard_checkpoint_failures_total",
			"Checkpoint steps that failed; their records stay durable in the journal and are folded later.", nil, nil),
		lag: prometheus.NewDesc("guard_checkpoint_lag_records",
			"Durable records not yet folded into the data file: what a restart replays. It grows without bound only when checkpoints fail.", nil, nil),
		overlay:      prometheus.NewDesc("guard_journal_overlay_entries", "Entries held in memory while they wait to be folded into the data file.", nil, nil),
		largestBatch: prometheus.NewDesc("guard_journal_largest_commit_records", "The largest group commit since start, in records.", nil, nil),
		commitDuration: prometheus.NewDesc("guard_journal_commit_duration_seconds",
			"Duration of each successful group commit (framing, write, fdatasync): how long the journal kept its batch's changes waiting. Bucket counts are exact to 1%.", nil, nil),
	})
}

func (c *storeCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.commits, c.records, c.failures, c.failedRecords, c.checkpoints,
		c.checkpointErrors, c.lag, c.overlay, c.largestBatch, c.commitDuration} {
		ch <- d
	}
}

func (c *storeCollector) Collect(ch chan<- prometheus.Metric) {
	st := c.store.Stats()
	counter := func(d *prometheus.Desc, v uint64) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v))
	}
	gauge := func(d *prometheus.Desc, v float64) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v)
	}
	counter(c.commits, st.Commits)
	counter(c.records, st.Records)
	counter(c.failures, st.Failures)
	counter(c.failedRecords, st.FailedRecords)
	counter(c.checkpoints, st.Checkpoints)
	counter(c.checkpointErrors, st.CheckpointErrors)
	gauge(c.lag, float64(st.Pending))
	gauge(c.overlay, float64(st.Overlay))
	gauge(c.largestBatch, float64(st.MaxBatch))

	h := c.store.CommitDurations()
	counts := h.AtMost(commitBuckets)
	buckets := make(map[float64]uint64, len(commitBuckets))
	for i, b := range commitBuckets {
		buckets[b.Seconds()] = counts[i]
	}
	ch <- prometheus.MustNewConstHistogram(c.commitDuration, h.Count(), h.Sum().Seconds(), buckets)
}
