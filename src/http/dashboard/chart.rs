//! The last 24 hours as a picture drawn on the server: jobs finished per
//! hour, stacked by outcome, and the p50/p95 of their run time, as inline
//! SVG (no script, no chart library).
//!
//! Invariant: the SVG holds only numbers and fixed words; nothing from a job
//! reaches it, so there is nothing to escape.

use std::fmt::Write;

use crate::queue::{Finished, JobState};

const HOURS: i64 = 24;
const HOUR_MS: i64 = 3_600_000;
const WIDTH: i64 = 720;
const HEIGHT: i64 = 140;

/// The outcome groups, bottom to top, with their colours.
const GROUPS: [(&str, &str); 4] = [
    ("succeeded", "#2da44e"),
    ("skipped or cancelled", "#d4a72c"),
    ("failed or rejected", "#cf222e"),
    ("other", "#8c959f"),
];

fn group(state: JobState) -> usize {
    match state {
        JobState::Succeeded | JobState::NoChange => 0,
        JobState::Skipped | JobState::Cancelled => 1,
        JobState::Failed | JobState::Rejected => 2,
        JobState::Queued | JobState::Running => 3,
    }
}

/// The `q` quantile (0..=1) of `sorted`, nearest rank.
fn quantile(sorted: &[i64], q: f64) -> Option<i64> {
    if sorted.is_empty() {
        return None;
    }
    let rank = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    Some(sorted[rank - 1])
}

fn seconds(ms: i64) -> String {
    if ms < 1_000 {
        format!("{ms} ms")
    } else if ms < 120_000 {
        format!("{:.1} s", ms as f64 / 1000.0)
    } else {
        format!("{} min", ms / 60_000)
    }
}

/// The chart of the 24 hours before `now` (unix ms).
pub fn last_day(finished: &[Finished], now: i64) -> String {
    let start = now - HOURS * HOUR_MS;
    let mut buckets = [[0_u64; 4]; HOURS as usize];
    let mut ran: Vec<i64> = Vec::new();
    for job in finished.iter().filter(|j| j.at >= start && j.at <= now) {
        let hour = (((job.at - start) / HOUR_MS) as usize).min(HOURS as usize - 1);
        buckets[hour][group(job.state)] += 1;
        ran.extend(job.ran_ms);
    }
    ran.sort_unstable();
    let total: u64 = buckets.iter().flatten().sum();
    let tallest = buckets
        .iter()
        .map(|b| b.iter().sum::<u64>())
        .max()
        .unwrap_or(0)
        .max(1);
    let bar = WIDTH / HOURS;
    let mut svg = format!(
        "<svg class=chart role=img viewBox=\"0 0 {WIDTH} {h}\" width=\"{WIDTH}\" height=\"{h}\" xmlns=\"http://www.w3.org/2000/svg\"><title>Jobs finished per hour, last 24 hours: {total}</title>",
        h = HEIGHT + 20
    );
    for (hour, counts) in buckets.iter().enumerate() {
        let mut top = HEIGHT;
        for (g, count) in counts.iter().enumerate() {
            if *count == 0 {
                continue;
            }
            let height = (*count as i64 * HEIGHT / tallest as i64).max(1);
            top -= height;
            let _ = write!(
                svg,
                "<rect x=\"{x}\" y=\"{top}\" width=\"{w}\" height=\"{height}\" fill=\"{fill}\"><title>{count} {label}</title></rect>",
                x = hour as i64 * bar + 1,
                w = bar - 2,
                fill = GROUPS[g].1,
                label = GROUPS[g].0,
            );
        }
    }
    let _ = write!(
        svg,
        "<line x1=\"0\" y1=\"{HEIGHT}\" x2=\"{WIDTH}\" y2=\"{HEIGHT}\" stroke=\"#d0d7de\"/><text x=\"0\" y=\"{y}\" font-size=\"11\" fill=\"#57606a\">24 h ago</text><text x=\"{WIDTH}\" y=\"{y}\" font-size=\"11\" fill=\"#57606a\" text-anchor=\"end\">now</text></svg>",
        y = HEIGHT + 15
    );
    let durations = match (quantile(&ran, 0.5), quantile(&ran, 0.95)) {
        (Some(p50), Some(p95)) => format!("run time p50 {} · p95 {}", seconds(p50), seconds(p95)),
        _ => "no run times yet".into(),
    };
    let legend: Vec<String> = GROUPS
        .iter()
        // A swatch of the bar's own fill: SVG paint, not a `style` attribute,
        // which the pages' Content-Security-Policy refuses.
        .map(|(label, colour)| {
            format!(
                "<svg width=\"10\" height=\"10\" aria-hidden=\"true\"><rect width=\"10\" height=\"10\" fill=\"{colour}\"/></svg> {label}"
            )
        })
        .collect();
    format!(
        "<h3>Last 24 hours</h3><p>{total} {noun} finished · {durations}</p>{svg}<p class=legend>{}</p>",
        legend.join(" "),
        noun = if total == 1 { "job" } else { "jobs" },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn done(at: i64, state: JobState, ran: i64) -> Finished {
        Finished {
            at,
            state,
            ran_ms: Some(ran),
        }
    }

    #[test]
    fn bars_count_each_outcome_in_its_hour() {
        let now = 100 * HOUR_MS;
        let jobs = [
            done(now - 30 * 60_000, JobState::Succeeded, 1_000),
            done(now - 20 * 60_000, JobState::Failed, 3_000),
            done(now - 25 * HOUR_MS, JobState::Succeeded, 99_000), // older than a day
        ];
        let html = last_day(&jobs, now);
        assert!(html.contains("2 jobs finished"), "{html}");
        assert!(html.contains("<title>1 succeeded</title>"), "{html}");
        assert!(
            html.contains("<title>1 failed or rejected</title>"),
            "{html}"
        );
        assert!(html.contains("p50 1.0 s · p95 3.0 s"), "{html}");
        // Bars have a position; the legend's swatches do not.
        assert_eq!(html.matches("<rect x=").count(), 2);
    }

    #[test]
    fn quantiles_are_nearest_rank() {
        let sorted: Vec<i64> = (1..=100).collect();
        assert_eq!(quantile(&sorted, 0.5), Some(50));
        assert_eq!(quantile(&sorted, 0.95), Some(95));
        assert_eq!(quantile(&[], 0.5), None);
        assert_eq!(quantile(&[7], 0.95), Some(7));
    }
}
