//! The guide's flow reference (`docs/flows.md`), made from the registry
//! as `sluice flows --markdown` prints it: each flow's description, tier,
//! capabilities, input and output fields. A test compares the checked-in
//! page with what this makes, so the page cannot drift from the flows.

use super::Registry;
use crate::error::ErrorCode;
use serde_json::Value;
use std::fmt::Write;

const HEADER: &str = "# The flows

Every flow a workflow calls, as the registry declares it: this page is made
by `sluice flows --markdown` (a test fails when it differs), so it is what
the binary does. A flow is `sluice.NAME(input)`: one table in, a plain table
back, or `nil, err` for an expected failure, whose `err.code` is one of the
codes of [Troubleshooting](troubleshooting.md). Any call may fail with
`invalid_input` (the message names the field), `permission_denied` or
`permission_required` (the policy; [Policies](policies.md)), and in a
replay with `replay_diverged` (these four are `commonErrors` in `sluice
flows --json`). A call the run stops (a signal, its task cancelled when
the script ends or by its MCP caller) ends with `timeout`, and a replayed
call whose output the record could not keep whole with `unsupported`. Each
flow's `errors` line lists what else its calls may return; a test makes
each one happen.

The tier says what a call can change: *sealed* nothing, *compensable* files
the run can restore, *irreversible* what cannot be taken back (its intent is
recorded and synced before it runs). `sluice flows NAME --json` prints a
flow's whole JSON Schema, nested objects included.
";

/// The whole page for the flows of `registry`.
pub fn render(registry: &Registry) -> String {
    let mut out = String::from(HEADER);
    for flow in registry.flows() {
        let spec = flow.spec();
        let caps: Vec<String> = spec
            .actions
            .iter()
            .map(|a| format!("`{}`", a.as_str()))
            .collect();
        let _ = write!(
            out,
            "\n## `{}`\n\n{}\n\n- tier: {}\n- capabilities: {}\n",
            spec.name,
            spec.description,
            spec.tier.as_str(),
            if caps.is_empty() {
                "none".to_string()
            } else {
                caps.join(", ")
            }
        );
        let _ = writeln!(out, "- errors: {}", error_links(spec.errors));
        if spec.starts_jobs {
            out.push_str("- may start a background job (its output carries the job's id)\n");
        }
        out.push_str("\nInput:\n\n");
        out.push_str(&fields(&(spec.schema)()));
        out.push_str("\nOutput:\n\n");
        out.push_str(&fields(&flow.output_schema()));
    }
    let codes: Vec<String> = ErrorCode::ALL
        .iter()
        .map(|c| format!("`{}`", c.as_str()))
        .collect();
    let _ = write!(
        out,
        "\n## Error codes\n\nThe closed list every flow's `err.code` is one of: {}.\n",
        codes.join(", ")
    );
    out
}

/// A flow's own error codes, each linked to its troubleshooting entry.
fn error_links(codes: &[ErrorCode]) -> String {
    if codes.is_empty() {
        return "none beyond those any call may return".to_string();
    }
    let links: Vec<String> = codes
        .iter()
        .map(|c| format!("[`{0}`](troubleshooting.md#{0})", c.as_str()))
        .collect();
    links.join(", ")
}

/// An object schema's fields as a table; another schema as its type.
fn fields(schema: &Value) -> String {
    let Some(props) = schema.get("properties").and_then(Value::as_object) else {
        return format!("{}\n", kind(schema));
    };
    let required: Vec<&str> = schema
        .get("required")
        .and_then(Value::as_array)
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let mut out = String::from("| field | type | | what |\n|---|---|---|---|\n");
    for (name, field) in props {
        let _ = writeln!(
            out,
            "| `{name}` | {} | {} | {} |",
            kind(field),
            if required.contains(&name.as_str()) {
                "required"
            } else {
                "optional"
            },
            cell(
                field
                    .get("description")
                    .and_then(Value::as_str)
                    .unwrap_or("")
            )
        );
    }
    out
}

/// A schema's type in a word or three: `string`, `"a" \| "b"`, `array of
/// string`, `object`.
fn kind(schema: &Value) -> String {
    if let Some(options) = schema.get("enum").and_then(Value::as_array) {
        let names: Vec<String> = options.iter().map(|o| format!("`{o}`")).collect();
        return names.join(" \\| ");
    }
    if let Some(any) = schema.get("anyOf").or_else(|| schema.get("oneOf")) {
        let kinds: Vec<String> = any.as_array().into_iter().flatten().map(kind).collect();
        return kinds.join(" \\| ");
    }
    match schema.get("type") {
        Some(Value::String(t)) if t == "array" => match schema.get("items") {
            Some(items) => format!("array of {}", kind(items)),
            None => "array".to_string(),
        },
        Some(Value::String(t)) => t.clone(),
        Some(Value::Array(ts)) => {
            let ts: Vec<&str> = ts.iter().filter_map(Value::as_str).collect();
            ts.join(" \\| ")
        }
        _ => "any".to_string(),
    }
}

/// Text safe in a Markdown table cell: pipes escaped, lines joined.
fn cell(text: &str) -> String {
    text.replace('|', "\\|").replace('\n', " ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_header_names_every_code_any_call_may_return() {
        for code in crate::flows::COMMON_ERRORS {
            assert!(HEADER.contains(&format!("`{}`", code.as_str())), "{code:?}");
        }
    }

    #[test]
    fn a_schema_reads_as_a_table_of_its_fields_with_types_and_whether_required() {
        let s = json!({"type": "object", "required": ["path"], "properties": {
            "path": {"type": "string", "description": "a | b"},
            "mode": {"enum": ["a", "b"]},
            "tags": {"type": "array", "items": {"type": "string"}}
        }});
        assert_eq!(
            fields(&s),
            "| field | type | | what |\n|---|---|---|---|\n\
             | `mode` | `\"a\"` \\| `\"b\"` | optional |  |\n\
             | `path` | string | required | a \\| b |\n\
             | `tags` | array of string | optional |  |\n"
        );
    }
}
