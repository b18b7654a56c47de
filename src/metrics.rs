//! Process-wide Prometheus metrics: labelled counters and histograms that any
//! module records into, rendered by `GET /metrics`.
//!
//! Invariants: label values come from small closed sets chosen by the code
//! (answer codes, states, outcomes), never from request input, so the series
//! count stays bounded; recording never fails and never blocks for long (one
//! short mutex per metric).

use std::collections::BTreeMap;
use std::fmt::Write;
use std::sync::Mutex;
use std::time::Duration;

/// A counter with one set of label values per series.
pub struct Counter {
    name: &'static str,
    help: &'static str,
    labels: &'static [&'static str],
    series: Mutex<BTreeMap<Vec<&'static str>, u64>>,
}

impl Counter {
    pub const fn new(
        name: &'static str,
        help: &'static str,
        labels: &'static [&'static str],
    ) -> Counter {
        Counter {
            name,
            help,
            labels,
            series: Mutex::new(BTreeMap::new()),
        }
    }

    /// Adds one to the series with these label values (in the order of `labels`).
    pub fn inc(&self, values: &[&'static str]) {
        debug_assert_eq!(values.len(), self.labels.len(), "{}", self.name);
        let mut series = self.series.lock().unwrap_or_else(|e| e.into_inner());
        *series.entry(values.to_vec()).or_default() += 1;
    }

    pub fn get(&self, values: &[&'static str]) -> u64 {
        let series = self.series.lock().unwrap_or_else(|e| e.into_inner());
        series.get(values).copied().unwrap_or(0)
    }

    fn render(&self, out: &mut String) {
        let _ = writeln!(out, "# HELP {} {}", self.name, self.help);
        let _ = writeln!(out, "# TYPE {} counter", self.name);
        let series = self.series.lock().unwrap_or_else(|e| e.into_inner());
        for (values, n) in series.iter() {
            let _ = writeln!(
                out,
                "{}{} {n}",
                self.name,
                labels(self.labels, values, None)
            );
        }
    }
}

/// A histogram of seconds with fixed buckets.
pub struct Histogram {
    name: &'static str,
    help: &'static str,
    labels: &'static [&'static str],
    buckets: &'static [f64],
    series: Mutex<BTreeMap<Vec<&'static str>, HistogramSeries>>,
}

#[derive(Default, Clone)]
struct HistogramSeries {
    counts: Vec<u64>,
    sum: f64,
    count: u64,
}

impl Histogram {
    pub const fn new(
        name: &'static str,
        help: &'static str,
        labels: &'static [&'static str],
        buckets: &'static [f64],
    ) -> Histogram {
        Histogram {
            name,
            help,
            labels,
            buckets,
            series: Mutex::new(BTreeMap::new()),
        }
    }

    pub fn observe(&self, values: &[&'static str], elapsed: Duration) {
        let secs = elapsed.as_secs_f64();
        let mut series = self.series.lock().unwrap_or_else(|e| e.into_inner());
        let s = series
            .entry(values.to_vec())
            .or_insert_with(|| HistogramSeries {
                counts: vec![0; self.buckets.len()],
                ..HistogramSeries::default()
            });
        for (i, upper) in self.buckets.iter().enumerate() {
            if secs <= *upper {
                s.counts[i] += 1;
            }
        }
        s.sum += secs;
        s.count += 1;
    }

    fn render(&self, out: &mut String) {
        let _ = writeln!(out, "# HELP {} {}", self.name, self.help);
        let _ = writeln!(out, "# TYPE {} histogram", self.name);
        let series = self.series.lock().unwrap_or_else(|e| e.into_inner());
        for (values, s) in series.iter() {
            for (upper, n) in self.buckets.iter().zip(&s.counts) {
                let le = format!("{upper}");
                let _ = writeln!(
                    out,
                    "{}_bucket{} {n}",
                    self.name,
                    labels(self.labels, values, Some(&le))
                );
            }
            let _ = writeln!(
                out,
                "{}_bucket{} {}",
                self.name,
                labels(self.labels, values, Some("+Inf")),
                s.count
            );
            let plain = labels(self.labels, values, None);
            let _ = writeln!(out, "{}_sum{plain} {}", self.name, s.sum);
            let _ = writeln!(out, "{}_count{plain} {}", self.name, s.count);
        }
    }
}

fn labels(names: &[&str], values: &[&str], le: Option<&str>) -> String {
    let mut parts: Vec<String> = names
        .iter()
        .zip(values)
        .map(|(n, v)| format!("{n}=\"{}\"", v.replace('\\', "\\\\").replace('"', "\\\"")))
        .collect();
    if let Some(le) = le {
        parts.push(format!("le=\"{le}\""));
    }
    if parts.is_empty() {
        String::new()
    } else {
        format!("{{{}}}", parts.join(","))
    }
}

