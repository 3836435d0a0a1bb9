//! Real toolchain use under the default policy, confined: a venv with a
//! local wheel installed by pip, a cargo build of a crate with a vendored
//! dependency, an npm install of a local tarball, pytest. Each tool writes
//! its caches to the workspace's private ones, never to the user's.
//! Each works in a project folder of the workspace: under landlock nothing
//! new can be made at the top of the workspace, which holds the hidden
//! `.sluice` (README, "Confined commands").

mod common;

use common::*;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

/// Runs `line` confined by `runner` under the default policy; the result.
fn run(ws: &Workspace, runner: &str, line: &str) -> Value {
    need_bwrap();
    let script = format!(
        "local r, e = sluice.bash{{command = {}, timeoutMs = 300000}}\nprint(sluice.json.encode(r or e))",
        lua_str(line)
    );
    let run = run_lua_with(ws.path(), &script, &["--sandbox", runner], &[]).ok();
    serde_json::from_str(run.stdout.trim()).unwrap_or_else(|e| panic!("{e}: {}", run.stdout))
}

fn put(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

/// Every file under a folder with its modification time.
type State = Vec<(PathBuf, Option<SystemTime>)>;

/// What the user's cache at `dir` holds.
fn state(dir: &Path) -> State {
    let mut out = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in entries.flatten() {
            let meta = e.metadata().ok();
            if meta.as_ref().is_some_and(|m| m.is_dir()) {
                todo.push(e.path());
            }
            out.push((e.path(), meta.and_then(|m| m.modified().ok())));
        }
    }
    out.sort();
    out
}

/// The user's own caches of pip and npm, and what they hold now.
fn user_caches() -> Vec<(PathBuf, State)> {
    let home = PathBuf::from(std::env::var("HOME").unwrap());
    [home.join(".cache/pip"), home.join(".npm")]
        .into_iter()
        .map(|d| {
            let s = state(&d);
            (d, s)
        })
        .collect()
}

fn ok(runner: &str, what: &str, out: &Value) -> String {
    assert_eq!(out["exitCode"], 0, "{runner} {what}: {out}");
    out["stdout"].as_str().unwrap().to_string()
}

/// A wheel built by hand: a zip with the module and its dist-info.
fn wheel(dir: &Path) -> PathBuf {
    let path = dir.join("hello-0.1-py3-none-any.whl");
    let program = format!(
        "import zipfile\nz = zipfile.ZipFile({:?}, 'w')\n\
         z.writestr('hello/__init__.py', 'def greet():\\n    return \"hello from a wheel\"\\n')\n\
         z.writestr('hello-0.1.dist-info/METADATA', 'Metadata-Version: 2.1\\nName: hello\\nVersion: 0.1\\n')\n\
         z.writestr('hello-0.1.dist-info/WHEEL', 'Wheel-Version: 1.0\\nGenerator: test\\nRoot-Is-Purelib: true\\nTag: py3-none-any\\n')\n\
         z.writestr('hello-0.1.dist-info/RECORD', '')\nz.close()\n",
        path.display().to_string()
    );
    let out = std::process::Command::new("python3")
        .args(["-c", &program])
        .output()
        .unwrap();
    assert_ran(&out);
    path
}

#[test]
fn a_venv_takes_a_local_wheel_from_pip_and_pytest_runs_with_the_users_caches_untouched() {
    need_program("pytest-3", "apt-get install python3-pytest");
    for runner in runners() {
        let ws = workspace();
        let before = user_caches();
        std::fs::create_dir_all(ws.file("proj")).unwrap();
        wheel(&ws.file("proj"));
        let out = run(
            &ws,
            &runner,
            "cd proj && python3 -m venv venv && venv/bin/pip install --no-index -q ./hello-0.1-py3-none-any.whl \
             && venv/bin/python -c 'import hello; print(hello.greet())'",
        );
        assert_eq!(ok(&runner, "pip", &out), "hello from a wheel\n");
        put(
            &ws.file("proj/tests/test_math.py"),
            "def test_adds():\n    assert 1 + 1 == 2\n",
        );
        let out = run(&ws, &runner, "cd proj && pytest-3 -q tests");
        assert!(
            ok(&runner, "pytest", &out).contains("1 passed"),
            "{runner}: {out}"
        );
        // pip kept what it caches in the workspace's private cache.
        let private = caches_of(ws.path());
        assert!(
            private.join("workspaces").is_dir(),
            "{runner}: no private caches at {}",
            private.display()
        );
        assert_eq!(user_caches(), before, "{runner}: the user's caches changed");
    }
}

