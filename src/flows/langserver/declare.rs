//! The language servers the operator declares: a policy's `lsp` table
//! (`lsp = {python = {command = {...}, extensions = {".py"}, ...}}`) or
//! `sluice run --lsp NAME=EXTS:COMMAND`. The declaration is checked when
//! the run is built; what a server is started as is decided here, never by
//! a call.

use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// How long a server's pushed diagnostics may keep coming after the first
/// publish that follows a change, by default: none. A server that
/// publishes without a version publishes once per change (typescript-
/// language-server), so the first publish after it is its answer, and a
/// fixed wait would only add latency; one that publishes in stages sets
/// `settleMs`.
pub const DEFAULT_SETTLE_MS: u64 = 0;

/// How long a call (and an edit's diagnostics) waits for a server, by
/// default: a server still indexing a large project may need this long.
pub const DEFAULT_TIMEOUT_MS: u64 = 30_000;

/// The most `timeoutMs` may be: ten minutes.
pub const MAX_TIMEOUT_MS: u64 = 600_000;

/// The memory a server may use, by default: 2 GiB.
pub const DEFAULT_MEMORY_MB: u64 = 2048;

/// Programs that run what their arguments name: a server declared as one
/// would be any program (`sh -c`, `env X`, `npx pkg`), which the operator
/// should name directly instead.
const LAUNCHERS: &[&str] = &[
    "sh", "bash", "dash", "zsh", "ksh", "mksh", "fish", "csh", "tcsh", "busybox", "env", "npx",
    "pnpx", "bunx", "yarn", "pnpm", "npm", "sudo", "doas", "nohup", "setsid", "xargs", "exec",
    "ash",
];

const EXAMPLE: &str = "lsp = {python = {command = {\"basedpyright-langserver\", \"--stdio\"}, extensions = {\".py\"}}}";

/// One declared language server.
#[derive(Debug, Clone, PartialEq)]
pub struct Declared {
    /// Its name (`python`): what outputs call it.
    pub name: String,
    /// Who declared it, for messages: `policy NAME` or `--lsp`.
    pub from: String,
    /// The program and its arguments, run as given (never by a shell).
    pub command: Vec<String>,
    /// The file name endings it serves (`.py`), with their dot.
    pub extensions: Vec<String>,
    /// What `initialize` sends as `initializationOptions`.
    pub initialization_options: Option<Value>,
    /// What `workspace/configuration` answers (by section, or whole).
    pub settings: Option<Value>,
    /// How long pushed diagnostics may keep coming, in milliseconds.
    pub settle_ms: u64,
    /// Its memory limit in MiB.
    pub memory_mb: u64,
    /// How long a call, and an edit's diagnostics, wait for it.
    pub timeout_ms: u64,
    /// Variables added to its (scrubbed) environment.
    pub env: BTreeMap<String, String>,
}

const FIELDS: &[&str] = &[
    "command",
    "extensions",
    "initializationOptions",
    "settings",
    "settleMs",
    "memoryMb",
    "timeoutMs",
    "env",
];

