package serve

import (
	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the server's Prometheus series, on a registry of its own (two
// servers in one process do not share counters).
type metrics struct {
	reg          *prometheus.Registry
	requests     *prometheus.CounterVec
	promptTok    prometheus.Counter
	cachedTok    prometheus.Counter
	completion   prometheus.Counter
	queue        prometheus.Gauge
	active       prometheus.Gauge
	steps        prometheus.Counter
	batch        prometheus.Histogram
	batchMax     prometheus.Gauge
	ttft         prometheus.Histogram
	tokenLatency prometheus.Histogram
	cancelled    prometheus.Counter
}

func newMetrics(parallel int) *metrics {
	latency := prometheus.ExponentialBuckets(0.001, 2, 16) // 1 ms … 33 s
	batch := make([]float64, 0, parallel)
	for i := 1; i <= parallel; i++ {
		batch = append(batch, float64(i))
	}
	m := &metrics{
		reg: prometheus.NewRegistry(),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "apr_serve_requests_total",
			Help: "HTTP requests answered, by route and status code."}, []string{"route", "code"}),
		promptTok: prometheus.NewCounter(prometheus.CounterOpts{Name: "apr_serve_prompt_tokens_total",
			Help: "Prompt tokens of admitted requests (cached ones included)."}),
		cachedTok: prometheus.NewCounter(prometheus.CounterOpts{Name: "apr_serve_cached_prompt_tokens_total",
			Help: "Prompt tokens taken from a slot's cache instead of being prefilled."}),
		completion: prometheus.NewCounter(prometheus.CounterOpts{Name: "apr_serve_completion_tokens_total",
			Help: "Tokens generated."}),
		queue: prometheus.NewGauge(prometheus.GaugeOpts{Name: "apr_serve_queue_depth",
			Help: "Requests waiting for a slot."}),
		active: prometheus.NewGauge(prometheus.GaugeOpts{Name: "apr_serve_active_sequences",
			Help: "Sequences holding a slot."}),
		steps: prometheus.NewCounter(prometheus.CounterOpts{Name: "apr_serve_steps_total",
			Help: "Scheduler steps (each advances every active sequence by one forward pass)."}),
		batch: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "apr_serve_batch_size",
			Help: "Sequences advanced per scheduler step.", Buckets: batch}),
		batchMax: prometheus.NewGauge(prometheus.GaugeOpts{Name: "apr_serve_batch_size_max",
			Help: "The most sequences one scheduler step advanced since start."}),
		ttft: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "apr_serve_time_to_first_token_seconds",
			Help: "From a request's admission to the queue to its first sampled token.", Buckets: latency}),
		tokenLatency: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "apr_serve_token_latency_seconds",
			Help: "Between consecutive sampled tokens of one sequence.", Buckets: latency}),
		cancelled: prometheus.NewCounter(prometheus.CounterOpts{Name: "apr_serve_cancelled_total",
			Help: "Sequences stopped because their client went away or the server shut down."}),
	}
	m.reg.MustRegister(m.requests, m.promptTok, m.cachedTok, m.completion, m.queue, m.active, m.steps,
		m.batch, m.batchMax, m.ttft, m.tokenLatency, m.cancelled)
	return m
}
