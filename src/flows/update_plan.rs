//! `update_plan`: the agent's plan, step by step, each `pending`,
//! `in_progress` or `completed`. The call changes nothing in the world: its
//! input is the plan, which the record keeps, so `sluice audit show` shows
//! a run's latest plan and an MCP client reads it back as a resource. At
//! most one step is in progress at a time, so whoever reads the plan knows
//! what the agent is doing now.

use super::{closed, field, Context, Envelope, Flow, FlowSpec, Tier};
use crate::error::{FlowError, FlowResult};
use crate::kernel::gate::Authorized;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

/// The most steps a plan holds: a plan longer than this is a list of
/// chores, not a plan.
pub const MAX_STEPS: usize = 100;
/// The most characters of one step.
pub const MAX_STEP_CHARS: usize = 1_000;
/// The most characters of the explanation.
pub const MAX_EXPLANATION_CHARS: usize = 4_000;
/// What every successful call returns.
pub const UPDATED: &str = "Plan updated";

/// The statuses a step may have, in the order a step goes through them.
pub const STATUSES: [&str; 3] = ["pending", "in_progress", "completed"];

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Input {
    pub explanation: Option<String>,
    pub plan: Vec<Step>,
}

/// One step of the plan.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Step {
    pub step: String,
    pub status: String,
}

#[derive(Debug, Serialize)]
pub struct Output {
    output: &'static str,
}

/// A planned call: there is nothing to do once it is authorized.
pub struct UpdatePlan;

impl Flow for UpdatePlan {
    type Input = Input;
    type Output = Output;
    const SPEC: FlowSpec = FlowSpec {
        name: "update_plan",
        description: "Records the agent's plan: each step pending, in_progress or completed, at most one in progress; the latest plan shows in the audit and to MCP clients.",
        tier: Tier::Sealed,
        actions: &[],
        read_only: true,
        schema,
        summary,
        starts_jobs: false,
        stored_once: None,
        errors: &[],
    };

    fn output_schema() -> Value {
        closed(
            &[("output", field("string", "Always \"Plan updated\"."))],
            &[],
        )
    }

    #[cfg(test)]
    fn output_samples() -> Vec<Output> {
        vec![Output { output: UPDATED }]
    }

    fn validate(input: &Input) -> FlowResult<()> {
        check(input)
    }

    fn plan(_ctx: &Context, _input: Input) -> FlowResult<(Self, Envelope)> {
        Ok((UpdatePlan, Envelope::new(Tier::Sealed)))
    }

    async fn execute(self, _ctx: &Context, _: Authorized) -> FlowResult<Output> {
        Ok(Output { output: UPDATED })
    }
}

/// The input's rules: a known status for each step, a step's text not
/// empty, the bounds, and at most one step in progress (else the error
/// names every step that claims to be).
fn check(input: &Input) -> FlowResult<()> {
    if let Some(e) = &input.explanation {
        if e.chars().count() > MAX_EXPLANATION_CHARS {
            return Err(FlowError::invalid_input(
                "explanation",
                format!("explanation is over {MAX_EXPLANATION_CHARS} characters; say why the plan changed in a few sentences"),
            ));
        }
    }
    if input.plan.len() > MAX_STEPS {
        return Err(FlowError::invalid_input(
            "plan",
            format!(
                "plan has {} steps; it holds at most {MAX_STEPS}: merge small steps",
                input.plan.len()
            ),
        ));
    }
    for (i, s) in input.plan.iter().enumerate() {
        let at = |f: &str| format!("plan[{}].{f}", i + 1);
        if s.step.trim().is_empty() || s.step.chars().count() > MAX_STEP_CHARS {
            return Err(FlowError::invalid_input(
                &at("step"),
                format!(
                    "{} is empty or over {MAX_STEP_CHARS} characters; a step is one short sentence",
                    at("step")
                ),
            ));
        }
        if !STATUSES.contains(&s.status.as_str()) {
            return Err(FlowError::invalid_input(
                &at("status"),
                format!(
                    "{} is {:?} (step {:?}); it is one of {}",
                    at("status"),
                    s.status,
                    s.step,
                    STATUSES.join(", ")
                ),
            ));
        }
    }
    let busy: Vec<&str> = input
        .plan
        .iter()
        .filter(|s| s.status == "in_progress")
        .map(|s| s.step.as_str())
        .collect();
    if busy.len() > 1 {
        let named: Vec<String> = busy.iter().map(|s| format!("{s:?}")).collect();
        return Err(FlowError::invalid_input(
            "plan",
            format!(
                "{} steps are in_progress ({}); at most one step is in progress at a time: mark the others pending or completed",
                busy.len(),
                named.join(", ")
            ),
        )
        .with("steps", json!(busy)));
    }
    Ok(())
}