impl Declared {
    /// Server `name` as `from` declared it in `table` (a policy's
    /// `lsp.NAME`, as JSON). An error names the field and what it takes.
    pub fn from_table(from: &str, name: &str, table: &Value) -> Result<Declared, String> {
        let fail = |field: &str, what: &str| format!("{from}: lsp.{name}.{field} {what}");
        let Value::Object(map) = table else {
            return Err(format!("{from}: lsp.{name} is a table: {EXAMPLE}"));
        };
        if let Some(key) = map.keys().find(|k| !FIELDS.contains(&k.as_str())) {
            return Err(fail(
                key,
                &format!(
                    "is not a field of a language server; its fields are {}: {EXAMPLE}",
                    FIELDS.join(", ")
                ),
            ));
        }
        let strings = |field: &str| -> Result<Vec<String>, String> {
            match map.get(field) {
                None | Some(Value::Null) => Ok(Vec::new()),
                Some(Value::Array(items)) => items
                    .iter()
                    .map(|i| match i {
                        Value::String(s) if !s.is_empty() && !s.contains('\0') => Ok(s.clone()),
                        _ => Err(fail(field, "is a list of non-empty strings")),
                    })
                    .collect(),
                Some(_) => Err(fail(field, "is a list of non-empty strings")),
            }
        };
        let command = strings("command")?;
        if command.is_empty() {
            return Err(fail(
                "command",
                &format!("is missing: the server's program and arguments, {EXAMPLE}"),
            ));
        }
        let extensions = strings("extensions")?;
        if extensions.is_empty()
            || extensions
                .iter()
                .any(|e| !e.starts_with('.') || e.len() < 2 || e.contains('/'))
        {
            return Err(fail(
                "extensions",
                "is a non-empty list of file name endings with their dot, e.g. {\".py\", \".pyi\"}",
            ));
        }
        let number = |field: &str, floor: u64, default: u64| -> Result<u64, String> {
            match map.get(field) {
                None | Some(Value::Null) => Ok(default),
                Some(v) => v
                    .as_u64()
                    .filter(|n| *n >= floor && *n <= 1 << 30)
                    .ok_or_else(|| fail(field, &format!("is a whole number, at least {floor}"))),
            }
        };
        let declared = Declared {
            name: name.to_string(),
            from: from.to_string(),
            command,
            extensions,
            initialization_options: map
                .get("initializationOptions")
                .filter(|v| !v.is_null())
                .cloned(),
            settings: map.get("settings").filter(|v| !v.is_null()).cloned(),
            settle_ms: number("settleMs", 0, DEFAULT_SETTLE_MS)?,
            memory_mb: number("memoryMb", 64, DEFAULT_MEMORY_MB)?,
            timeout_ms: number("timeoutMs", 1, DEFAULT_TIMEOUT_MS)?.min(MAX_TIMEOUT_MS),
            env: env(&fail, map.get("env"))?,
        };
        declared.check_name()?;
        Ok(declared)
    }

    /// A server as `sluice run --lsp NAME=EXTS:COMMAND` declares it:
    /// `python=.py,.pyi:basedpyright-langserver --stdio` (the command split
    /// at spaces, never by a shell).
    pub fn from_flag(flag: &str) -> Result<Declared, String> {
        let shape = "--lsp takes NAME=EXTENSIONS:COMMAND, e.g. --lsp 'python=.py,.pyi:basedpyright-langserver --stdio'";
        let (name, rest) = flag
            .split_once('=')
            .ok_or_else(|| format!("{shape}; got {flag:?}"))?;
        let (exts, command) = rest
            .split_once(':')
            .ok_or_else(|| format!("{shape}; got {flag:?}"))?;
        let table = serde_json::json!({
            "command": command.split_whitespace().collect::<Vec<_>>(),
            "extensions": exts.split(',').filter(|e| !e.is_empty()).collect::<Vec<_>>(),
        });
        Declared::from_table("--lsp", name, &table)
    }

    fn check_name(&self) -> Result<(), String> {
        let fine = |c: char| c.is_ascii_alphanumeric() || "_-.".contains(c);
        if self.name.is_empty() || !self.name.chars().all(fine) {
            return Err(format!(
                "{}: lsp server name {:?}: use letters, digits, '_', '-' and '.'",
                self.from, self.name
            ));
        }
        Ok(())
    }

