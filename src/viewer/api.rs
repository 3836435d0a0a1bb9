//! The viewer's JSON: each `/api/...` path read from the record and
//! answered as a value. Nothing here writes; every string a record holds
//! goes out as JSON text for the page to show as text, cut to a bound.

use super::detail;
use super::timeline;
use crate::audit::browse::{self, Filter};
use crate::audit::db::Db;
use crate::audit::render;
use crate::audit::show::{self, Call, ModelTotals};
use crate::audit::verify::{self, Verdict};
use crate::audit::{list, FlowFacts};
use serde_json::{json, Value};
use std::collections::HashMap;
use std::sync::Mutex;

/// A refusal: the HTTP status and what to do.
pub type Refusal = (u16, String);

/// What the API's answers share between requests: each run's verdict,
/// kept while the run holds the same rows.
#[derive(Default)]
pub struct Verdicts(Mutex<HashMap<String, (String, Verdict)>>);

/// Everything one answer reads through.
pub struct Reader<'a> {
    pub db: &'a dyn Db,
    pub facts: &'a dyn FlowFacts,
    pub verdicts: &'a Verdicts,
}

/// The page size a calls request gets when it names none, and the most.
const PAGE: i64 = 200;
const MOST: i64 = 1000;

/// Answers `GET path?query` under `/api/`.
pub fn answer(r: &Reader, path: &str, query: &HashMap<String, String>) -> Result<Value, Refusal> {
    let parts: Vec<&str> = path.trim_matches('/').split('/').collect();
    let num = |k: &str, default: i64| -> Result<i64, Refusal> {
        match query.get(k) {
            None => Ok(default),
            Some(v) => v.parse().map_err(|_| {
                (
                    400,
                    format!("{k}={v:?} is not a whole number; give {k} as digits"),
                )
            }),
        }
    };
    let found = refused;
    match parts.as_slice() {
        ["api", "runs"] => runs(r, num("offset", 0)?, num("limit", 50)?),
        ["api", "runs", run] => summary(r, run).map_err(found),
        ["api", "runs", run, "state"] => {
            let shown = browse::run(r.db, run).map_err(found)?;
            let calls = browse::call_count(r.db, run).map_err(found)?;
            Ok(json!({"status": shown.status, "calls": calls}))
        }
        ["api", "runs", run, "verify"] => verdict(r, run)
            .map_err(found)
            .map(|v| serde_json::to_value(v).unwrap_or_default()),
        ["api", "runs", run, "calls"] => {
            let limit = num("limit", PAGE)?.clamp(0, MOST);
            calls(r, run, &filter(query), num("offset", 0)?, limit)
        }
        ["api", "runs", run, "timeline"] => {
            let run_started = browse::run(r.db, run).map_err(found)?.started_ms;
            let mut spans = Vec::new();
            browse::each_span(r.db, run, |s| spans.push(s)).map_err(found)?;
            Ok(timeline::lanes(spans, run_started, crate::audit::now_ms()))
        }
        ["api", "runs", run, "calls", n] => {
            let n = n.parse().map_err(|_| {
                (
                    400,
                    format!("call {n:?} is not a number; calls are /calls/N"),
                )
            })?;
            call(r, run, n).map_err(found)
        }
        _ => Err((
            404,
            format!("no such view: {path}; the API is /api/runs/..."),
        )),
    }
}

/// A reader's failure as an answer: 503 when the store could not be read
/// (the next request opens a fresh connection), 404 for what it does not
/// hold.
fn refused(e: String) -> Refusal {
    if e.starts_with(browse::READ_FAILED) {
        (503, e)
    } else {
        (404, e)
    }
}

/// The filters a calls request names.
fn filter(query: &HashMap<String, String>) -> Filter {
    let get = |k: &str| query.get(k).filter(|v| !v.is_empty()).cloned();
    Filter {
        flow: get("flow"),
        tier: get("tier"),
        decision: get("decision"),
        outcome: get("outcome"),
        text: get("q"),
    }
}

/// The runs, newest first, with what the list shows of each.
fn runs(r: &Reader, offset: i64, limit: i64) -> Result<Value, Refusal> {
    let limit = limit.clamp(1, 500);
    let listing = list::list(r.db, (offset.max(0) + limit) as usize).map_err(refused)?;
    let mut shown = Vec::new();
    for run in listing.runs.into_iter().skip(offset.max(0) as usize) {
        let mut v = serde_json::to_value(&run).unwrap_or_default();
        v["worker"] = json!(worker(r.db, &run.id));
        v["models"] = serde_json::to_value(models(r, &run.id)).unwrap_or_default();
        shown.push(v);
    }
    Ok(json!({"total": listing.total, "runs": shown}))
}

