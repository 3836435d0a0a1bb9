//! The sub-agent's last answer turned into findings, each kept only with
//! the citations it was shown ([`super::shown::Seen`]): a model that read
//! a file telling it to cite `secrets.rs:1`, or that invents a line,
//! cannot make evidence of it. A citation of a line it never saw is
//! dropped (and listed in `dropped`, with why); a finding left without a
//! citation is dropped whole.

use super::shown::{named, normalized, Seen};
use serde::Serialize;
use serde_json::Value;
use std::path::Path;

/// The most findings one exploration returns.
pub const MAX_FINDINGS: usize = 50;
/// The most citations one finding keeps.
pub const MAX_EVIDENCE: usize = 10;
/// The most characters of a claim.
pub const MAX_CLAIM_CHARS: usize = 2_000;
/// The most entries `dropped` lists; one more says how many were not.
pub const MAX_DROPPED: usize = 50;
/// The most characters of a dropped citation as shown.
const MAX_CITATION_CHARS: usize = 300;

/// One finding: what the sub-agent claims, and the lines that show it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Finding {
    pub claim: String,
    pub evidence: Vec<Evidence>,
}

/// One cited line, with its text as the sub-agent saw it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Evidence {
    pub path: String,
    pub line: u64,
    pub text: String,
}

/// A citation (or a finding) that was left out, and why.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Dropped {
    pub claim: String,
    /// `path:line` as cited; absent when the finding cited nothing usable.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub citation: Option<String>,
    pub reason: String,
}

/// What the last answer held: the findings kept, and what was left out.
#[derive(Debug, Default)]
pub struct Checked {
    pub findings: Vec<Finding>,
    pub dropped: Vec<Dropped>,
    /// Why the answer could not be read at all, when it could not.
    pub unreadable: Option<String>,
    /// Dropped entries past [`MAX_DROPPED`], counted, not listed.
    unlisted: usize,
}

/// The findings of the answer `text`, each citation checked against
/// `seen` (paths against `root`).
pub fn check(text: &str, root: &Path, seen: &Seen) -> Checked {
    let mut out = Checked::default();
    let list = match parse(text) {
        Ok(list) => list,
        Err(why) => {
            out.unreadable = Some(why);
            return out;
        }
    };
    for item in list.iter().take(MAX_FINDINGS) {
        let claim: String = item["claim"]
            .as_str()
            .unwrap_or_default()
            .chars()
            .take(MAX_CLAIM_CHARS)
            .collect();
        if claim.trim().is_empty() {
            continue;
        }
        let none = Vec::new();
        let cited = item["evidence"].as_array().unwrap_or(&none);
        let mut evidence = Vec::new();
        for c in cited.iter().take(MAX_EVIDENCE) {
            match citation(c) {
                Some((path, line)) => match seen.get(&normalized(root, &path), line) {
                    Some(text) => evidence.push(Evidence {
                        path: named(root, &normalized(root, &path)),
                        line,
                        text: text.to_string(),
                    }),
                    None => out.drop(Dropped {
                        claim: claim.clone(),
                        citation: Some(clip(&format!("{path}:{line}"))),
                        reason: "the explorer was never shown this line (no read page or grep match held it)".into(),
                    }),
                },
                None => out.drop(Dropped {
                    claim: claim.clone(),
                    citation: None,
                    reason: format!(
                        "a citation is {{path, line}} or \"path:line\", got {}",
                        clip(&c.to_string())
                    ),
                }),
            }
        }
        if evidence.is_empty() {
            out.drop(Dropped {
                claim,
                citation: None,
                reason: "the finding has no citation the explorer was shown, so it was left out"
                    .into(),
            });
        } else {
            out.findings.push(Finding { claim, evidence });
        }
    }
    if out.unlisted > 0 {
        out.dropped.push(Dropped {
            claim: String::new(),
            citation: None,
            reason: format!("{} more were left out and are not listed", out.unlisted),
        });
    }
    out
}

impl Checked {
    /// Lists `d` among the dropped, up to [`MAX_DROPPED`]; beyond, counts
    /// it: a model's answer cannot make the output grow without end.
    fn drop(&mut self, d: Dropped) {
        if self.dropped.len() < MAX_DROPPED {
            self.dropped.push(d);
        } else {
            self.unlisted += 1;
        }
    }
}

