//! Where an anchor that did not match most nearly lines up: the region
//! `edit` and `apply_patch` show in their `no_match` errors.

use super::lines::count_lines;
use std::collections::HashMap;

/// Lines of a missed anchor used to find where it nearly sits: enough to
/// place any region a person would paste, and a bound on the search.
const NEAREST_ANCHOR_LINES: usize = 200;

/// Lines an anchor line may occur on and still help place the region.
const COMMON_LINE_HITS: usize = 1000;

/// The line range of `text` where the lines of `old` most nearly line up: each
/// line of `old` found (trimmed) in a line of `text` votes for the region that
/// would put it there; the most votes win, the earliest on a tie. `None` when
/// no line of `old` occurs at all.
pub fn nearest_region(text: &str, old: &str) -> Option<(u64, u64)> {
    let starts: Vec<usize> = std::iter::once(0)
        .chain(memchr::memchr_iter(b'\n', text.as_bytes()).map(|i| i + 1))
        .collect();
    let total = count_lines(text) as i64;
    let anchor: Vec<&str> = old.strip_suffix('\n').unwrap_or(old).split('\n').collect();
    let mut votes: HashMap<i64, u32> = HashMap::new();
    let mut common = None;
    for (i, line) in anchor.iter().take(NEAREST_ANCHOR_LINES).enumerate() {
        let key = line.trim();
        if key.is_empty() {
            continue;
        }
        let mut hits = Vec::new();
        for (at, _) in text.match_indices(key) {
            let line_no = starts.partition_point(|&s| s <= at) as i64;
            if hits.last() != Some(&line_no) {
                hits.push(line_no);
            }
            if hits.len() > COMMON_LINE_HITS {
                break;
            }
        }
        if hits.len() > COMMON_LINE_HITS {
            // Too common to place the anchor (`}`, `end`): it would only cost
            // time. It still shows the line occurs, if nothing better does.
            common.get_or_insert(hits[0] - i as i64);
            continue;
        }
        for line_no in hits {
            *votes.entry(line_no - i as i64).or_default() += 1;
        }
    }
    let best = votes
        .iter()
        .max_by(|a, b| a.1.cmp(b.1).then(b.0.cmp(a.0)))
        .map(|(&start, _)| start);
    let start = best.or(common)?.max(1);
    let end = (start + anchor.len() as i64 - 1).min(total).max(start);
    Some((start as u64, end as u64))
}
