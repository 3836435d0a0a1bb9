//! A call's outcome as an MCP tool result: `structuredContent` is the
//! flow's output table as the manifest's `outputSchema` describes it, and
//! `content` a text a person (or a model) reads: a command's streams in
//! their bounded form, a read's page, a search's lines; a flow error is
//! `isError` with its code and message.

use crate::error::FlowError;
use crate::runtime::{Outcome, Tool};
use rmcp::model::{CallToolResult, ContentBlock};
use serde_json::Value;

/// The tool result of `outcome`, a call of `tool`.
pub fn result(tool: &Tool, outcome: Outcome) -> CallToolResult {
    match outcome {
        Outcome::Done(output) => {
            let text = text(tool, &output);
            let mut r = CallToolResult::success(vec![ContentBlock::text(text)]);
            r.structured_content = Some(output);
            r
        }
        Outcome::Failed(e) => CallToolResult::error(vec![ContentBlock::text(failure(&e))]),
        Outcome::Raised(message) => CallToolResult::error(vec![ContentBlock::text(message)]),
    }
}

/// `code: message`, then the error's details (what a command printed,
/// the capability and the rule) as JSON.
fn failure(e: &FlowError) -> String {
    let mut text = format!("{}: {}", e.code.as_str(), e.message);
    if !e.details.is_empty() {
        let details =
            serde_json::to_string_pretty(&Value::Object(e.details.clone())).unwrap_or_default();
        text.push_str("\n\n");
        text.push_str(&details);
    }
    text
}

/// The readable text of a flow's output: each flow's own form where it
/// has one, else the output as JSON.
fn text(tool: &Tool, out: &Value) -> String {
    let flow = match tool {
        Tool::Flow(name) => name.as_str(),
        _ => "",
    };
    let shown = match flow {
        "bash" => command(out),
        "shell_command" => field(out, "output"),
        "read" => page(out),
        "grep" => matches(out),
        "glob" => lines(out, "paths", |p| p.as_str().map(str::to_string)),
        "ls" => lines(out, "entries", |e| {
            let name = e["name"].as_str()?;
            Some(if e["kind"] == "dir" {
                format!("{name}/")
            } else {
                name.to_string()
            })
        }),
        "fetch" | "http-post" => field(out, "body"),
        "webfetch" => field(out, "content"),
        "model" => field(out, "text"),
        "test" => suite(out),
        _ => None,
    };
    shown.unwrap_or_else(|| match out {
        Value::String(s) => s.clone(),
        other => serde_json::to_string_pretty(other).unwrap_or_default(),
    })
}

/// A test run as a person reads it: the verdict, whose failure it is,
/// each failure, the comparison with the base, then the output's tail.
fn suite(out: &Value) -> Option<String> {
    let n = |k: &str| out.get(k).and_then(Value::as_u64).unwrap_or(0);
    let failed = out.get("failed")?.as_array()?;
    let runner = out
        .get("runner")
        .and_then(Value::as_str)
        .unwrap_or("no known runner's report");
    let mut text = format!(
        "exit code {}: {} passed, {} failed, {} skipped ({runner})\n",
        out.get("exitCode")?,
        n("passed"),
        failed.len(),
        n("skipped")
    );
    if let Some(p) = out.get("invalidProbe") {
        let s = |k: &str| p.get(k).and_then(Value::as_str).unwrap_or_default();
        text.push_str(&format!(
            "invalid probe ({}): {}\n{}\n",
            s("reason"),
            s("message"),
            s("evidence")
        ));
    }
    for f in failed {
        let s = |k: &str| f.get(k).and_then(Value::as_str).unwrap_or_default();
        let at = match (f.get("file").and_then(Value::as_str), f.get("line")) {
            (Some(file), Some(line)) => format!(" ({file}:{line})"),
            (Some(file), None) => format!(" ({file})"),
            _ => String::new(),
        };
        text.push_str(&format!(
            "FAILED {}{at}: {}\n",
            s("name"),
            s("message").lines().next().unwrap_or("")
        ));
    }
    for key in ["introduced", "preexisting", "fixed"] {
        if let Some(names) = out.get(key).and_then(Value::as_array) {
            let names: Vec<&str> = names.iter().filter_map(Value::as_str).collect();
            text.push_str(&format!("{key}: {}\n", names.join(", ")));
        }
    }
    text.push_str("--- tail ---\n");
    text.push_str(out.get("tail")?.as_str()?);
    Some(text)
}

fn field(out: &Value, name: &str) -> Option<String> {
    let text = out.get(name)?.as_str()?.to_string();
    Some(with_notice(text, out))
}

