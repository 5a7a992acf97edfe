//! The summary of a phase: totals, throughput and latency percentiles, as text and as
//! unit-suffixed JSON fields.
//!
//! JSON field names: `<prefix>latency_us_{min,mean,stddev,p50,p90,p99,p999,p9999,max}`,
//! `<prefix>messages_total`, `<prefix>requests_total`, `<prefix>bytes_total`,
//! `<prefix>errors_total`, `<prefix>elapsed_s`, `<prefix>throughput_msgs_per_s`,
//! `<prefix>throughput_mib_per_s`; the prefix is empty for the main phase (`send_` for the
//! sending side of an end-to-end run).

use std::time::Duration;

use hdrhistogram::Histogram;
use serde_json::{Map, Value};

use crate::stats::Counters;

/// Percentiles of one histogram, in microseconds.
#[derive(Clone, Debug, PartialEq)]
pub struct LatencySummary {
    /// Samples.
    pub count: u64,
    /// Smallest sample.
    pub min_us: u64,
    /// Mean.
    pub mean_us: f64,
    /// Standard deviation.
    pub stddev_us: f64,
    /// Median.
    pub p50_us: u64,
    /// 90th percentile.
    pub p90_us: u64,
    /// 99th percentile.
    pub p99_us: u64,
    /// 99.9th percentile.
    pub p999_us: u64,
    /// 99.99th percentile.
    pub p9999_us: u64,
    /// Largest sample.
    pub max_us: u64,
}

impl LatencySummary {
    /// Summarises `histogram`; all zero when it is empty.
    pub fn of(histogram: &Histogram<u64>) -> LatencySummary {
        if histogram.is_empty() {
            return LatencySummary {
                count: 0,
                min_us: 0,
                mean_us: 0.0,
                stddev_us: 0.0,
                p50_us: 0,
                p90_us: 0,
                p99_us: 0,
                p999_us: 0,
                p9999_us: 0,
                max_us: 0,
            };
        }
        let at = |quantile: f64| histogram.value_at_quantile(quantile);
        let summary = LatencySummary {
            count: histogram.len(),
            min_us: histogram.min(),
            mean_us: histogram.mean(),
            stddev_us: histogram.stdev(),
            p50_us: at(0.5),
            p90_us: at(0.9),
            p99_us: at(0.99),
            p999_us: at(0.999),
            p9999_us: at(0.9999),
            max_us: histogram.max(),
        };
        assert!(summary.min_us <= summary.p50_us && summary.p50_us <= summary.p90_us);
        assert!(summary.p99_us <= summary.p999_us && summary.p9999_us <= summary.max_us);
        summary
    }

    /// `p50 1.23 ms  p90 ...` on one line.
    pub fn text(&self) -> String {
        // The mean lies within the histogram's bounds (at most an hour in µs), so the cast
        // cannot truncate.
        #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
        let mean_us = self.mean_us.round() as u64;
        format!(
            "p50 {}  p90 {}  p99 {}  p99.9 {}  p99.99 {}  max {}  (mean {}, {} samples)",
            format_us(self.p50_us),
            format_us(self.p90_us),
            format_us(self.p99_us),
            format_us(self.p999_us),
            format_us(self.p9999_us),
            format_us(self.max_us),
            format_us(mean_us),
            self.count
        )
    }
}

/// A microsecond figure in the unit that reads best (µs below 1 ms, then ms, then s).
pub fn format_us(us: u64) -> String {
    if us < 1000 {
        format!("{us} µs")
    } else if us < 1_000_000 {
        format!("{:.2} ms", us as f64 / 1e3)
    } else {
        format!("{:.2} s", us as f64 / 1e6)
    }
}

/// The result of one phase of a run.
#[derive(Clone, Debug)]
pub struct PhaseSummary {
    /// `send`, `receive`.
    pub name: &'static str,
    /// Time the throughput is computed over.
    pub elapsed: Duration,
    /// Totals.
    pub counters: Counters,
    /// Latency percentiles.
    pub latency: LatencySummary,
    /// What the latency measures, for the text report.
    pub latency_meaning: &'static str,
    /// The first error, if any.
    pub first_error: Option<String>,
}

impl PhaseSummary {
    /// Successful messages per second.
    pub fn throughput_msgs_per_s(&self) -> f64 {
        per_second(self.counters.messages as f64, self.elapsed)
    }

    /// Body MiB per second.
    pub fn throughput_mib_per_s(&self) -> f64 {
        per_second(self.counters.bytes as f64 / (1024.0 * 1024.0), self.elapsed)
    }

    /// The summary as text lines.
    pub fn text(&self) -> String {
        let mut text = format!(
            "{}: {:.2} s, {} messages in {} requests, {:.1} MiB, {} errors\n  \
             throughput {:.1} msgs/s, {:.2} MiB/s\n  {} latency: {}\n",
            self.name,
            self.elapsed.as_secs_f64(),
            self.counters.messages,
            self.counters.requests,
            self.counters.bytes as f64 / (1024.0 * 1024.0),
            self.counters.errors,
            self.throughput_msgs_per_s(),
            self.throughput_mib_per_s(),
            self.latency_meaning,
            self.latency.text()
        );
        if let Some(error) = &self.first_error {
            text.push_str(&format!("  first error: {error}\n"));
        }
        text
    }