const JOB_BUCKETS: &[f64] = &[0.1, 0.5, 1.0, 5.0, 15.0, 30.0, 60.0, 120.0, 300.0, 900.0];
const CALL_BUCKETS: &[f64] = &[0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 10.0];
/// Fine enough at the low end to tell a 20 ms ingest target met from missed.
const INGEST_BUCKETS: &[f64] = &[
    0.001, 0.002, 0.005, 0.01, 0.015, 0.02, 0.03, 0.05, 0.1, 0.25, 1.0, 5.0,
];

/// `POST /v1/dispatch` and `POST /v1/requests` answers by route and code.
pub static REQUESTS: Counter = Counter::new(
    "teammem_ingest_requests_total",
    "Dispatch and PR-request answers by route and answer code.",
    &["route", "code"],
);

/// Time to answer `POST /v1/dispatch`, from its request to the answer
/// (verification and the durable enqueue included), whatever the answer.
pub static INGEST_DURATION: Histogram = Histogram::new(
    "teammem_ingest_request_seconds",
    "Time to answer a dispatch, from the request to the answer (verification and the durable enqueue), by route.",
    &["route"],
    INGEST_BUCKETS,
);

/// One group commit of the queue, from `BEGIN IMMEDIATE` to the end of
/// `COMMIT`: the statements of every write it carries and the WAL frames'
/// writes (the fsync that makes them durable follows, on another thread).
pub static QUEUE_COMMIT_DURATION: Histogram = Histogram::new(
    "teammem_queue_commit_seconds",
    "Time of one queue transaction (group commit), from BEGIN to the end of COMMIT; the WAL sync that makes it durable is teammem_queue_sync_seconds.",
    &[],
    INGEST_BUCKETS,
);

/// One fdatasync of the queue's WAL: it makes every batch committed before
/// it durable, and their callers hear their answers after it. Slow syncs
/// point at the disk.
pub static QUEUE_SYNC_DURATION: Histogram = Histogram::new(
    "teammem_queue_sync_seconds",
    "Time of one fdatasync of the queue's WAL, which makes every batch committed before it durable.",
    &[],
    INGEST_BUCKETS,
);

/// One WAL checkpoint of the queue's database, by the connection that ran
/// it: the checkpointer (the bulk of the copying, beside the writer) or the
/// writer (the rest, between two batches, so that the WAL can start over).
/// Writer checkpoints delay the next batch: slow ones point at the disk.
pub static QUEUE_CHECKPOINT_DURATION: Histogram = Histogram::new(
    "teammem_queue_checkpoint_seconds",
    "Time of one WAL checkpoint of the queue database, by connection (checkpointer or writer), fsync included.",
    &["connection"],
    INGEST_BUCKETS,
);

/// Finished job attempts by kind and resulting state.
pub static JOBS_FINISHED: Counter = Counter::new(
    "teammem_job_attempts_total",
    "Finished job attempts by job kind and the state they left the job in.",
    &["kind", "state"],
);

/// Outcomes a worker tried to record again because the database was
/// unavailable (`worker.rs`), by job kind.
pub static OUTCOME_RETRIES: Counter = Counter::new(
    "teammem_job_outcome_retries_total",
    "Tries to record a finished job attempt's outcome again because the database was unavailable, by job kind.",
    &["kind"],
);

pub static JOB_DURATION: Histogram = Histogram::new(
    "teammem_job_duration_seconds",
    "Wall time of one job attempt, by job kind.",
    &["kind"],
    JOB_BUCKETS,
);

/// Wiki publishes (a job's staged writes as one commit) by outcome
/// (`updated`, `no_change`, `conflict`, ...).
pub static WIKI_PUBLISHES: Counter = Counter::new(
    "teammem_wiki_publishes_total",
    "Jobs' wiki publishes (one commit per job at most) by outcome.",
    &["outcome"],
);

/// GitHub REST API calls by status class.
pub static GITHUB_CALLS: Counter = Counter::new(
    "teammem_github_api_calls_total",
    "GitHub REST API calls by answer status (2xx, 3xx, 4xx, 5xx, timeout, error).",
    &["status"],
);

pub static GITHUB_CALL_DURATION: Histogram = Histogram::new(
    "teammem_github_api_call_duration_seconds",
    "Latency of GitHub REST API calls.",
    &[],
    CALL_BUCKETS,
);

/// Tool calls an agent made through the writer, by agent kind.
pub static AGENT_STEPS: Counter = Counter::new(
    "teammem_agent_steps_total",
    "Tool calls agents made through the wiki writer, by agent kind.",
    &["agent"],
);