    /// Refuses what the server may not be started as: a launcher (the
    /// program is then whatever its arguments say), or a program or
    /// script inside the workspace (a file the run's calls can write).
    /// `path` is the `PATH` the program is looked up in; a program not
    /// found is refused only when it is started ([`Declared::program`]).
    pub fn refuse(&self, workspace: &Path, path: Option<&str>) -> Result<(), String> {
        let program = &self.command[0];
        let field = self.field();
        let base = program.rsplit('/').next().unwrap_or(program);
        if LAUNCHERS.contains(&base) || self.command.iter().skip(1).any(|a| a == "-c") {
            return Err(format!(
                "{field} starts {program}, a launcher that runs whatever its arguments name; name the language server's own program instead (e.g. {{\"basedpyright-langserver\", \"--stdio\"}})"
            ));
        }
        // The server starts in the workspace: a relative program with a
        // slash is found there.
        let found = match Path::new(program) {
            p if p.is_relative() && program.contains('/') => Some(workspace.join(p)),
            _ => self.program(path).ok(),
        };
        // A launcher behind a link of another name (`mysh` to /bin/sh,
        // `ash` to busybox) is known by what the link resolves to.
        let real_base = found
            .as_ref()
            .and_then(|f| std::fs::canonicalize(f).ok())
            .and_then(|r| r.file_name().map(|n| n.to_string_lossy().into_owned()));
        if let Some(real) = real_base.filter(|r| LAUNCHERS.contains(&r.as_str())) {
            return Err(format!(
                "{field} starts {program}, which is {real}, a launcher that runs whatever its arguments name; name the language server's own program instead"
            ));
        }
        // A folder counts too: `python3 pkg` runs pkg/__main__.py, `node .`
        // the workspace's package.
        let args = self
            .command
            .iter()
            .skip(1)
            .map(|a| workspace.join(a))
            .filter(|p| p.exists());
        for file in found.into_iter().chain(args) {
            let real = std::fs::canonicalize(&file).unwrap_or(file);
            if real.starts_with(workspace) {
                return Err(format!(
                    "{field}: {} is inside the workspace, which the run's calls can write; install the server outside the workspace and name that program",
                    real.display()
                ));
            }
        }
        Ok(())
    }

    /// The program the server is started as, found in `path` when its
    /// name has no slash.
    pub fn program(&self, path: Option<&str>) -> Result<PathBuf, String> {
        let program = &self.command[0];
        let found = if program.contains('/') {
            Some(PathBuf::from(program)).filter(|p| p.is_file())
        } else {
            std::env::split_paths(path.unwrap_or_default())
                .map(|d| d.join(program))
                .find(|p| p.is_file())
        };
        found.ok_or_else(|| {
            format!(
                "{}: {program} is not installed (not found{}); install it or give its absolute path",
                self.field(),
                if program.contains('/') { "" } else { " in PATH" }
            )
        })
    }

    fn field(&self) -> String {
        format!("{}: lsp.{}.command", self.from, self.name)
    }

    /// Whether it serves `path` (by its name's ending).
    pub fn serves(&self, path: &Path) -> bool {
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy())
            .unwrap_or_default();
        self.extensions
            .iter()
            .any(|e| name.ends_with(e.as_str()) && name.len() > e.len())
    }
}

