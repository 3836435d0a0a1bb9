//! `sluice audit report RUN --html FILE`: the viewer's page for one run
//! as one file. The page's script and style are inline, allowed by their
//! hashes in the file's own Content-Security-Policy (which allows nothing
//! else: no request leaves the page), and the run is a JSON block the
//! script reads as data, with every `<`, `>` and `&` escaped so no value
//! can end the block.

use super::api::{self, Reader, Verdicts};
use super::assets::{SCRIPT, STYLE};
use super::timeline;
use crate::audit::browse;
use crate::audit::db::Db;
use crate::audit::show::{self, Calls};
use crate::flows::Registry;
use base64::Engine;
use serde_json::{json, Map, Value};
use std::path::Path;

/// What a report holds, for the command to say.
#[derive(Debug, Clone, Copy)]
pub struct Written {
    /// Calls in it.
    pub calls: usize,
    /// The file's size.
    pub bytes: usize,
}

/// Writes run `run` of `db` to `out` as one HTML file.
pub fn report(db: &dyn Db, run: &str, out: &Path) -> Result<Written, String> {
    let facts = Registry::standard();
    let verdicts = Verdicts::default();
    let r = Reader {
        db,
        facts: &facts,
        verdicts: &verdicts,
    };
    let (data, calls) = data(&r, run)?;
    let html = page(&data);
    // Written beside the file and renamed over it: a report is whole or
    // not there, never half a file a browser would show as the run.
    let mut partial = out.as_os_str().to_owned();
    partial.push(".partial");
    let partial = std::path::PathBuf::from(partial);
    std::fs::write(&partial, html.as_bytes())
        .and_then(|()| std::fs::rename(&partial, out))
        .map_err(|e| {
            let _ = std::fs::remove_file(&partial);
            format!(
                "cannot write {}: {e}; choose a folder you can write",
                out.display()
            )
        })?;
    Ok(Written {
        calls,
        bytes: html.len(),
    })
}

/// Everything the page asks the API for, answered once.
fn data(r: &Reader, run: &str) -> Result<(Value, usize), String> {
    let summary = api::summary(r, run)?;
    let verdict = api::verdict(r, run)?;
    let mut spans = Vec::new();
    browse::each_span(r.db, run, |s| spans.push(s))?;
    let started = summary["run"]["startedMs"].as_i64().unwrap_or(0);
    let timeline = timeline::lanes(spans, started, crate::audit::now_ms());
    let (_, recorded) = show::Recorded::open(r.db, run)?;
    let mut rows = Vec::new();
    let mut calls = Map::new();
    recorded.each(&mut |c| {
        let mut row = api::row(&c, r.facts);
        let kinds: Vec<&str> = c
            .decisions
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|d| d.get("decision").and_then(Value::as_str))
            .collect();
        row["decisions"] = json!(kinds);
        rows.push(row);
        calls.insert(
            c.n.to_string(),
            api::whole(&c, r.facts, verdict.problem.as_ref()),
        );
        Ok(())
    })?;
    let count = rows.len();
    let run_v = &summary["run"];
    let listing = json!({
        "id": run_v["id"], "script": run_v["script"], "status": run_v["status"],
        "startedMs": run_v["startedMs"], "durationMs": run_v["durationMs"],
        "calls": summary["calls"], "models": summary["models"], "worker": run_v["worker"],
    });
    let data = json!({
        "listing": listing,
        "summary": summary,
        "verdict": verdict,
        "timeline": timeline,
        "rows": rows,
        "calls": calls,
    });
    Ok((data, count))
}

/// `data` as JSON safe inside a `<script type="application/json">` block:
/// no `<`, `>` or `&` (so no `</script>`), each written as its escape.
fn embedded(data: &Value) -> String {
    let text = data.to_string();
    let special = |c: char| matches!(c, '<' | '>' | '&' | '\u{2028}' | '\u{2029}');
    let mut out = String::with_capacity(text.len() + 1024);
    let mut from = 0;
    for (i, c) in text.match_indices(special) {
        out.push_str(&text[from..i]);
        let escape = match c {
            "<" => "\\u003c",
            ">" => "\\u003e",
            "&" => "\\u0026",
            "\u{2028}" => "\\u2028",
            _ => "\\u2029",
        };
        out.push_str(escape);
        from = i + c.len();
    }
    out.push_str(&text[from..]);
    out
}

/// The CSP source of inline `text`: its SHA-256, base64.
fn hash_source(text: &str) -> String {
    use sha2::Digest;
    let digest = sha2::Sha256::digest(text.as_bytes());
    format!(
        "'sha256-{}'",
        base64::engine::general_purpose::STANDARD.encode(digest)
    )
}

/// The report's HTML: no value from the record outside the data block.
fn page(data: &Value) -> String {
    let csp = format!(
        "default-src 'none'; script-src {}; style-src {}; img-src data:; base-uri 'none'; form-action 'none'",
        hash_source(SCRIPT),
        hash_source(STYLE)
    );
    format!(
        "<!doctype html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <meta http-equiv=\"Content-Security-Policy\" content=\"{csp}\">\n\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
         <title>sluice report</title>\n<style>{STYLE}</style>\n</head>\n<body data-ready=\"0\">\n\
         <header>sluice · report</header>\n<main id=\"main\"></main>\n\
         <script type=\"application/json\" id=\"sluice-data\">{}</script>\n\
         <script>{SCRIPT}</script>\n</body>\n</html>\n",
        embedded(data)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_value_can_close_the_data_block() {
        let v = json!({"out": "</script><script>alert(1)</script> & \u{2028}"});
        let e = embedded(&v);
        assert!(!e.contains('<') && !e.contains('>') && !e.contains('&'));
        let back: Value = serde_json::from_str(&e).unwrap();
        assert_eq!(back, v);
    }

    #[test]
    fn the_policy_names_the_inline_script_and_style_by_hash_and_nothing_else() {
        let html = page(&json!({}));
        let csp = html
            .split("content=\"")
            .nth(1)
            .and_then(|s| s.split('"').next())
            .unwrap();
        assert!(csp.starts_with("default-src 'none'; script-src 'sha256-"));
        assert!(!csp.contains("unsafe"));
        assert!(!csp.contains("connect-src"));
        assert_eq!(html.matches("<script>").count(), 1);
    }
}
