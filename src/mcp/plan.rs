//! The `sluice://plan` resource: the latest plan a client set with the
//! `update_plan` tool, which it reads back as JSON (`{explanation, plan =
//! [{step, status}]}`; `{plan: []}` before any). Each client session
//! keeps its own, as its jobs are its own; with `--shared-run`, and for
//! requests of the 2026 protocol over HTTP (which belong to no session),
//! the run keeps one for all. The record keeps every plan whatever a
//! client reads (`sluice audit show` shows the latest).

use crate::runtime::{Outcome, Tool as Runs};
use rmcp::model::{CacheScope, ReadResourceResult, Resource, ResourceContents};
use rmcp::ErrorData;
use serde_json::{json, Value};
use std::sync::Mutex;

/// The resource's URI.
pub const URI: &str = "sluice://plan";

/// The latest plan one owner (a session, or the run) set.
#[derive(Default)]
pub struct Latest(Mutex<Option<Value>>);

impl Latest {
    /// Keeps `input` when it was an `update_plan` call that succeeded.
    pub fn note(&self, runs: &Runs, input: &Value, outcome: &Outcome) {
        let planned = matches!(runs, Runs::Flow(f) if f == "update_plan");
        if planned && matches!(outcome, Outcome::Done(_)) {
            *self.0.lock().unwrap_or_else(|e| e.into_inner()) = Some(input.clone());
        }
    }

    /// `resources/read` of `uri`: the plan as JSON text, never cached (the
    /// next `update_plan` changes it).
    pub fn read(&self, uri: &str) -> Result<ReadResourceResult, ErrorData> {
        if uri != URI {
            return Err(ErrorData::resource_not_found(
                format!("there is no resource {uri:?}; the one resource is {URI}"),
                None,
            ));
        }
        let plan = self.0.lock().unwrap_or_else(|e| e.into_inner()).clone();
        let text = plan.unwrap_or_else(|| json!({"plan": []})).to_string();
        let contents = ResourceContents::TextResourceContents {
            uri: URI.into(),
            mime_type: Some("application/json".into()),
            text,
            meta: None,
        };
        Ok(ReadResourceResult::new(vec![contents])
            .with_ttl_ms(0)
            .with_cache_scope(CacheScope::Private))
    }
}

/// The resource as `resources/list` shows it.
pub fn resource() -> Resource {
    Resource::new(URI, "plan")
        .with_title("The agent's plan")
        .with_description("The latest plan this client set with update_plan, as JSON: {explanation, plan = [{step, status}]}.")
        .with_mime_type("application/json")
}