fn env(
    fail: &dyn Fn(&str, &str) -> String,
    given: Option<&Value>,
) -> Result<BTreeMap<String, String>, String> {
    let bad = || {
        fail(
            "env",
            "is a table of names to strings, e.g. env = {PYTHONPATH = \"/opt/lsp\"}",
        )
    };
    let Some(given) = given.filter(|v| !v.is_null()) else {
        return Ok(BTreeMap::new());
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
    crate::exec::env::validate(&env).map_err(|e| fail("env", &e.message))?;
    Ok(env)
}

/// Every server of the run: the policies' (each `(policy, declarations)`)
/// and the flags'. Two servers for one extension is an error: which one
/// answers must not depend on load order.
pub fn all(
    policies: &[(String, BTreeMap<String, Value>)],
    flags: &[String],
) -> Result<Vec<Declared>, String> {
    let mut out: Vec<Declared> = Vec::new();
    for (policy, list) in policies {
        for (name, table) in list {
            out.push(Declared::from_table(
                &format!("policy {policy}"),
                name,
                table,
            )?);
        }
    }
    for flag in flags {
        out.push(Declared::from_flag(flag)?);
    }
    for (i, a) in out.iter().enumerate() {
        for b in &out[..i] {
            if a.name == b.name {
                return Err(format!(
                    "{} declares lsp server {}, and so does {}; declare each server once",
                    a.from, a.name, b.from
                ));
            }
            if let Some(e) = a.extensions.iter().find(|e| b.extensions.contains(e)) {
                return Err(format!("lsp servers {} ({}) and {} ({}) both serve {e}; give each extension one server", a.name, a.from, b.name, b.from));
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_server_is_read_with_every_field_and_defaults() {
        let d = Declared::from_table(
            "policy p",
            "python",
            &json!({"command": ["pyls", "--stdio"], "extensions": [".py"], "settleMs": 50, "env": {"A": "1"}}),
        )
        .unwrap();
        assert_eq!(d.command, vec!["pyls", "--stdio"]);
        assert_eq!(d.settle_ms, 50);
        assert_eq!(d.memory_mb, DEFAULT_MEMORY_MB);
        assert_eq!(d.env["A"], "1");
        assert!(d.serves(Path::new("a/b.py")));
        assert!(!d.serves(Path::new("a/b.pyc")));
    }

    #[test]
    fn unknown_fields_and_bad_values_name_the_field() {
        let e = Declared::from_table(
            "policy p",
            "py",
            &json!({"command": ["x"], "extensions": [".py"], "cmd": 1}),
        )
        .unwrap_err();
        assert!(e.starts_with("policy p: lsp.py.cmd is not a field"), "{e}");
        let e = Declared::from_table(
            "policy p",
            "py",
            &json!({"command": ["x"], "extensions": ["py"]}),
        )
        .unwrap_err();
        assert!(e.starts_with("policy p: lsp.py.extensions "), "{e}");
        let e =
            Declared::from_table("policy p", "py", &json!({"extensions": [".py"]})).unwrap_err();
        assert!(e.starts_with("policy p: lsp.py.command is missing"), "{e}");
        let e = Declared::from_table(
            "policy p",
            "py",
            &json!({"command": ["x"], "extensions": [".py"], "memoryMb": 1}),
        )
        .unwrap_err();
        assert!(
            e.starts_with("policy p: lsp.py.memoryMb is a whole number, at least 64"),
            "{e}"
        );
    }

    #[test]
    fn the_flag_splits_name_extensions_and_command() {
        let d = Declared::from_flag("python=.py,.pyi:basedpyright-langserver --stdio").unwrap();
        assert_eq!(d.name, "python");
        assert_eq!(d.extensions, vec![".py", ".pyi"]);
        assert_eq!(d.command, vec!["basedpyright-langserver", "--stdio"]);
        assert!(Declared::from_flag("python:.py").is_err());
    }

    #[test]
    fn launchers_and_programs_in_the_workspace_are_refused() {
        let ws = tempfile::tempdir().unwrap();
        let ws = std::fs::canonicalize(ws.path()).unwrap();
        let mine = ws.join("server");
        std::fs::write(&mine, "").unwrap();
        for command in [
            json!(["sh", "-c", "x"]),
            json!(["/usr/bin/env", "pyls"]),
            json!(["npx", "pyls"]),
            json!(["python3", "-c", "x"]),
        ] {
            let d = Declared::from_table(
                "--lsp",
                "x",
                &json!({"command": command, "extensions": [".x"]}),
            )
            .unwrap();
            let e = d.refuse(&ws, Some("/usr/bin:/bin")).unwrap_err();
            assert!(e.contains("a launcher"), "{e}");
        }
        let d = Declared::from_table(
            "--lsp",
            "x",
            &json!({"command": [mine.display().to_string()], "extensions": [".x"]}),
        )
        .unwrap();
        let e = d.refuse(&ws, None).unwrap_err();
        assert!(e.contains("is inside the workspace"), "{e}");
        let d = Declared::from_table(
            "--lsp",
            "x",
            &json!({"command": ["/usr/bin/python3", "server"], "extensions": [".x"]}),
        )
        .unwrap();
        let e = d.refuse(&ws, None).unwrap_err();
        assert!(e.contains("is inside the workspace"), "{e}");
    }

    #[test]
    fn two_servers_for_one_extension_are_refused() {
        let p = vec![(
            "p".to_string(),
            BTreeMap::from([(
                "a".to_string(),
                json!({"command": ["x"], "extensions": [".py"]}),
            )]),
        )];
        let e = all(&p, &["b=.py:y".to_string()]).unwrap_err();
        assert!(e.contains("both serve .py"), "{e}");
    }
}
