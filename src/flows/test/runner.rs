//! The test runner a host declares once: in a policy as `test = {command,
//! cwd, container, env, timeoutMs, baseRef, judge}`, or through
//! `RuntimeBuilder::test_runner` with the same fields as JSON. A call names
//! only what to select; everything about how the suite runs is the host's.

use serde_json::Value;
use std::collections::BTreeMap;

/// The runner of the test flow.
#[derive(Debug, Clone, PartialEq)]
pub struct Runner {
    /// Who declared it, for messages: `policy NAME` or `the embedder`.
    pub from: String,
    /// The command line, run by `/bin/sh -c` with the selection appended
    /// as arguments (`"$@"`), never as text.
    pub command: String,
    /// Its folder: relative to the workspace (or, in a container, to the
    /// container's folder), or absolute.
    pub cwd: Option<String>,
    /// A container to run in, as `bash{container = ...}` names one.
    pub container: Option<String>,
    /// Entries added to the command's environment.
    pub env: BTreeMap<String, String>,
    /// The default of a call's `timeoutMs`.
    pub timeout_ms: Option<u64>,
    /// The git revision `against = "base"` compares with.
    pub base_ref: Option<String>,
    /// Who decides, when no rule does, whether a failure is the command's.
    pub judge: Judge,
    /// The repository the workspace was in when the run started (with a
    /// `baseRef`): a base checkout is made only from that one, never from
    /// one a command made since.
    pub repository: Option<std::path::PathBuf>,
}

/// Who judges a failure the rules cannot attribute.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Judge {
    /// The rules alone.
    Rules,
    /// The policy's `judge = function(run) ... end`, asked after the rules;
    /// `policy` names the policy it lives in, `at` its file:line.
    Lua { policy: String, at: String },
    /// A model, asked only when no rule (and no Lua judge) decided.
    Model { provider: String, model: String },
}

const EXAMPLE: &str = "test = {command = \"pytest -q\", cwd = \"python\", baseRef = \"main\"}";

/// The most `timeoutMs` may be: the process flows' cap, ten minutes.
pub const MAX_TIMEOUT_MS: u64 = 10 * 60 * 1000;

impl Runner {
    /// The runner `from` declared as `table` (a policy's `test`, as JSON).
    /// An error names the field and what it should be.
    pub fn declared(from: &str, table: &Value) -> Result<Runner, String> {
        let Value::Object(map) = table else {
            return Err(format!("{from}: `test` is a table: {EXAMPLE}"));
        };
        let fail = |field: &str, what: &str| format!("{from}: test.{field} {what}");
        let text = |field: &str| -> Result<Option<String>, String> {
            match map.get(field) {
                None | Some(Value::Null) => Ok(None),
                Some(Value::String(s)) if !s.is_empty() && !s.contains('\0') => Ok(Some(s.clone())),
                Some(_) => Err(fail(field, "is a non-empty string without NUL bytes")),
            }
        };
        for key in map.keys() {
            let known = [
                "command",
                "cwd",
                "container",
                "env",
                "timeoutMs",
                "baseRef",
                "judge",
            ];
            if !known.contains(&key.as_str()) {
                return Err(fail(
                    key,
                    &format!(
                        "is not a field of the test runner; its fields are {}: {EXAMPLE}",
                        known.join(", ")
                    ),
                ));
            }
        }
        let Some(command) = text("command")? else {
            return Err(fail(
                "command",
                &format!("is missing: the command line that runs the suite, {EXAMPLE}"),
            ));
        };
        let container = text("container")?;
        if container
            .as_deref()
            .is_some_and(|c| !crate::container::declared::valid_name(c))
        {
            return Err(fail(
                "container",
                "is a container name: letters, digits, '_', '.' and '-'",
            ));
        }
        let base_ref = text("baseRef")?;
        if base_ref.as_deref().is_some_and(|r| r.starts_with('-')) {
            return Err(fail(
                "baseRef",
                "is a git revision (a branch, tag or commit), not an option",
            ));
        }
        Ok(Runner {
            from: from.to_string(),
            command,
            cwd: text("cwd")?,
            container,
            env: env(from, map.get("env"))?,
            timeout_ms: timeout(from, map.get("timeoutMs"))?,
            base_ref,
            judge: judge(from, map.get("judge"))?,
            repository: None,
        })
    }
}

