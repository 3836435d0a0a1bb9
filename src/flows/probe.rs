//! `invalidProbe`: the host's own evidence that a command never reached any
//! code, so its non-zero exit says nothing about the code it was meant to
//! probe.
//!
//! Only what the host can establish counts: the launch itself failed (no
//! such interpreter or program, no such working folder), or the line is one
//! simple command whose program is neither a shell builtin nor anywhere on
//! PATH, and the shell then exited 127. Exit codes 126 and 127 alone prove
//! nothing: a launched runner can return either after running a check.

use crate::exec::CommandLine;
use crate::kernel::shell::{analyze, Analysis};
use serde::Serialize;
use std::path::Path;

/// Why a command's result is not about the code it names.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct InvalidProbe {
    /// `unknown-command` or `unknown-path` (the closed list also has
    /// `unknown-test`, `unknown-module` and `unknown-environment`, which
    /// only the `test` flow's judge assigns).
    pub reason: &'static str,
    /// What the host observed.
    pub evidence: String,
    /// What the result does and does not prove.
    pub message: String,
}

const NOT_A_VERDICT: &str = "The command never reached any code, so its exit code is not a verdict on the code it was meant to check. Fix the name and run it again before drawing a conclusion.";

/// Words bash runs without looking on PATH.
const BUILTINS: &[&str] = &[
    ":",
    ".",
    "[",
    "[[",
    "!",
    "{",
    "alias",
    "bg",
    "bind",
    "break",
    "builtin",
    "caller",
    "case",
    "cd",
    "command",
    "compgen",
    "complete",
    "compopt",
    "continue",
    "coproc",
    "declare",
    "dirs",
    "disown",
    "echo",
    "enable",
    "eval",
    "exec",
    "exit",
    "export",
    "false",
    "fc",
    "fg",
    "for",
    "function",
    "getopts",
    "hash",
    "help",
    "history",
    "if",
    "jobs",
    "kill",
    "let",
    "local",
    "logout",
    "mapfile",
    "popd",
    "printf",
    "pushd",
    "pwd",
    "read",
    "readarray",
    "readonly",
    "return",
    "select",
    "set",
    "shift",
    "shopt",
    "source",
    "suspend",
    "test",
    "time",
    "times",
    "trap",
    "true",
    "type",
    "typeset",
    "ulimit",
    "umask",
    "unalias",
    "unset",
    "until",
    "wait",
    "while",
];

/// The program of a line that is one simple command, when it is a word a
/// shell looks for (not a builtin, not computed at run time).
fn lone_program(line: &str) -> Option<String> {
    let Analysis::Parsed(commands) = analyze(line) else {
        return None;
    };
    let [only] = commands.as_slice() else {
        return None;
    };
    let program = only.words.first()?;
    (!only.dynamic && !BUILTINS.contains(&program.as_str())).then(|| program.clone())
}

/// The probe for a line that is one simple command naming a program that
/// does not exist (asked after the shell exited 127); `None` when that
/// cannot be known.
pub fn missing_program(line: &str, cwd: &Path, path_var: Option<&str>) -> Option<InvalidProbe> {
    let program = &lone_program(line)?;
    if program.contains('/') {
        if cwd.join(program).exists() {
            return None;
        }
        return Some(InvalidProbe {
            reason: "unknown-command",
            evidence: format!("no file exists at {program} (from {})", cwd.display()),
            message: NOT_A_VERDICT.into(),
        });
    }
    let path_var = path_var?;
    let found = path_var
        .split(':')
        .filter(|d| !d.is_empty())
        .any(|dir| Path::new(dir).join(program).is_file());
    if found {
        return None;
    }
    Some(InvalidProbe {
        reason: "unknown-command",
        evidence: format!(
            "`{program}` is not a shell builtin and no program of that name is on PATH ({path_var})"
        ),
        message: NOT_A_VERDICT.into(),
    })
}

/// The interpreter or program could not be launched at all.
pub fn unknown_program(launch: &CommandLine, os_message: &str) -> InvalidProbe {
    let program = match launch {
        CommandLine::Argv(argv) => argv
            .first()
            .map(|p| p.to_string_lossy().into_owned())
            .unwrap_or_default(),
        CommandLine::Shell(_) => "the shell".into(),
    };
    InvalidProbe {
        reason: "unknown-command",
        evidence: format!("{program} could not be started: {os_message}"),
        message: NOT_A_VERDICT.into(),
    }
}

/// The working folder does not exist.
pub fn unknown_cwd(cwd: &Path) -> InvalidProbe {
    InvalidProbe {
        reason: "unknown-path",
        evidence: format!("the working folder {} does not exist", cwd.display()),
        message: "The command never started because its working folder does not exist, so there is no result to read. Fix `cwd` and run it again.".into(),
    }
}

/// A routed command that exited 127 when its line is one simple command and
/// the container's shell said that program was not found: the container's
/// own words are the evidence, since the host cannot look inside.
pub fn missing_in_container(line: &str, stderr: &str, container: &str) -> Option<InvalidProbe> {
    let program = lone_program(line)?;
    let said = stderr
        .lines()
        .find(|l| l.contains(program.as_str()) && l.contains("not found"))?;
    Some(InvalidProbe {
        reason: "unknown-command",
        evidence: format!("in container {container}: {}", said.trim()),
        message: NOT_A_VERDICT.into(),
    })
}

/// A routed command whose working folder does not exist in the container,
/// in the engine's words.
pub fn unknown_cwd_in_container(cwd: &str, said: &str, container: &str) -> InvalidProbe {
    InvalidProbe {
        reason: "unknown-path",
        evidence: format!("the working folder {cwd} does not exist in container {container}: {}", said.trim()),
        message: "The command never started because its working folder does not exist, so there is no result to read. Fix `cwd` and run it again.".into(),
    }
}