/// Connections a job's agent endpoint refused unanswered, by why: `missing`
/// (no whole capability preamble in time), `wrong` (another capability, or
/// none), `other_user` (a peer of another uid).
pub static AGENT_ENDPOINT_REFUSALS: Counter = Counter::new(
    "teammem_agent_endpoint_refusals_total",
    "Connections to a job's agent endpoint refused unanswered, by reason (missing, wrong, other_user).",
    &["reason"],
);

/// Runs of the sweep for missed pushes (each checks every `sweep = true` source).
pub static SWEEP_RUNS: Counter = Counter::new(
    "teammem_sweep_runs_total",
    "Runs of the sweep for missed pushes.",
    &[],
);

/// One source checked by the sweep, by what came of it (`enqueued` counts the
/// missed ranges it enqueued).
pub static SWEEP_CHECKS: Counter = Counter::new(
    "teammem_sweep_checks_total",
    "Sources checked by the sweep, by outcome (enqueued, up_to_date, in_flight, not_ancestor, ...).",
    &["outcome"],
);

/// Requests refused by a limit, by which (`rate`: a principal's request
/// rate; `mcp_streams`: a principal's open `/mcp` streams; `mcp_capacity`:
/// every `/mcp` connection the server allows is taken).
pub static LIMITED: Counter = Counter::new(
    "teammem_http_limited_total",
    "Requests refused by a limit (429, or 503 for mcp_capacity, each with Retry-After), by limit: rate, mcp_streams, mcp_capacity.",
    &["limit"],
);

/// `/mcp` sessions ended because their principal opened more than
/// `limits.mcp_sessions_per_principal` (the oldest go first).
pub static MCP_SESSIONS_EVICTED: Counter = Counter::new(
    "teammem_mcp_sessions_evicted_total",
    "Handshake-era /mcp sessions ended because their principal opened more than limits.mcp_sessions_per_principal (oldest first).",
    &[],
);

/// `/mcp` responses the server ended at `server.mcp_stream_lifetime_seconds`.
pub static MCP_STREAMS_EXPIRED: Counter = Counter::new(
    "teammem_mcp_streams_expired_total",
    "/mcp requests and event streams the server ended at server.mcp_stream_lifetime_seconds (clients reconnect).",
    &[],
);

/// Renders every process-wide metric.
pub fn render(out: &mut String) {
    REQUESTS.render(out);
    INGEST_DURATION.render(out);
    QUEUE_COMMIT_DURATION.render(out);
    QUEUE_SYNC_DURATION.render(out);
    QUEUE_CHECKPOINT_DURATION.render(out);
    JOBS_FINISHED.render(out);
    OUTCOME_RETRIES.render(out);
    JOB_DURATION.render(out);
    WIKI_PUBLISHES.render(out);
    GITHUB_CALLS.render(out);
    GITHUB_CALL_DURATION.render(out);
    AGENT_STEPS.render(out);
    AGENT_ENDPOINT_REFUSALS.render(out);
    SWEEP_RUNS.render(out);
    SWEEP_CHECKS.render(out);
    LIMITED.render(out);
    MCP_SESSIONS_EVICTED.render(out);
    MCP_STREAMS_EXPIRED.render(out);
}

/// The status label of an HTTP answer.
pub fn status_class(status: u16) -> &'static str {
    match status {
        200..=299 => "2xx",
        300..=399 => "3xx",
        400..=499 => "4xx",
        _ => "5xx",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counter_series_render_in_exposition_format() {
        static C: Counter = Counter::new("t_total", "Test.", &["code"]);
        C.inc(&["ok"]);
        C.inc(&["ok"]);
        C.inc(&["bad_signature"]);
        let mut out = String::new();
        C.render(&mut out);
        assert_eq!(
            out,
            "# HELP t_total Test.\n# TYPE t_total counter\nt_total{code=\"bad_signature\"} 1\nt_total{code=\"ok\"} 2\n"
        );
    }

    #[test]
    fn histogram_buckets_are_cumulative() {
        static H: Histogram = Histogram::new("t_seconds", "Test.", &[], &[0.1, 1.0]);
        H.observe(&[], Duration::from_millis(50));
        H.observe(&[], Duration::from_millis(500));
        H.observe(&[], Duration::from_secs(5));
        let mut out = String::new();
        H.render(&mut out);
        assert!(out.contains("t_seconds_bucket{le=\"0.1\"} 1\n"), "{out}");
        assert!(out.contains("t_seconds_bucket{le=\"1\"} 2\n"), "{out}");
        assert!(out.contains("t_seconds_bucket{le=\"+Inf\"} 3\n"), "{out}");
        assert!(out.contains("t_seconds_count 3\n"), "{out}");
    }
}
