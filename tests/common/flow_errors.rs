//! The error codes each flow declares (`errors` in `sluice flows --json`,
//! the reference's `errors` line), and the check that a test file's
//! scenarios make exactly those happen: `tests/flow_errors_files.rs` for
//! the flows on files, `tests/flow_errors_world.rs` for the rest.

use std::collections::BTreeSet;

/// The flows whose codes `tests/flow_errors_files.rs` makes happen.
pub const FILE_FLOWS: &[&str] = &[
    "read",
    "write",
    "edit",
    "apply_patch",
    "ls",
    "glob",
    "grep",
    "update_plan",
];

/// The flows whose codes `tests/flow_errors_world.rs` makes happen.
pub const WORLD_FLOWS: &[&str] = &[
    "bash",
    "shell_command",
    "fetch",
    "http-post",
    "webfetch",
    "websearch",
    "model",
    "test",
    "lsp",
    "explore",
];

/// The codes `flow` declares, as `sluice flows FLOW --json` gives them.
pub fn declared(flow: &str) -> BTreeSet<String> {
    let out = std::process::Command::new(super::sluice_bin())
        .args(["flows", flow, "--json"])
        .output()
        .unwrap();
    assert!(out.status.success(), "sluice flows {flow} --json failed");
    let spec: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    spec["errors"]
        .as_array()
        .unwrap_or_else(|| panic!("{flow}'s spec has no errors list: {spec}"))
        .iter()
        .map(|c| c.as_str().unwrap().to_string())
        .collect()
}

/// Every code each of `flows` declares has a scenario among `scenarios`
/// (`(flow, code)` pairs), and every scenario is of a declared code: a
/// code added without a test, or a test of a code the reference does not
/// list, fails here.
pub fn assert_scenarios_match(flows: &[&str], scenarios: &[(&str, &str)]) {
    for flow in flows {
        let made: BTreeSet<String> = scenarios
            .iter()
            .filter(|(f, _)| f == flow)
            .map(|(_, c)| c.to_string())
            .collect();
        assert_eq!(
            declared(flow),
            made,
            "{flow}: the codes its spec declares (left) and those the scenarios make happen (right) differ"
        );
    }
    for (flow, _) in scenarios {
        assert!(
            flows.contains(flow),
            "a scenario of {flow}, which this file does not cover"
        );
    }
}
