package main

import (
	"github.com/blockrpc/blockrpc/backend/upstream"
	"github.com/prometheus/client_golang/prometheus"
)

// followerMetrics is the progress of -follow's follower in /metrics: the
// one thing /readyz does not tell, whether the chain served still follows
// its network. A follower that cannot go on (its endpoint down, or serving
// a branch that leaves a block it gave as finalized) leaves the server
// serving, and ready, what it holds.
type followerMetrics struct{ f *upstream.Follower }

var (
	followerHeight = prometheus.NewDesc("blockrpc_follower_height",
		"The number of the latest block the follower has written into the store (0 while it is empty).", nil, nil)
	followerEndpointHead = prometheus.NewDesc("blockrpc_follower_endpoint_head",
		"The number of the endpoint's latest block, as the follower last polled it.", nil, nil)
	followerSynced = prometheus.NewDesc("blockrpc_follower_synced",
		"1 when the store held the endpoint's latest block, canonical, at the follower's last poll; 0 otherwise.", nil, nil)
	followerRate = prometheus.NewDesc("blockrpc_follower_blocks_per_second",
		"Blocks the follower wrote a second, over about the last 10 seconds.", nil, nil)
)

func (m followerMetrics) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{followerHeight, followerEndpointHead, followerSynced, followerRate} {
		ch <- d
	}
}

// Collect reads the progress once, so that the metrics of one scrape
// agree with each other.
func (m followerMetrics) Collect(ch chan<- prometheus.Metric) {
	p := m.f.Progress()
	synced := 0.0
	if p.Synced {
		synced = 1
	}
	for _, v := range []struct {
		d *prometheus.Desc
		v float64
	}{{followerHeight, float64(p.Height)}, {followerEndpointHead, float64(p.Head)}, {followerSynced, synced}, {followerRate, p.BlocksPerSecond}} {
		ch <- prometheus.MustNewConstMetric(v.d, prometheus.GaugeValue, v.v)
	}
}
