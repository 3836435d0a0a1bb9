//! What a viewer reads of a run a piece at a time (`sluice audit serve`):
//! a page of its calls as filters select them, each call's span for a
//! timeline, the tasks and flows to filter by, its lease's owner. Every
//! query is the stores' shared dialect, so no layer above this one
//! writes SQL, and a run of any length is read a page, never whole.

use super::db::{vals, Db, Val};
use super::rows::{self, StoredCall};
use super::show::{Call, Outcome};

/// How every reader's failed read of the store begins: a viewer tells it
/// from a run or call the record does not hold by it.
pub const READ_FAILED: &str = "reading the audit database";

/// A call's columns as a list shows them: no output (a list row never
/// shows one, and an output may be as large as the cap).
const LIST_COLUMNS: &str = "run, task, seq, n, flow, tier, input, capabilities, decisions, \
route, redacted, replayed_from, started_ms, prev, hash, status, NULL AS output, error, capped, \
duration_us, late_decisions, outcome_hash, NULL AS output_ref, parts, client";

/// Which calls a page holds; every field left `None` selects all.
#[derive(Debug, Clone, Default)]
pub struct Filter {
    /// The flow's name, exactly.
    pub flow: Option<String>,
    /// `sealed`, `compensable` or `irreversible`.
    pub tier: Option<String>,
    /// `allow`, `deny` or `ask`: a call with at least one such decision.
    pub decision: Option<String>,
    /// `ok`, `error`, or `unknown`/`pending` (no outcome written).
    pub outcome: Option<String>,
    /// Text the call's input, output or error holds, any case.
    pub text: Option<String>,
}

/// One page of a run's calls, in chain order.
#[derive(Debug, Clone)]
pub struct Page {
    /// How many calls the filter selects in all.
    pub total: i64,
    /// The page's calls, outputs left out.
    pub calls: Vec<Call>,
}

/// Why a filter cannot be applied: the field and the values it takes.
fn bad(field: &str, given: &str, takes: &str) -> String {
    format!("{field}={given:?} is not a filter value; {field} takes {takes}")
}

impl Filter {
    /// The SQL condition (after `run = ?1 AND`) and its parameters, from
    /// `?2` on.
    fn condition(&self) -> Result<(String, Vec<Val>), String> {
        let mut parts: Vec<String> = vec!["TRUE".into()];
        let mut params: Vec<Val> = Vec::new();
        let param = |v: Val, params: &mut Vec<Val>| {
            params.push(v);
            format!("?{}", params.len() + 1)
        };
        if let Some(flow) = &self.flow {
            parts.push(format!(
                "flow = {}",
                param(Val::from(flow.as_str()), &mut params)
            ));
        }
        if let Some(tier) = &self.tier {
            if !["sealed", "compensable", "irreversible"].contains(&tier.as_str()) {
                return Err(bad("tier", tier, "sealed, compensable or irreversible"));
            }
            parts.push(format!(
                "tier = {}",
                param(Val::from(tier.as_str()), &mut params)
            ));
        }
        if let Some(decision) = &self.decision {
            if !["allow", "deny", "ask"].contains(&decision.as_str()) {
                return Err(bad("decision", decision, "allow, deny or ask"));
            }
            // Decisions are kept as compact JSON, written by one serializer.
            let needle = format!("%\"decision\":\"{decision}\"%");
            parts.push(format!(
                "decisions LIKE {}",
                param(Val::from(needle), &mut params)
            ));
        }
        if let Some(outcome) = &self.outcome {
            parts.push(
                match outcome.as_str() {
                    "ok" => "status = 'ok'",
                    "error" => "status IS NOT NULL AND status <> 'ok'",
                    "unknown" | "pending" => "status IS NULL",
                    _ => return Err(bad("outcome", outcome, "ok, error, unknown or pending")),
                }
                .into(),
            );
        }
        if let Some(text) = self.text.as_deref().filter(|t| !t.is_empty()) {
            let like = format!("%{}%", escape_like(&text.to_lowercase()));
            let p = param(Val::from(like), &mut params);
            parts.push(format!(
                "(lower(input) LIKE {p} ESCAPE '\\' OR lower(coalesce(output, '')) LIKE {p} ESCAPE '\\' \
                 OR lower(coalesce(error, '')) LIKE {p} ESCAPE '\\' \
                 OR output_ref IN (SELECT sha256 FROM outputs WHERE lower(body) LIKE {p} ESCAPE '\\'))"
            ));
        }
        Ok((parts.join(" AND "), params))
    }
}