    /// The summary as JSON fields named with `prefix`.
    pub fn json_fields(&self, prefix: &str) -> Map<String, Value> {
        let latency = &self.latency;
        let mut fields = Map::new();
        let mut put = |name: &str, value: Value| {
            fields.insert(format!("{prefix}{name}"), value);
        };
        put("elapsed_s", self.elapsed.as_secs_f64().into());
        put("messages_total", self.counters.messages.into());
        put("requests_total", self.counters.requests.into());
        put("bytes_total", self.counters.bytes.into());
        put("errors_total", self.counters.errors.into());
        put("throughput_msgs_per_s", self.throughput_msgs_per_s().into());
        put("throughput_mib_per_s", self.throughput_mib_per_s().into());
        put("latency_samples_total", latency.count.into());
        put("latency_us_min", latency.min_us.into());
        put("latency_us_mean", latency.mean_us.into());
        put("latency_us_stddev", latency.stddev_us.into());
        put("latency_us_p50", latency.p50_us.into());
        put("latency_us_p90", latency.p90_us.into());
        put("latency_us_p99", latency.p99_us.into());
        put("latency_us_p999", latency.p999_us.into());
        put("latency_us_p9999", latency.p9999_us.into());
        put("latency_us_max", latency.max_us.into());
        put("first_error", self.first_error.clone().into());
        fields
    }
}

fn per_second(amount: f64, elapsed: Duration) -> f64 {
    let seconds = elapsed.as_secs_f64();
    if seconds > 0.0 {
        amount / seconds
    } else {
        0.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::new_histogram;

    // Proves the percentiles of a known distribution (1..=10000 µs, uniform) within the
    // histogram's 0.1 % resolution, and the ordering invariants.
    #[test]
    fn percentiles_of_a_uniform_distribution() {
        let mut histogram = new_histogram().unwrap();
        for us in 1..=10_000 {
            histogram.record(us).unwrap();
        }
        let summary = LatencySummary::of(&histogram);
        let close = |actual: u64, expected: u64| {
            let error = actual.abs_diff(expected) as f64 / expected as f64;
            assert!(error <= 0.001, "{actual} vs {expected}");
        };
        assert_eq!(summary.count, 10_000);
        assert_eq!(summary.min_us, 1);
        close(summary.p50_us, 5000);
        close(summary.p90_us, 9000);
        close(summary.p99_us, 9900);
        close(summary.p999_us, 9990);
        close(summary.p9999_us, 9999);
        close(summary.max_us, 10_000);
        assert!((summary.mean_us - 5000.5).abs() < 5.0);
    }

    // Proves that one slow outlier among fast samples shows at p99.99 and max but not at
    // p99, i.e. the tail is reported, not averaged away.
    #[test]
    fn an_outlier_shows_in_the_tail_only() {
        let mut histogram = new_histogram().unwrap();
        for _ in 0..9_999 {
            histogram.record(100).unwrap();
        }
        histogram.record(2_000_000).unwrap();
        let summary = LatencySummary::of(&histogram);
        assert_eq!(summary.p99_us, 100);
        assert_eq!(summary.p999_us, 100);
        assert!(summary.max_us >= 2_000_000 && summary.max_us < 2_002_000);
        assert!(summary.p9999_us >= 100);
    }

    // Proves the JSON field names carry units and the prefix, and the throughput arithmetic.
    #[test]
    fn json_fields_are_unit_suffixed() {
        let mut histogram = new_histogram().unwrap();
        histogram.record(1500).unwrap();
        let phase = PhaseSummary {
            name: "send",
            elapsed: Duration::from_secs(2),
            counters: Counters {
                messages: 4000,
                requests: 4000,
                bytes: 4000 * 1024,
                errors: 0,
            },
            latency: LatencySummary::of(&histogram),
            latency_meaning: "send",
            first_error: None,
        };
        let fields = phase.json_fields("send_");
        assert_eq!(fields["send_throughput_msgs_per_s"], 2000.0);
        assert_eq!(fields["send_latency_us_p99"], 1500);
        assert_eq!(fields["send_errors_total"], 0);
        assert!((phase.throughput_mib_per_s() - 1.953125).abs() < 1e-9);
        assert!(phase.text().contains("p99.9 1.50 ms"));
        let empty = LatencySummary::of(&new_histogram().unwrap());
        assert_eq!((empty.count, empty.p99_us, empty.max_us), (0, 0, 0));
    }

    // Proves the unit choice of the text figures.
    #[test]
    fn microseconds_are_formatted_readably() {
        assert_eq!(format_us(999), "999 µs");
        assert_eq!(format_us(1500), "1.50 ms");
        assert_eq!(format_us(2_500_000), "2.50 s");
    }
}
