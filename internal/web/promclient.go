package web

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// collector serves the job's metric families through Prometheus' client:
// every scrape reads the job's current metrics (collect) and turns them
// into constant metrics, so nothing is kept between scrapes.
type collector struct{ s *Server }

// Describe sends no descriptors: the collector is unchecked, because the
// vertices and subtasks that label the metrics are known only at scrape
// time.
func (collector) Describe(chan<- *prometheus.Desc) {}

func (c collector) Collect(ch chan<- prometheus.Metric) {
	emit(ch, c.s.collect(context.Background(), time.Now()))
}

// emit sends the families fams to ch as Prometheus' constant metrics.
func emit(ch chan<- prometheus.Metric, fams []family) {
	for _, f := range fams {
		if len(f.samples) == 0 {
			continue
		}
		switch f.typ {
		case typeSummary:
			collectSummary(ch, f)
		default:
			names := labelNames(f.samples[0].labels, "")
			desc := prometheus.NewDesc(f.name, f.help, names, nil)
			vt := prometheus.GaugeValue
			if f.typ == typeCounter {
				vt = prometheus.CounterValue
			}
			for _, s := range f.samples {
				m, err := prometheus.NewConstMetric(desc, vt, s.value, labelValues(s.labels, "")...)
				if err != nil {
					m = prometheus.NewInvalidMetric(desc, err)
				}
				ch <- m
			}
		}
	}
}

// collectSummary groups a summary family's samples by their labels
// (without quantile) into one summary each.
func collectSummary(ch chan<- prometheus.Metric, f family) {
	type acc struct {
		labels    []label
		quantiles map[float64]float64
		sum       float64
		count     uint64
		hasCount  bool
	}
	var order []string
	byKey := map[string]*acc{}
	for _, s := range f.samples {
		key := ""
		for _, l := range s.labels {
			if l.name != "quantile" {
				key += l.name + "=" + l.value + ","
			}
		}
		a, ok := byKey[key]
		if !ok {
			a = &acc{quantiles: map[float64]float64{}}
			for _, l := range s.labels {
				if l.name != "quantile" {
					a.labels = append(a.labels, l)
				}
			}
			byKey[key] = a
			order = append(order, key)
		}
		switch s.suffix {
		case "_sum":
			a.sum = s.value
		case "_count":
			a.count, a.hasCount = uint64(s.value), true
		default:
			for _, l := range s.labels {
				if l.name == "quantile" {
					var q float64
					if _, err := fmt.Sscan(l.value, &q); err == nil {
						a.quantiles[q] = s.value
					}
				}
			}
		}
	}
	for _, key := range order {
		a := byKey[key]
		desc := prometheus.NewDesc(f.name, f.help, labelNames(a.labels, ""), nil)
		m, err := prometheus.NewConstSummary(desc, a.count, a.sum, a.quantiles, labelValues(a.labels, "")...)
		if err != nil {
			m = prometheus.NewInvalidMetric(desc, err)
		}
		ch <- m
	}
}

func labelNames(ls []label, skip string) []string {
	var out []string
	for _, l := range ls {
		if l.name != skip {
			out = append(out, l.name)
		}
	}
	return out
}

func labelValues(ls []label, skip string) []string {
	var out []string
	for _, l := range ls {
		if l.name != skip {
			out = append(out, l.value)
		}
	}
	return out
}

// metricsHandler serves /metrics through promhttp.
func (s *Server) metricsHandler() http.Handler {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collector{s})
	return promhttp.HandlerFor(reg, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError})
}

// family is a metric family in Prometheus' data model, as collect builds
// it; collector hands it to Prometheus' client.
type family struct {
	name, help, typ string
	samples         []sample
}

// sample is one sample of a family: suffix is "" or, for a summary,
// "_sum" or "_count".
type sample struct {
	suffix string
	labels []label
	value  float64
}

type label struct{ name, value string }

// Metric types.
const (
	typeCounter = "counter"
	typeGauge   = "gauge"
	typeSummary = "summary"
)
