//! `lua/sluice.d.lua`, the LuaLS annotations of the `sluice` module, rendered
//! from the registry: each flow's input and output schemas become classes
//! (`sluice.ReadInput`, `sluice.ReadOutput`, and a class per titled object
//! inside them), and its function is annotated with its description. What is
//! not a flow (the error, the job object, `sluice.call`, `json`, `sleep`, the
//! module's fields) is a fixed template here, since no schema describes it.
//!
//! `sluice flows --lua` prints it; a test fails when the checked-in file is
//! not what the registry generates, so a schema change cannot leave editors
//! with stale types.

use super::{lua_name, Registry};
use crate::error::ErrorCode;
use serde_json::Value;
use std::fmt::Write as _;

const HEADER: &str = "---@meta
-- LuaLS annotations for the `sluice` module that workflow scripts see.
-- Point your editor's Lua language server at this folder (\"workspace.library\")
-- for completion and type checks. Field names match the flows' JSON exactly.
-- Generated from the flows' schemas by `sluice flows --lua`; change the
-- schemas (src/flows/), not this file.
";

/// `sluice.Error` after its `code` (which lists [`ErrorCode::ALL`]).
const ERROR_FIELDS: &str = "---@field message string what went wrong and what to do next
---@field field? string the input field at fault (invalid_input)
---@field path? string
---@field nearest? string|sluice.Region the nearest existing folder (not_found) or region (edit's no_match)
---@field actual? sluice.Region what a line range really holds (edit's expect)
---@field lines? integer[] every line a repeated anchor starts on
---@field capability? string the capability refused (permission_denied)
---@field busy? boolean another writer holds the file's lock: retry later
---@field stale? boolean a dead process left the lock: a person must remove `lock`
---@field lock? string the lock folder
---@field limit? integer the limit a pattern ran past (invalid_pattern: 16384 bytes of grep pattern, 10 MiB compiled)
---@field timeoutMs? integer the deadline a grep or glob ran out of (timeout); the error then also carries what it found so far, in its output's fields (`matches`, `files`, `totalMatches`, ... or `paths`, `total`, ...)
---@field interrupted? string the signal that stopped a grep or glob (\"SIGTERM\"), when the run was interrupted

---@class sluice.Region
---@field startLine integer
---@field endLine integer
---@field content string
";

/// Classes the template writes itself, because they are more than data: a
/// schema titled so names them, and no class is generated for it.
const TEMPLATE_CLASSES: &[&str] = &["Job"];

/// The background job object (bash's `background = true` output, wrapped
/// by the runtime with live fields and methods).
const JOB: &str = "---@class sluice.JobRead
---@field stdout string output since the previous read
---@field stderr string
---@field lossy boolean unread output was lost; the spill files hold all of it
---@field stdoutSpillPath? string
---@field stderrSpillPath? string

---@class sluice.Job
---@field jobId integer the job's number in the run
---@field pid integer the job's process id
---@field status \"running\"|\"exited\"|\"killed\" live
---@field exitCode? integer live; nil while running or after a signal
---@field signal? string live
---@field sandbox? sluice.SandboxFacts once settled, when it ran confined; runnerFailed = true when the runner broke before the command ran
local Job = {}
--- Output produced since the previous read; never repeats a byte.
---@return sluice.JobRead
function Job:read() end
--- Waits until the job ends, at most `ms` (nil: no limit). True when it has ended.
---@param ms? integer
---@return boolean
function Job:wait(ms) end
--- TERM to the job's process group, KILL after 3 s. False if it had already ended.
---@return boolean
function Job:kill() end

---@class sluice
---@field args string[] the script's arguments
---@field workspace string the canonical workspace folder
---@field run_id string
---@field test_runner {command: string, cwd?: string, container?: string, baseRef?: string}? the runner `sluice.test` uses, or nil when the host declared none
sluice = {}
";

const TAIL: &str = "--- Calls any flow by name (\"http-post\" or \"http_post\").
---@param name string
---@param input table
---@return table?, sluice.Error?
function sluice.call(name, input) end

--- Tool definitions for sluice.model's `tools` (and sluice.agent's): each
--- flow named becomes `{name, description, input}` from its schema; a tool
--- table `{name, description, input, run}` (a Lua tool) is kept as it is.
--- A name that is no flow raises, listing the flows.
---@param list (string|sluice.Tool)[]
---@return sluice.Tool[]
function sluice.tools(list) end

--- Named credential `name` as an opaque value for a `headers` or `env` entry
--- (fetch, http_post, webfetch, bash): its secret never reaches the script or
--- the record. Sending it needs cred:use:NAME@ORIGIN (cred:use:NAME@command
--- for env). It cannot be joined to text: give `prefix` (\"Bearer \").
---@param name string
---@param opts? {prefix?: string}
---@return userdata
function sluice.credential(name, opts) end

--- Milliseconds since the Unix epoch. Recorded with the run (as are
--- `os.time()`, `os.date()`, `os.clock()` and `math.random`'s seed), so a
--- replay sees the same value.
---@return integer
function sluice.now() end

--- Waits `ms` milliseconds without blocking other work; true when done. `ms`
--- is from 0 to 600000 (ten minutes): a negative, NaN, infinite or larger
--- one is nil, err (invalid_input). A stop signal ends the wait at once.
---@param ms number
---@return true?, sluice.Error?
function sluice.sleep(ms) end

---@class sluice.Task
---@field id string The task's id (\"0.2\": the second task or coroutine the main chunk made), as the record keys its calls.
---@field settled boolean Whether it has ended.
local Task = {}

--- Waits until the task ends and returns what its function returned, or
--- raises its error here (a string error as \"task ID failed: ...\").
---@return any ...
function Task:await() end

--- Runs `fn(...)` as a task beside the caller: its flow calls run at once
--- with other tasks', ordered only where their effects overlap (see
--- README, \"Tasks\"). A task nobody awaits that fails fails the run; one
--- still running when the script ends is cancelled.
---@param fn function
---@param ... any
---@return sluice.Task
function sluice.spawn(fn, ...) end

--- Waits for every task and returns the first value each returned, in the
--- list's order; raises the failure of the first that failed.
---@param tasks sluice.Task[]
---@return any[]
function sluice.all(tasks) end

--- Runs `fn(item, index)` over `list`, each call a task, at most `limit`
--- at once (default: all), and returns their first values in the list's
--- order; raises the first failure and starts no more.
---@param list any[]
---@param fn fun(item: any, index: integer): any
---@param opts? {limit?: integer}
---@return any[]
function sluice.map(list, fn, opts) end

sluice.json = {}
--- Stands for JSON null inside decoded values.
sluice.json.null = nil

---@param value any
---@param opts? {pretty?: boolean}
---@return string
function sluice.json.encode(value, opts) end

---@param text string
---@return any?, sluice.Error?
function sluice.json.decode(text) end

return sluice
";

/// The whole of `lua/sluice.d.lua` for the flows of `registry`.
pub fn render(registry: &Registry) -> String {
    let mut out = String::from(HEADER);
    let codes: Vec<String> = ErrorCode::ALL
        .iter()
        .map(|c| format!("\"{}\"", c.as_str()))
        .collect();
    let _ = write!(
        out,
        "\n---@class sluice.Error\n---@field code {}\n{ERROR_FIELDS}",
        codes.join("|")
    );
    let mut classes = Classes::default();
    let mut functions = String::new();
    for flow in registry.flows() {
        let spec = flow.spec();
        let base = pascal(spec.name);
        let input = classes.class(&format!("sluice.{base}Input"), &(spec.schema)());
        let output = classes.lua_type(&flow.output_schema(), &format!("sluice.{base}Output"));
        let output = if output.contains('|') {
            format!("({output})")
        } else {
            output
        };
        let _ = write!(
            functions,
            "\n--- {}\n---@param input {input}\n---@return {output}?, sluice.Error?\nfunction sluice.{}(input) end\n",
            one_line(spec.description),
            lua_name(spec.name)
        );
    }
    for (_, text) in &classes.done {
        out.push('\n');
        out.push_str(text);
    }
    out.push('\n');
    out.push_str(JOB);
    out.push_str(&functions);
    out.push('\n');
    out.push_str(TAIL);
    out
}

/// The classes rendered so far, in the order they were first met, each
/// parent before the classes of its fields.
#[derive(Default)]
struct Classes {
    done: Vec<(String, String)>,
}

impl Classes {
    /// Renders the class `name` for the object `schema` (once: a second
    /// schema of that name must be the same) and returns `name`.
    fn class(&mut self, name: &str, schema: &Value) -> String {
        let bare = name.trim_start_matches("sluice.");
        if TEMPLATE_CLASSES.contains(&bare) {
            return name.to_string();
        }
        if let Some((_, text)) = self.done.iter().find(|(n, _)| n == name) {
            // Rendering again checks the two schemas agree.
            let again = Classes::default().fields(name, schema);
            assert!(
                *text == again || text.is_empty(),
                "two different schemas are both titled {bare}"
            );
            return name.to_string();
        }
        // A place first, so the parent comes before its fields' classes.
        let at = self.done.len();
        self.done.push((name.to_string(), String::new()));
        let text = self.fields(name, schema);
        self.done[at].1 = text;
        name.to_string()
    }

    /// `---@class name` and a `---@field` line per property: the required
    /// ones in the schema's order, then the optional ones (marked `?`) by
    /// name.
    fn fields(&mut self, name: &str, schema: &Value) -> String {
        let mut text = format!("---@class {name}\n");
        let empty = serde_json::Map::new();
        let props = schema["properties"].as_object().unwrap_or(&empty);
        let required: Vec<&str> = schema["required"]
            .as_array()
            .map(|r| r.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        let optional = props.keys().filter(|k| !required.contains(&k.as_str()));
        let order = required.iter().copied().chain(optional.map(String::as_str));
        for field in order {
            let Some(prop) = props.get(field) else {
                continue;
            };
            let hint = format!("{name}{}", pascal(field));
            let ty = self.lua_type(prop, &hint);
            let mark = if required.contains(&field) { "" } else { "?" };
            let _ = write!(text, "---@field {field}{mark} {ty}");
            if let Some(d) = prop["description"].as_str() {
                let _ = write!(text, " {}", one_line(d));
            }
            text.push('\n');
        }
        text
    }

    /// The LuaLS type of a value of `schema`; an object with properties is
    /// a class, named by its `title` or else `hint`.
    fn lua_type(&mut self, schema: &Value, hint: &str) -> String {
        if let Some(branches) = schema["oneOf"].as_array() {
            let types: Vec<String> = branches
                .iter()
                .enumerate()
                .map(|(i, b)| self.lua_type(b, &format!("{hint}{}", i + 1)))
                .collect();
            return types.join("|");
        }
        if let Some(values) = schema["enum"].as_array() {
            let values: Vec<String> = values.iter().map(Value::to_string).collect();
            return values.join("|");
        }
        match schema["type"].as_str() {
            Some("array") => {
                let items = self.lua_type(&schema["items"], hint);
                if items.contains('|') {
                    format!("({items})[]")
                } else {
                    format!("{items}[]")
                }
            }
            Some("object") if schema["properties"].is_object() => {
                let name = match schema["title"].as_str() {
                    Some(title) => format!("sluice.{title}"),
                    None => hint.to_string(),
                };
                self.class(&name, schema)
            }
            Some("object") => match schema.get("additionalProperties") {
                Some(v) if v.is_object() => {
                    format!("table<string, {}>", self.lua_type(v, hint))
                }
                _ => "table".to_string(),
            },
            Some(ty @ ("string" | "integer" | "number" | "boolean")) => ty.to_string(),
            _ => "any".to_string(),
        }
    }
}

/// `http-post` is `HttpPost`, `shell_command` `ShellCommand`.
fn pascal(name: &str) -> String {
    name.split(['-', '_'])
        .map(|part| {
            let mut chars = part.chars();
            match chars.next() {
                Some(first) => first.to_uppercase().chain(chars).collect(),
                None => String::new(),
            }
        })
        .collect()
}

/// A description as one comment line.
fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// The command that regenerates the checked-in file.
    const REGENERATE: &str = "cargo run -q -- flows --lua > lua/sluice.d.lua";

    #[test]
    fn the_checked_in_annotations_are_what_the_registry_generates() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/lua/sluice.d.lua");
        let on_disk = std::fs::read_to_string(path).unwrap_or_default();
        let fresh = render(&Registry::standard());
        if on_disk == fresh {
            return;
        }
        let line = on_disk
            .lines()
            .zip(fresh.lines())
            .position(|(a, b)| a != b)
            .unwrap_or_else(|| on_disk.lines().count().min(fresh.lines().count()));
        panic!(
            "lua/sluice.d.lua is not what the flows' schemas generate (first difference at line {}: {:?} is now {:?}). \
             Regenerate it with `{REGENERATE}` and commit it.",
            line + 1,
            on_disk.lines().nth(line).unwrap_or("<end of file>"),
            fresh.lines().nth(line).unwrap_or("<end of file>"),
        );
    }

    #[test]
    fn schemas_render_as_luals_types() {
        let schema = json!({
            "type": "object",
            "required": ["name"],
            "properties": {
                "name": {"type": "string", "description": "Who.\n  Twice."},
                "kind": {"type": "string", "enum": ["a", "b"]},
                "sizes": {"type": "array", "items": {"type": "integer"}},
                "env": {"type": "object", "additionalProperties": {"type": "string"}},
                "inner": {"type": "object", "title": "Inner", "required": [], "properties": {"x": {"type": "number"}}},
                "either": {"type": "array", "items": {"oneOf": [{"type": "string"}, {"type": "boolean"}]}},
            }
        });
        let mut classes = Classes::default();
        assert_eq!(classes.class("sluice.T", &schema), "sluice.T");
        let text: Vec<&str> = classes.done.iter().map(|(_, t)| t.as_str()).collect();
        assert_eq!(
            text,
            [
                "---@class sluice.T\n\
                 ---@field name string Who. Twice.\n\
                 ---@field either? (string|boolean)[]\n\
                 ---@field env? table<string, string>\n\
                 ---@field inner? sluice.Inner\n\
                 ---@field kind? \"a\"|\"b\"\n\
                 ---@field sizes? integer[]\n",
                "---@class sluice.Inner\n---@field x? number\n",
            ]
        );
        assert_eq!(pascal("http-post"), "HttpPost");
        assert_eq!(pascal("shell_command"), "ShellCommand");
    }

    /// The template's `sluice.Job` stands for bash's job handle: it names
    /// every field of the schema's `Job`.
    #[test]
    fn the_job_template_covers_the_job_handle_schema() {
        let registry = Registry::standard();
        let bash = registry.get("bash").unwrap().output_schema();
        let shapes = bash["oneOf"].as_array().expect("bash's output has shapes");
        let job = shapes
            .iter()
            .find(|b| b["title"] == "Job")
            .expect("bash's output has a Job shape");
        for field in job["properties"].as_object().unwrap().keys() {
            assert!(
                JOB.contains(&format!("---@field {field} ")),
                "the sluice.Job template lacks {field}"
            );
        }
    }
}
