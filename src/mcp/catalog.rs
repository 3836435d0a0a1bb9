//! What a served run offers: one tool per flow the policies could allow,
//! in the manifest's order, the job tools beside `bash`, then the Lua
//! tools, each with its schemas and the hints its tier gives.

use crate::pipeline::JobOp;
use crate::runtime::{LuaTool, Runtime, Tool as Runs};
use rmcp::model::{JsonObject, Tool, ToolAnnotations};
use serde_json::{json, Value};
use std::sync::Arc;

/// One served tool: what a client sees, and what a call of it runs.
#[derive(Clone)]
pub struct Entry {
    /// The tool as `tools/list` shows it.
    pub tool: Tool,
    /// What a call of it runs.
    pub runs: Runs,
}

/// Every tool a served run offers, in the order `tools/list` gives them.
#[derive(Clone, Default)]
pub struct Catalog {
    entries: Vec<Entry>,
    /// Flows left out because the policies refuse every call of them.
    pub hidden: Vec<String>,
    /// Flows `--flows` named that the run cannot serve, and why.
    pub unavailable: Vec<(String, &'static str)>,
}

/// The job tools, which act on a background job a `bash` call started.
const JOB_TOOLS: [(&str, JobOp, &str); 3] = [
    ("job_read", JobOp::Read, "Reads what a background job (bash with background = true) printed since the last read."),
    ("job_wait", JobOp::Wait, "Waits until a background job ends, at most timeoutMs (default and cap 600000); says whether it ended, and its state."),
    ("job_kill", JobOp::Kill, "Kills a background job (TERM to its process group, then KILL); says whether it was still running."),
];

impl Catalog {
    /// The catalog of `runtime`: its flows (only those named in `only`,
    /// when given) but those its policies refuse every call of, the job
    /// tools when `bash` is served, and `lua` tools. A name in `only` that
    /// names no flow is an error listing the flows.
    pub fn of(
        runtime: &Runtime,
        only: Option<&[String]>,
        lua: &[LuaTool],
    ) -> Result<Catalog, String> {
        let manifest = runtime.manifest();
        let flows = manifest["flows"].as_array().cloned().unwrap_or_default();
        let names: Vec<&str> = flows.iter().filter_map(|f| f["name"].as_str()).collect();
        // A flow is named as the manifest spells it or as Lua does
        // (`http_post` for `http-post`).
        let same = |a: &str, b: &str| a.replace('_', "-") == b.replace('_', "-");
        if let Some(bad) = only
            .into_iter()
            .flatten()
            .find(|n| !names.iter().any(|f| same(f, n)))
        {
            return Err(format!(
                "--flows names {bad:?}, which is no flow; the flows are {}",
                names.join(", ")
            ));
        }
        let wanted = |name: &str| only.is_none_or(|o| o.iter().any(|n| same(n, name)));
        let mut catalog = Catalog::default();
        for flow in &flows {
            let name = flow["name"].as_str().unwrap_or_default();
            if !wanted(name) {
                continue;
            }
            if let Some(why) = runtime.unavailable(name) {
                // Said only when asked for by name: unasked, it is noise.
                if only.is_some() {
                    catalog.unavailable.push((name.to_string(), why));
                }
                continue;
            }
            if runtime.refuses_every_call(name) {
                catalog.hidden.push(name.to_string());
                continue;
            }
            catalog.entries.push(flow_entry(flow));
        }
        if catalog
            .entries
            .iter()
            .any(|e| e.runs == Runs::Flow("bash".into()))
        {
            catalog.entries.extend(JOB_TOOLS.iter().map(job_entry));
        }
        catalog.entries.extend(lua.iter().map(lua_entry));
        Ok(catalog)
    }

    /// The tools, in order.
    pub fn tools(&self) -> Vec<Tool> {
        self.entries.iter().map(|e| e.tool.clone()).collect()
    }

    /// The tool named `name`.
    pub fn get(&self, name: &str) -> Option<&Entry> {
        self.entries.iter().find(|e| e.tool.name == name)
    }

    /// The names a Lua tool may not take: the flows and the job tools.
    pub fn reserved(runtime: &Runtime) -> Vec<String> {
        let manifest = runtime.manifest();
        let flows = manifest["flows"].as_array().cloned().unwrap_or_default();
        flows
            .iter()
            .filter_map(|f| f["name"].as_str().map(str::to_string))
            .chain(JOB_TOOLS.iter().map(|(n, _, _)| n.to_string()))
            .collect()
    }
}

fn object(v: &Value) -> Arc<JsonObject> {
    Arc::new(v.as_object().cloned().unwrap_or_default())
}

fn flow_entry(flow: &Value) -> Entry {
    let name = flow["name"].as_str().unwrap_or_default().to_string();
    let description = flow["description"].as_str().unwrap_or_default().to_string();
    let tool = Tool::new(name.clone(), description, object(&flow["inputSchema"]))
        .with_raw_output_schema(object(&flow["outputSchema"]))
        .with_annotations(hints(flow));
    Entry {
        tool,
        runs: Runs::Flow(name),
    }
}

/// What a flow's tier and capabilities tell a client: a sealed flow
/// changes nothing (`readOnlyHint`, and calling it twice is calling it
/// once), an irreversible one cannot be taken back (`destructiveHint`),
/// and one that reaches the network, a model or a command reaches past
/// the workspace (`openWorldHint`).
fn hints(flow: &Value) -> ToolAnnotations {
    let tier = flow["tier"].as_str().unwrap_or("irreversible");
    let reaches_out = flow["capabilities"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|c| {
            c.as_str()
                .is_some_and(|c| c.starts_with("net:") || c == "model:call" || c == "proc:spawn")
        });
    ToolAnnotations::new()
        .read_only(tier == "sealed")
        .destructive(tier == "irreversible")
        .idempotent(tier == "sealed")
        .open_world(reaches_out)
}

fn job_entry((name, op, description): &(&str, JobOp, &str)) -> Entry {
    let mut properties = json!({"jobId": {"type": "integer", "minimum": 1, "description": "The job's number, as bash with background = true returned it."}});
    if *op == JobOp::Wait {
        properties["timeoutMs"] = json!({"type": "integer", "minimum": 1, "maximum": 600000, "description": "How long to wait, in milliseconds (default 600000)."});
    }
    let schema = json!({"type": "object", "additionalProperties": false, "required": ["jobId"], "properties": properties});
    let annotations = ToolAnnotations::new()
        .read_only(*op != JobOp::Kill)
        .destructive(*op == JobOp::Kill)
        .open_world(false);
    Entry {
        tool: Tool::new(name.to_string(), description.to_string(), object(&schema))
            .with_annotations(annotations),
        runs: Runs::Job(*op),
    }
}

fn lua_entry(t: &LuaTool) -> Entry {
    Entry {
        tool: Tool::new(t.name.clone(), t.description.clone(), object(&t.input)),
        runs: Runs::Lua(t.name.clone()),
    }
}