/// `text` with LIKE's wildcards and its escape character taken literally.
fn escape_like(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if matches!(c, '%' | '_' | '\\') {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// Up to `limit` calls of run `run` that `filter` selects, from the
/// `offset`th on (0-based), in chain order, and how many it selects in all.
pub fn page(
    db: &dyn Db,
    run: &str,
    filter: &Filter,
    offset: i64,
    limit: i64,
) -> Result<Page, String> {
    let stored = rows::load_run(db, run)?;
    let live = stored.running();
    let (condition, mut params) = filter.condition()?;
    let mut all = vec![Val::from(run)];
    all.append(&mut params);
    let total = db
        .value(
            &format!("SELECT count(*) FROM calls WHERE run = ?1 AND {condition}"),
            &all,
        )
        .map_err(rows::db)?
        .unwrap_or(0);
    let k = all.len();
    all.extend([Val::Int(limit.max(0)), Val::Int(offset.max(0))]);
    let sql = format!(
        "SELECT {LIST_COLUMNS} FROM calls WHERE run = ?1 AND {condition} \
         ORDER BY n, task, seq LIMIT ?{} OFFSET ?{}",
        k + 1,
        k + 2
    );
    let mut calls = Vec::new();
    db.each(&sql, &all, &mut |row| {
        calls.push(Call::of(&StoredCall::of(row)?, live));
        Ok(())
    })
    .map_err(rows::db)?;
    Ok(Page { total, calls })
}

/// When one call ran, as a timeline draws it.
#[derive(Debug, Clone)]
pub struct Span {
    /// Its chain position.
    pub n: i64,
    /// The task that made it.
    pub task: String,
    /// Its recorded start, ms since the epoch.
    pub started_ms: i64,
    /// How long it ran; `None` while it runs, or when it never ended.
    pub duration_us: Option<i64>,
    /// How it ended.
    pub outcome: Outcome,
    /// A resume's copy of a call an earlier run made: it did not run here.
    pub copied: bool,
}

/// Hands `f` each call's span of run `run`, in chain order, a page of
/// rows a query.
pub fn each_span(db: &dyn Db, run: &str, mut f: impl FnMut(Span)) -> Result<(), String> {
    let live = rows::load_run(db, run)?.running();
    let mut after = 0i64;
    loop {
        let mut got = 0;
        db.each(
            "SELECT n, task, started_ms, duration_us, status, replayed_from FROM calls \
             WHERE run = ?1 AND n > ?2 ORDER BY n LIMIT 4096",
            vals![run, after],
            &mut |row| {
                got += 1;
                let n: i64 = row.get(0)?;
                after = n;
                let status = row.text(4)?;
                f(Span {
                    n,
                    task: row.text(1)?.unwrap_or_default().to_string(),
                    started_ms: row.get(2)?,
                    duration_us: row.get(3)?,
                    outcome: match status {
                        Some("ok") => Outcome::Ok,
                        Some(_) => Outcome::Error,
                        None if live => Outcome::Pending,
                        None => Outcome::Unknown,
                    },
                    copied: row.text(5)?.is_some(),
                });
                Ok(())
            },
        )
        .map_err(rows::db)?;
        if got < 4096 {
            return Ok(());
        }
    }
}

/// A run's tasks, each with how many calls it made, in task order.
pub fn tasks(db: &dyn Db, run: &str) -> Result<Vec<(String, i64)>, String> {
    let mut found = Vec::new();
    db.each(
        "SELECT task, count(*) FROM calls WHERE run = ?1 GROUP BY task ORDER BY task",
        vals![run],
        &mut |row| {
            found.push((row.text(0)?.unwrap_or_default().to_string(), row.get(1)?));
            Ok(())
        },
    )
    .map_err(rows::db)?;
    Ok(found)
}

/// The flows a run's calls used, by name.
pub fn flows(db: &dyn Db, run: &str) -> Result<Vec<String>, String> {
    db.column(
        "SELECT DISTINCT flow FROM calls WHERE run = ?1 ORDER BY flow",
        vals![run],
    )
    .map_err(rows::db)
}

/// Hands `f` each call of run `run` made by flow `flow`, whole (output
/// resolved, input put back together), in chain order.
pub fn each_call_of(
    db: &dyn Db,
    run: &str,
    flow: &str,
    mut f: impl FnMut(Call),
) -> Result<(), String> {
    let live = rows::load_run(db, run)?.running();
    let mut found = Vec::new();
    db.each(
        "SELECT n FROM calls WHERE run = ?1 AND flow = ?2 ORDER BY n",
        vals![run, flow],
        &mut |row| {
            found.push(row.get::<i64>(0)?);
            Ok(())
        },
    )
    .map_err(rows::db)?;
    for n in found {
        if let Some(c) = rows::call(db, run, n).map_err(rows::db)? {
            f(Call::of(&c, live));
        }
    }
    Ok(())
}

/// How many calls run `run` holds.
pub fn call_count(db: &dyn Db, run: &str) -> Result<i64, String> {
    rows::call_count(db, run).map_err(rows::db)
}

/// Run `id` as the views show it, or what to do when there is none.
pub fn run(db: &dyn Db, id: &str) -> Result<super::show::Run, String> {
    Ok(super::show::Run::of(&rows::load_run(db, id)?))
}

/// Who holds (or last held) run `run`'s lease: `HOST:PID:START` and the
/// attempt, as a fleet's takeovers count them.
pub fn lease(db: &dyn Db, run: &str) -> Result<(Option<String>, i64), String> {
    let row = db
        .first("SELECT owner, attempt FROM runs WHERE id = ?1", vals![run])
        .map_err(rows::db)?;
    match row {
        Some(row) => Ok((
            row.text(0).map_err(rows::db)?.map(str::to_string),
            row.get(1).map_err(rows::db)?,
        )),
        None => Ok((None, 1)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn like_wildcards_in_search_text_are_taken_literally() {
        assert_eq!(escape_like("50%_a\\b"), "50\\%\\_a\\\\b");
    }

    #[test]
    fn a_filter_value_outside_its_list_is_refused_naming_the_field() {
        let f = Filter {
            tier: Some("free".into()),
            ..Filter::default()
        };
        let e = f.condition().unwrap_err();
        assert_eq!(
            e,
            "tier=\"free\" is not a filter value; tier takes sealed, compensable or irreversible"
        );
    }

    #[test]
    fn each_filter_adds_its_condition_and_numbers_its_parameters_from_2() {
        let f = Filter {
            flow: Some("bash".into()),
            decision: Some("deny".into()),
            text: Some("Push".into()),
            ..Filter::default()
        };
        let (sql, params) = f.condition().unwrap();
        assert!(
            sql.starts_with("TRUE AND flow = ?2 AND decisions LIKE ?3 AND (lower(input) LIKE ?4")
        );
        assert_eq!(params.len(), 3);
        assert_eq!(params[2], Val::from("%push%"));
    }
}