/// The machine a run's lease names (`HOST`, and the attempt past the
/// first: a fleet's takeover).
pub fn worker(db: &dyn Db, run: &str) -> Option<String> {
    let (owner, attempt) = browse::lease(db, run).ok()?;
    let host = owner?.split(':').next()?.to_string();
    Some(if attempt > 1 {
        format!("{host} (attempt {attempt})")
    } else {
        host
    })
}

/// What a run's model calls spent.
pub fn models(r: &Reader, run: &str) -> ModelTotals {
    let mut totals = ModelTotals::default();
    let _ = browse::each_call_of(r.db, run, detail::model(), |c| totals.add(&c));
    totals
}

/// A run's header, its tasks and flows, its spend and its latest plan.
pub fn summary(r: &Reader, run: &str) -> Result<Value, String> {
    let shown = browse::run(r.db, run)?;
    let tasks = browse::tasks(r.db, run)?;
    let calls: i64 = tasks.iter().map(|(_, n)| n).sum();
    let mut plan = Value::Null;
    browse::each_call_of(r.db, run, detail::plan(), |c| {
        if let Some(p) = r.facts.plan(&c.flow, &c.input) {
            plan = p.clone();
        }
    })?;
    let mut v = serde_json::to_value(&shown).unwrap_or_default();
    v["worker"] = json!(worker(r.db, run));
    Ok(json!({
        "run": detail::bounded(&v, "`sluice audit show`"),
        "live": shown.status == "running",
        "calls": calls,
        "tasks": tasks.iter().map(|(t, n)| json!({"task": t, "calls": n})).collect::<Vec<_>>(),
        "flows": browse::flows(r.db, run)?,
        "models": models(r, run),
        "plan": plan,
    }))
}

/// Run `run`'s verdict, verified again only when its rows changed.
pub fn verdict(r: &Reader, run: &str) -> Result<Verdict, String> {
    let stored = browse::run(r.db, run)?;
    let count = browse::call_count(r.db, run)?;
    let key = format!("{}:{:?}:{count}", stored.status, stored.seal);
    if let Some((k, v)) = r.verdicts.0.lock().ok().and_then(|m| m.get(run).cloned()) {
        if k == key {
            return Ok(v);
        }
    }
    let v = verify::verify(r.db, run)?;
    if let Ok(mut m) = r.verdicts.0.lock() {
        m.insert(run.to_string(), (key, v.clone()));
    }
    Ok(v)
}

/// A page of a run's calls as list rows.
fn calls(r: &Reader, run: &str, f: &Filter, offset: i64, limit: i64) -> Result<Value, Refusal> {
    let page = browse::page(r.db, run, f, offset, limit).map_err(|e| {
        if e.contains("is not a filter value") {
            (400, e)
        } else {
            refused(e)
        }
    })?;
    let rows: Vec<Value> = page.calls.iter().map(|c| row(c, r.facts)).collect();
    Ok(json!({"total": page.total, "offset": offset, "calls": rows}))
}

/// One list row.
pub fn row(c: &Call, facts: &dyn FlowFacts) -> Value {
    json!({
        "n": c.n,
        "task": c.task,
        "flow": c.flow,
        "tier": c.tier,
        "startedMs": c.started_ms,
        "durationUs": c.duration_us,
        "outcome": render::outcome_summary(c),
        "state": c.outcome.as_str(),
        "code": c.error_code(),
        "decision": detail::cut(&render::decision_summary(c), "the call's page"),
        "route": render::route_summary(c.route.as_ref()),
        "gist": detail::cut(&render::input_summary(&c.flow, &c.input, facts), "the call's page"),
        "client": c.client,
    })
}

/// Call `#n` whole, with its diff, streams or conversation, and where
/// the chain breaks when it breaks here.
fn call(r: &Reader, run: &str, n: i64) -> Result<Value, String> {
    let (_, c) = show::call(r.db, run, n)?;
    let verdict = verdict(r, run)?;
    Ok(whole(&c, r.facts, verdict.problem.as_ref()))
}

/// Call `c` as its page shows it; `problem` is the run's verdict's, shown
/// when it is this call's.
pub fn whole(c: &Call, facts: &dyn FlowFacts, problem: Option<&verify::Problem>) -> Value {
    let at = format!("`sluice audit show {} --call {} --json`", c.run, c.n);
    let mut v = detail::bounded(&serde_json::to_value(c).unwrap_or_default(), &at);
    v["diff"] = json!(detail::diff(&c.flow, &c.input));
    v["streams"] = detail::bounded(&json!(detail::streams(c.output.as_ref())), &at);
    v["conversation"] = match c.model_use().is_some() || c.flow == detail::model() {
        true => detail::bounded(
            &json!(detail::conversation(&c.input, c.output.as_ref())),
            &at,
        ),
        false => Value::Null,
    };
    v["gist"] = json!(render::input_summary(&c.flow, &c.input, facts));
    let broken = problem
        .filter(|p| p.n == Some(c.n))
        .map(|p| json!({"failure": p.failure, "message": p.message}));
    v["broken"] = json!(broken);
    v
}