/// The audit's one-line gist: how far the plan is, and the step in
/// progress.
fn summary(input: &Value) -> String {
    let Some(plan) = input.get("plan").and_then(Value::as_array) else {
        return input.to_string();
    };
    let status = |s: &Value| s.get("status").and_then(Value::as_str).map(str::to_string);
    let done = plan
        .iter()
        .filter(|s| status(s).as_deref() == Some("completed"))
        .count();
    let mut gist = format!("{done}/{} done", plan.len());
    if let Some(now) = plan
        .iter()
        .find(|s| status(s).as_deref() == Some("in_progress"))
    {
        let step = now.get("step").and_then(Value::as_str).unwrap_or_default();
        gist.push_str(&format!(", now: {step}"));
    }
    gist
}

fn schema() -> Value {
    json!({
        "type": "object",
        "additionalProperties": false,
        "required": ["plan"],
        "properties": {
            "explanation": {"type": "string", "maxLength": MAX_EXPLANATION_CHARS, "description": "Why the plan is what it is now (optional)."},
            "plan": {
                "type": "array",
                "maxItems": MAX_STEPS,
                "description": "The whole plan, in order; at most one step in_progress.",
                "items": {
                    "type": "object",
                    "title": "PlanStep",
                    "additionalProperties": false,
                    "required": ["step", "status"],
                    "description": "One step of the plan.",
                    "properties": {
                        "step": {"type": "string", "description": "What the step does, one short sentence."},
                        "status": {"type": "string", "enum": STATUSES, "description": "pending, in_progress or completed."}
                    }
                }
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn input(v: Value) -> Input {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn two_steps_in_progress_are_refused_naming_both() {
        let e = check(&input(json!({"plan": [
            {"step": "read", "status": "completed"},
            {"step": "fix it", "status": "in_progress"},
            {"step": "test it", "status": "in_progress"},
        ]})))
        .unwrap_err();
        assert_eq!(e.details["field"], "plan");
        assert_eq!(e.details["steps"], json!(["fix it", "test it"]));
        assert!(
            e.message.contains("\"fix it\", \"test it\""),
            "{}",
            e.message
        );
    }

    #[test]
    fn an_unknown_status_is_named_with_its_place() {
        let e = check(&input(
            json!({"plan": [{"step": "a", "status": "pending"}, {"step": "b", "status": "done"}]}),
        ))
        .unwrap_err();
        assert_eq!(e.details["field"], "plan[2].status");
        assert!(
            e.message.contains("\"done\"") && e.message.contains("pending, in_progress, completed"),
            "{}",
            e.message
        );
    }

    #[test]
    fn the_gist_counts_the_done_and_names_the_step_in_progress() {
        let v = json!({"plan": [{"step": "a", "status": "completed"}, {"step": "b", "status": "in_progress"}]});
        assert_eq!(summary(&v), "1/2 done, now: b");
        assert!(check(&input(v)).is_ok());
        assert_eq!(summary(&json!({"plan": []})), "0/0 done");
    }
}