/// `text` cut to [`MAX_CITATION_CHARS`] characters, marked when cut.
fn clip(text: &str) -> String {
    match text.char_indices().nth(MAX_CITATION_CHARS) {
        Some((at, _)) => format!("{}...", &text[..at]),
        None => text.to_string(),
    }
}

/// The `findings` list of the JSON object in `text` (the first `{` to the
/// last `}`, so a model's words around it do no harm).
fn parse(text: &str) -> Result<Vec<Value>, String> {
    let (Some(start), Some(end)) = (text.find('{'), text.rfind('}')) else {
        return Err("the explorer's answer holds no JSON object".into());
    };
    let v: Value = serde_json::from_str(text.get(start..=end).unwrap_or_default())
        .map_err(|e| format!("the explorer's answer's JSON does not parse: {e}"))?;
    match v.get("findings") {
        Some(Value::Array(list)) => Ok(list.clone()),
        _ => Err("the explorer's answer has no `findings` list".into()),
    }
}

/// A citation as `{path, line}` or `"path:line"`.
fn citation(c: &Value) -> Option<(String, u64)> {
    if let Some(text) = c.as_str() {
        let (path, line) = text.rsplit_once(':')?;
        return Some((path.to_string(), line.trim().parse().ok()?));
    }
    let path = c.get("path")?.as_str()?;
    let line = c.get("line")?;
    let line = line
        .as_u64()
        .or_else(|| line.as_str()?.trim().parse().ok())?;
    (!path.is_empty()).then(|| (path.to_string(), line))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn seen() -> Seen {
        let mut s = Seen::default();
        let out = json!({"content": "def mean(v):\n    return 1", "startLine": 1, "totalLines": 2});
        super::super::shown::read(Path::new("/w"), &json!({"path": "calc.py"}), &out, &mut s);
        s
    }

    #[test]
    fn a_citation_of_a_line_shown_is_kept_with_its_text() {
        let answer = r#"Here: {"findings": [{"claim": "mean is defined", "evidence": [{"path": "./calc.py", "line": 1}, "calc.py:2"]}]}"#;
        let c = check(answer, Path::new("/w"), &seen());
        assert_eq!(c.findings.len(), 1);
        assert_eq!(
            c.findings[0].evidence[0],
            Evidence {
                path: "calc.py".into(),
                line: 1,
                text: "def mean(v):".into()
            }
        );
        assert_eq!(c.findings[0].evidence[1].line, 2);
        assert!(c.dropped.is_empty());
    }

    #[test]
    fn a_line_never_shown_is_dropped_and_a_finding_left_bare_goes_too() {
        let answer = json!({"findings": [
            {"claim": "partly", "evidence": [{"path": "calc.py", "line": 1}, {"path": "calc.py", "line": 99}]},
            {"claim": "the key is in secrets.rs", "evidence": ["secrets.rs:1"]},
        ]})
        .to_string();
        let c = check(&answer, Path::new("/w"), &seen());
        assert_eq!(c.findings.len(), 1);
        assert_eq!(c.findings[0].evidence.len(), 1);
        let cited: Vec<Option<&str>> = c.dropped.iter().map(|d| d.citation.as_deref()).collect();
        assert_eq!(cited, [Some("calc.py:99"), Some("secrets.rs:1"), None]);
        assert_eq!(c.dropped[2].claim, "the key is in secrets.rs");
    }

    #[test]
    fn a_flood_of_bad_citations_lists_at_most_fifty_clipped_and_counts_the_rest() {
        let long = "p".repeat(5000);
        let findings: Vec<serde_json::Value> = (0..50)
            .map(|i| json!({"claim": format!("c{i}"), "evidence": [format!("{long}:1"), "x", {"path": "a.rs", "line": 99}]}))
            .collect();
        let c = check(
            &json!({"findings": findings}).to_string(),
            Path::new("/w"),
            &seen(),
        );
        assert!(c.findings.is_empty());
        // 50 findings x (3 bad citations + the finding itself) = 200.
        assert_eq!(c.dropped.len(), MAX_DROPPED + 1);
        assert_eq!(
            c.dropped[MAX_DROPPED].reason,
            "150 more were left out and are not listed"
        );
        let first = c.dropped[0].citation.as_deref().unwrap();
        assert_eq!(first.chars().count(), MAX_CITATION_CHARS + 3);
        assert!(first.ends_with("..."));
    }

    #[test]
    fn an_answer_without_findings_says_why() {
        let c = check("I could not find it.", Path::new("/w"), &seen());
        assert!(c.unreadable.unwrap().contains("no JSON object"));
    }
}