fn env(from: &str, given: Option<&Value>) -> Result<BTreeMap<String, String>, String> {
    let Some(given) = given.filter(|v| !v.is_null()) else {
        return Ok(BTreeMap::new());
    };
    let bad = || {
        format!(
            "{from}: test.env is a table of names to strings, e.g. env = {{PYTHONPATH = \"src\"}}"
        )
    };
    let Value::Object(map) = given else {
        return Err(bad());
    };
    let mut env = BTreeMap::new();
    for (name, value) in map {
        let Value::String(value) = value else {
            return Err(bad());
        };
        env.insert(name.clone(), value.clone());
    }
    let shapes = env
        .keys()
        .map(|k| (k.clone(), "text".to_string()))
        .collect();
    crate::exec::env::validate(&shapes).map_err(|e| format!("{from}: test.{}", e.message))?;
    Ok(env)
}

fn timeout(from: &str, given: Option<&Value>) -> Result<Option<u64>, String> {
    match given {
        None | Some(Value::Null) => Ok(None),
        Some(v) => match v.as_u64() {
            Some(ms) if (1..=MAX_TIMEOUT_MS).contains(&ms) => Ok(Some(ms)),
            _ => Err(format!(
                "{from}: test.timeoutMs is milliseconds from 1 to {MAX_TIMEOUT_MS}"
            )),
        },
    }
}

fn judge(from: &str, given: Option<&Value>) -> Result<Judge, String> {
    let shape = "test.judge is a function(run) in the policy, or {provider = NAME, model = NAME}";
    let Some(given) = given.filter(|v| !v.is_null()) else {
        return Ok(Judge::Rules);
    };
    let Value::Object(map) = given else {
        return Err(format!("{from}: {shape}"));
    };
    if let Some(at) = map.get("lua").and_then(Value::as_str) {
        let policy = from.strip_prefix("policy ").unwrap_or(from).to_string();
        return Ok(Judge::Lua {
            policy,
            at: at.to_string(),
        });
    }
    let name = |k: &str| map.get(k).and_then(Value::as_str).filter(|s| !s.is_empty());
    match (name("provider"), name("model"), map.len()) {
        (Some(provider), Some(model), 2) => Ok(Judge::Model {
            provider: provider.to_string(),
            model: model.to_string(),
        }),
        _ => Err(format!("{from}: {shape}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_runner_is_read_with_every_field() {
        let r = Runner::declared(
            "policy p.lua",
            &json!({"command": "pytest -q", "cwd": "py", "env": {"A": "1"}, "timeoutMs": 5000, "baseRef": "main", "judge": {"provider": "local", "model": "m"}}),
        )
        .unwrap();
        assert_eq!(r.command, "pytest -q");
        assert_eq!(r.cwd.as_deref(), Some("py"));
        assert_eq!(r.env.get("A").map(String::as_str), Some("1"));
        assert_eq!(r.timeout_ms, Some(5000));
        assert_eq!(r.base_ref.as_deref(), Some("main"));
        assert_eq!(
            r.judge,
            Judge::Model {
                provider: "local".into(),
                model: "m".into()
            }
        );
    }

    #[test]
    fn a_bad_runner_is_refused_naming_the_field() {
        let cases = [
            (json!({}), "test.command is missing"),
            (json!({"command": ""}), "test.command is a non-empty string"),
            (
                json!({"command": "x", "comand": 1}),
                "test.comand is not a field",
            ),
            (
                json!({"command": "x", "timeoutMs": 0}),
                "test.timeoutMs is milliseconds",
            ),
            (
                json!({"command": "x", "baseRef": "--upload-pack=x"}),
                "test.baseRef is a git revision",
            ),
            (
                json!({"command": "x", "container": "-it"}),
                "test.container is a container name",
            ),
            (
                json!({"command": "x", "env": {"A": 1}}),
                "test.env is a table",
            ),
            (
                json!({"command": "x", "judge": {"provider": "p"}}),
                "test.judge is a function",
            ),
        ];
        for (table, want) in cases {
            let e = Runner::declared("policy p.lua", &table).unwrap_err();
            assert!(e.starts_with("policy p.lua: "), "{e}");
            assert!(e.contains(want), "{table}: {e}");
        }
    }
}