#[test]
fn cargo_builds_a_crate_with_a_vendored_dependency_into_private_caches() {
    need_program("cargo", "install Rust with rustup");
    for runner in runners() {
        let ws = workspace();
        put(
            &ws.file("app/Cargo.toml"),
            "[package]\nname = \"app\"\nversion = \"0.1.0\"\nedition = \"2021\"\n[dependencies]\ndep = \"0.1\"\n",
        );
        put(
            &ws.file("app/src/main.rs"),
            "fn main() { println!(\"{}\", dep::answer()); }\n",
        );
        put(&ws.file("app/.cargo/config.toml"), "[source.crates-io]\nreplace-with = \"vendored\"\n[source.vendored]\ndirectory = \"../vendor\"\n");
        put(
            &ws.file("vendor/dep/Cargo.toml"),
            "[package]\nname = \"dep\"\nversion = \"0.1.0\"\nedition = \"2021\"\n",
        );
        put(
            &ws.file("vendor/dep/src/lib.rs"),
            "pub fn answer() -> u32 { 42 }\n",
        );
        put(
            &ws.file("vendor/dep/.cargo-checksum.json"),
            &format!("{{\"files\":{{}},\"package\":\"{}\"}}", "0".repeat(64)),
        );
        let out = run(
            &ws,
            &runner,
            "cd app && cargo build --offline -q && ./target/debug/app && echo $CARGO_HOME",
        );
        let text = ok(&runner, "cargo", &out);
        let mut lines = text.lines();
        assert_eq!(lines.next(), Some("42"), "{runner}: {out}");
        let cargo_home = lines.next().unwrap();
        assert!(
            cargo_home.starts_with(caches_of(ws.path()).to_str().unwrap()),
            "{runner}: CARGO_HOME is {cargo_home}"
        );
    }
}

#[test]
fn npm_installs_a_local_tarball_with_its_cache_and_logs_kept_private() {
    need_program("npm", "apt-get install npm");
    for runner in runners() {
        let ws = workspace();
        let before = user_caches();
        let lib = ws.path().parent().unwrap().join("lib");
        put(
            &lib.join("package.json"),
            "{\"name\": \"hello-npm\", \"version\": \"1.0.0\", \"main\": \"index.js\"}\n",
        );
        put(
            &lib.join("index.js"),
            "module.exports = () => 'hello from npm';\n",
        );
        std::fs::create_dir_all(ws.file("app")).unwrap();
        let packed = std::process::Command::new("npm")
            .args(["pack", "--silent", "--pack-destination"])
            .arg(ws.file("app"))
            .current_dir(&lib)
            .env("npm_config_cache", lib.join(".npm-cache"))
            .output()
            .unwrap();
        assert_ran(&packed);
        put(
            &ws.file("app/package.json"),
            "{\"name\": \"app\", \"version\": \"1.0.0\"}\n",
        );
        let out = run(
            &ws,
            &runner,
            "cd app && npm install ./hello-npm-1.0.0.tgz --offline --no-audit --no-fund -q && node -e \"console.log(require('hello-npm')())\"",
        );
        assert!(
            ok(&runner, "npm", &out).ends_with("hello from npm\n"),
            "{runner}: {out}"
        );
        assert_eq!(user_caches(), before, "{runner}: the user's caches changed");
        let logs: Vec<PathBuf> = state(&caches_of(ws.path()))
            .into_iter()
            .map(|(p, _)| p)
            .collect();
        assert!(
            logs.iter().any(|p| p.to_string_lossy().contains("/npm/")),
            "{runner}: nothing in npm's private cache: {logs:?}"
        );
    }
}
