//! A run's timeline: one lane per task, one bar per call. A run of many
//! calls is drawn with bounded bars: past [`MOST_BARS`], calls of a lane
//! that fall in one slice of the run's time are merged into one bar that
//! says how many it holds, so a 100,000-call run draws as fast as a small
//! one and concurrent calls still show side by side.

use crate::audit::browse::Span;
use crate::audit::show::Outcome;
use serde_json::{json, Value};
use std::collections::BTreeMap;

/// The most bars a timeline sends before it merges.
pub const MOST_BARS: usize = 4000;

/// One bar: the first call's number, start and length in µs from the
/// run's start, the worst outcome it holds, how many calls.
#[derive(Debug, Clone, PartialEq)]
struct Bar {
    n: i64,
    start_us: i64,
    end_us: i64,
    outcome: Outcome,
    calls: i64,
}

/// How bad an outcome is, to say the worst one a merged bar holds.
fn rank(o: Outcome) -> u8 {
    match o {
        Outcome::Ok => 0,
        Outcome::Pending => 1,
        Outcome::Unknown => 2,
        Outcome::Error => 3,
    }
}

/// Task ids in the order people read them: `0.2` before `0.10`.
fn task_key(task: &str) -> Vec<(u64, String)> {
    task.split('.')
        .map(|p| (p.parse().unwrap_or(u64::MAX), p.to_string()))
        .collect()
}

/// The timeline of `spans` for a run that started at `start_ms`; `now_ms`
/// ends what is still running.
pub fn lanes(spans: Vec<Span>, start_ms: i64, now_ms: i64) -> Value {
    let origin = start_ms * 1000;
    let mut by_task: BTreeMap<Vec<(u64, String)>, (String, Vec<Bar>)> = BTreeMap::new();
    let mut end_us = 0i64;
    let count = spans.len();
    for s in spans.into_iter().filter(|s| !s.copied) {
        let start = s.started_ms * 1000 - origin;
        let end = match s.duration_us {
            Some(d) => start + d,
            None => (now_ms * 1000 - origin).max(start),
        };
        end_us = end_us.max(end);
        let lane = by_task
            .entry(task_key(&s.task))
            .or_insert_with(|| (s.task.clone(), Vec::new()));
        lane.1.push(Bar {
            n: s.n,
            start_us: start,
            end_us: end,
            outcome: s.outcome,
            calls: 1,
        });
    }
    let lanes_n = by_task.len().max(1);
    let merged = count > MOST_BARS;
    let slices = (MOST_BARS / lanes_n).clamp(20, 1000) as i64;
    let slice = end_us / slices + 1;
    let lanes: Vec<Value> = by_task
        .into_values()
        .map(|(task, bars)| {
            let bars = if merged { merge(bars, slice) } else { bars };
            let bars: Vec<Value> = bars
                .iter()
                .map(|b| {
                    json!([
                        b.n,
                        b.start_us,
                        b.end_us - b.start_us,
                        b.outcome.as_str(),
                        b.calls
                    ])
                })
                .collect();
            json!({"task": task, "bars": bars})
        })
        .collect();
    json!({"startMs": start_ms, "spanUs": end_us, "merged": merged, "lanes": lanes})
}

/// `bars` (in chain order) with those that start in one slice of `slice`
/// µs merged.
fn merge(mut bars: Vec<Bar>, slice: i64) -> Vec<Bar> {
    bars.sort_by_key(|b| (b.start_us, b.n));
    let mut out: Vec<Bar> = Vec::new();
    for b in bars {
        match out.last_mut() {
            Some(last) if last.start_us / slice == b.start_us / slice => {
                last.end_us = last.end_us.max(b.end_us);
                last.calls += 1;
                if rank(b.outcome) > rank(last.outcome) {
                    last.outcome = b.outcome;
                }
            }
            _ => out.push(b),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn span(n: i64, task: &str, at: i64, us: i64) -> Span {
        Span {
            n,
            task: task.into(),
            started_ms: at,
            duration_us: Some(us),
            outcome: Outcome::Ok,
            copied: false,
        }
    }

    #[test]
    fn each_task_is_a_lane_in_reading_order_and_each_call_a_bar() {
        let t = lanes(
            vec![
                span(1, "0", 1000, 500),
                span(2, "0.10", 1001, 800),
                span(3, "0.2", 1001, 900),
            ],
            1000,
            2000,
        );
        let tasks: Vec<&str> = t["lanes"]
            .as_array()
            .unwrap()
            .iter()
            .map(|l| l["task"].as_str().unwrap())
            .collect();
        assert_eq!(tasks, ["0", "0.2", "0.10"]);
        assert_eq!(t["lanes"][1]["bars"], json!([[3, 1000, 900, "ok", 1]]));
        assert_eq!(t["merged"], json!(false));
    }

    #[test]
    fn past_the_bound_a_lane_merges_calls_of_one_slice_keeping_the_worst_outcome() {
        let mut spans: Vec<Span> = (1..=10_000).map(|n| span(n, "0", 1000 + n, 10)).collect();
        spans[5].outcome = Outcome::Error;
        let t = lanes(spans, 1000, 0);
        let bars = t["lanes"][0]["bars"].as_array().unwrap();
        assert!(bars.len() <= 1000, "{} bars", bars.len());
        let calls: i64 = bars.iter().map(|b| b[4].as_i64().unwrap()).sum();
        assert_eq!(calls, 10_000);
        assert_eq!(bars[0][3], json!("error"));
    }
}