/// `text`, then the output's `notice` (what was left out and how to see
/// it), when it has one.
fn with_notice(mut text: String, out: &Value) -> String {
    if let Some(n) = out.get("notice").and_then(Value::as_str) {
        if !text.is_empty() && !text.ends_with('\n') {
            text.push('\n');
        }
        text.push_str(&format!("[{n}]"));
    }
    text
}

/// A command's result: its exit code and streams, bounded as the flow
/// bounds them; a background job's handle.
fn command(out: &Value) -> Option<String> {
    if let Some(id) = out.get("jobId") {
        return Some(format!(
            "started background job {id} (pid {}); read its output with job_read {{\"jobId\": {id}}}, wait with job_wait, stop it with job_kill",
            out["pid"]
        ));
    }
    let mut text = format!("exit code {}", out.get("exitCode")?);
    if let Some(sig) = out.get("signal").and_then(Value::as_str) {
        text.push_str(&format!(" (signal {sig})"));
    }
    for stream in ["stdout", "stderr"] {
        let body = out.get(stream).and_then(Value::as_str).unwrap_or_default();
        if !body.is_empty() {
            text.push_str(&format!("\n--- {stream} ---\n{body}"));
        }
    }
    Some(text)
}

/// A read's page, and where it sits in the file when it is not all of it.
fn page(out: &Value) -> Option<String> {
    let content = out.get("content")?.as_str()?.to_string();
    Some(with_notice(content, out))
}

/// `file:line:text`, one match a line.
fn matches(out: &Value) -> Option<String> {
    let list = out.get("matches")?.as_array()?;
    let text: Vec<String> = list
        .iter()
        .map(|m| {
            format!(
                "{}:{}:{}",
                m["file"].as_str().unwrap_or("?"),
                m["line"],
                m["text"].as_str().unwrap_or("")
            )
        })
        .collect();
    Some(with_notice(text.join("\n"), out))
}

fn lines(out: &Value, list: &str, each: impl Fn(&Value) -> Option<String>) -> Option<String> {
    let items = out.get(list)?.as_array()?;
    let text: Vec<String> = items.iter().filter_map(each).collect();
    Some(with_notice(text.join("\n"), out))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ErrorCode;
    use serde_json::json;

    fn text_of(r: &CallToolResult) -> String {
        serde_json::to_value(&r.content).unwrap()[0]["text"]
            .as_str()
            .unwrap()
            .to_string()
    }

    #[test]
    fn a_commands_result_reads_as_its_exit_code_and_streams_and_keeps_its_table() {
        let out = json!({"exitCode": 1, "stdout": "a\n", "stderr": "b\n", "signal": null});
        let r = result(&Tool::Flow("bash".into()), Outcome::Done(out.clone()));
        assert_eq!(
            text_of(&r),
            "exit code 1\n--- stdout ---\na\n\n--- stderr ---\nb\n"
        );
        assert_eq!(r.structured_content, Some(out));
        assert_eq!(r.is_error, Some(false));
        let job = json!({"jobId": 3, "pid": 99, "status": "running"});
        let r = result(&Tool::Flow("bash".into()), Outcome::Done(job));
        assert!(text_of(&r)
            .starts_with("started background job 3 (pid 99); read its output with job_read"));
    }

    #[test]
    fn a_page_keeps_its_notice_and_other_outputs_read_as_json() {
        let page = json!({"content": "x\ny", "notice": "lines 1-2 of 9; offset = 3 reads on", "truncated": true});
        let r = result(&Tool::Flow("read".into()), Outcome::Done(page));
        assert_eq!(text_of(&r), "x\ny\n[lines 1-2 of 9; offset = 3 reads on]");
        let r = result(
            &Tool::Flow("write".into()),
            Outcome::Done(json!({"bytesWritten": 2})),
        );
        assert_eq!(text_of(&r), "{\n  \"bytesWritten\": 2\n}");
        let r = result(&Tool::Lua("t".into()), Outcome::Done(json!("plain")));
        assert_eq!(text_of(&r), "plain");
    }

    #[test]
    fn an_error_is_is_error_with_code_message_and_details_and_no_table() {
        let e = FlowError::new(ErrorCode::PermissionDenied, "no.").with("capability", "fs:read:/x");
        let r = result(&Tool::Flow("read".into()), Outcome::Failed(e));
        assert_eq!(r.is_error, Some(true));
        assert_eq!(r.structured_content, None);
        assert_eq!(
            text_of(&r),
            "permission_denied: no.\n\n{\n  \"capability\": \"fs:read:/x\"\n}"
        );
        let r = result(
            &Tool::Lua("t".into()),
            Outcome::Raised("the tool raised: boom".into()),
        );
        assert_eq!(
            (r.is_error, text_of(&r)),
            (Some(true), "the tool raised: boom".to_string())
        );
    }
}
