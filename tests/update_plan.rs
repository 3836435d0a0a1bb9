//! `update_plan` through the `sluice` binary: a plan is accepted and
//! answered "Plan updated", two steps in progress are refused naming both,
//! an unknown status is named with its place, and `sluice audit show`
//! shows the run's latest plan with each step's status.

mod common;

use common::{lua, sluice_in, workspace};
use serde_json::json;

const PLANS: &str = r#"
local function show(r, e) if r then emit(r) else emit({code = e.code, field = e.field, steps = e.steps, message = e.message}) end end
show(sluice.update_plan{plan = {{step = "Read the failing test", status = "in_progress"}, {step = "Fix mean()", status = "pending"}}})
show(sluice.update_plan{plan = {{step = "Fix mean()", status = "in_progress"}, {step = "Run the tests", status = "in_progress"}}})
show(sluice.update_plan{plan = {{step = "Fix mean()", status = "done"}}})
show(sluice.update_plan{explanation = "The bug is in mean().", plan = {
  {step = "Read the failing test", status = "completed"},
  {step = "Fix mean()", status = "in_progress"},
  {step = "Run the tests", status = "pending"},
}})
"#;

#[test]
fn a_plan_is_recorded_two_in_progress_and_an_unknown_status_are_refused_by_name() {
    let ws = workspace();
    let out = lua(&ws, &[], PLANS);
    assert_eq!(out[0], json!({"output": "Plan updated"}));
    assert_eq!(out[1]["code"], "invalid_input");
    assert_eq!(out[1]["field"], "plan");
    assert_eq!(out[1]["steps"], json!(["Fix mean()", "Run the tests"]));
    let message = out[1]["message"].as_str().unwrap();
    assert!(
        message.contains("2 steps are in_progress (\"Fix mean()\", \"Run the tests\")"),
        "{message}"
    );
    assert_eq!(out[2]["code"], "invalid_input");
    assert_eq!(out[2]["field"], "plan[1].status");
    let message = out[2]["message"].as_str().unwrap();
    assert!(
        message.contains("\"done\"") && message.contains("pending, in_progress, completed"),
        "{message}"
    );
    assert_eq!(out[3], json!({"output": "Plan updated"}));

    // The latest plan that was accepted, under the timeline, statuses and
    // all; the refused ones set nothing.
    let show = sluice_in(ws.path(), &["audit", "show", "last"]);
    assert_eq!(show.code, 0, "{}", show.stderr);
    let plan = show
        .stdout
        .split("\nPLAN ")
        .nth(1)
        .unwrap_or_else(|| panic!("no plan in:\n{}", show.stdout));
    let plan: Vec<&str> = plan.lines().take(4).collect();
    assert_eq!(
        plan,
        [
            "(latest, set by call #4): The bug is in mean().",
            "  [x] Read the failing test (completed)",
            "  [>] Fix mean() (in_progress)",
            "  [ ] Run the tests (pending)",
        ],
        "{}",
        show.stdout
    );
    // Each call's gist says how far the plan was.
    assert!(
        show.stdout.contains("1/3 done, now: Fix mean()"),
        "{}",
        show.stdout
    );
}

#[test]
fn a_run_without_a_plan_shows_none() {
    let ws = workspace();
    std::fs::write(ws.file("a.txt"), "a\n").unwrap();
    lua(&ws, &[], r#"emit(sluice.read{path = "a.txt"})"#);
    let show = sluice_in(ws.path(), &["audit", "show", "last"]);
    assert_eq!(show.code, 0, "{}", show.stderr);
    assert!(!show.stdout.contains("PLAN"), "{}", show.stdout);
}

/// The agent loop offers both new flows like any other: `sluice.tools`
/// gives each its manifest description and input schema.
#[test]
fn sluice_tools_offers_update_plan_and_explore_to_an_agent() {
    let ws = workspace();
    let out = lua(
        &ws,
        &[],
        r#"for _, t in ipairs(sluice.tools{"update_plan", "explore"}) do
  emit({name = t.name, required = t.input.required, described = #t.description > 0})
end"#,
    );
    assert_eq!(
        out,
        [
            json!({"name": "update_plan", "required": ["plan"], "described": true}),
            json!({"name": "explore", "required": ["prompt"], "described": true}),
        ]
    );
}
