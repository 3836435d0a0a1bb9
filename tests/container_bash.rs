//! `bash` routed into real podman containers: the policy's `route`, the
//! caller's `container` as a request the policy can refuse or rewrite, the
//! transport's environment and login shell, timeouts and kills that reach
//! inside, declared containers the run starts and removes, a sealed host,
//! and the route in the record and its replay.

mod common;
// The helper's `image()` leaves its `tar` to the pipe.
#[path = "common/containers.rs"]
mod containers;

use common::{policy, sluice_in, sluice_run, workspace, Run, EMIT};
use containers::Container;
use serde_json::{json, Value};
use std::path::Path;
use std::time::{Duration, Instant};

/// A policy that allows every command and the workspace, with `extra`
/// fields (a `route`, `containers`) in its table.
fn allow_all(extra: &str) -> String {
    format!(
        r#"local p = require("sluice.policy")
return {{
  rules = {{ p.programs, p.allow "proc:spawn:*", p.allow "fs:*:${{workspace}}/**" }},
  {extra}
}}"#
    )
}

/// Runs `body` (with `emit`) under policy text `pol` and `flags`, with the
/// containers' variables and `env`; each stdout line parsed as JSON.
fn run(
    ws: &common::Workspace,
    pol: &str,
    flags: &[&str],
    env: &[(&str, &str)],
    body: &str,
) -> (Run, Vec<Value>) {
    let pol = policy(ws, "p.lua", pol);
    let mut all = vec!["--policy", pol.as_str()];
    all.extend_from_slice(flags);
    let script = common::script_file(ws.path(), &format!("{EMIT}{body}"));
    let out: Run = sluice_run(ws.path(), &script, &all, &[])
        .envs(containers::env())
        .envs(env.iter().copied())
        .output()
        .expect("spawn sluice")
        .into();
    let lines = out
        .stdout
        .lines()
        .map(|l| {
            serde_json::from_str(l)
                .unwrap_or_else(|e| panic!("not JSON: {l:?}: {e}\n{}", out.stderr))
        })
        .collect();
    (out, lines)
}

/// [`run`] under [`allow_all`] with `--container-engine podman`.
fn routed(ws: &common::Workspace, body: &str) -> (Run, Vec<Value>) {
    run(
        ws,
        &allow_all(""),
        &["--container-engine", "podman"],
        &[],
        body,
    )
}

const TRY: &str = r#"
local function try(input)
  local r, e = sluice.bash(input)
  emit(r or e)
end
"#;

#[test]
fn the_policy_routes_a_command_into_a_container() {
    let c = Container::start();
    let ws = workspace();
    let route = format!(
        r#"route = function(req) if req.input.command:match("^cat ") then return "{}" end end,"#,
        c.name
    );
    let (out, lines) = run(
        &ws,
        &allow_all(&route),
        &["--container-engine", "podman"],
        &[],
        &format!(
            "{TRY}try{{command = 'cat /etc/profile.d/sluice.sh'}}\ntry{{command = 'echo on-host'}}"
        ),
    );
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(lines[0]["exitCode"], 0);
    assert_eq!(lines[0]["stdout"], "export SLUICE_TEST_PROFILE=loaded\n");
    assert_eq!(lines[0]["sandbox"]["mode"], "container");
    assert_eq!(lines[0]["sandbox"]["container"], json!(c.name));
    assert_eq!(lines[0]["sandbox"]["engine"], "podman");
    assert_eq!(lines[0]["sandbox"]["enforcement"], "partial");
    // The control: what the route leaves alone runs on the host, confined.
    assert_eq!(lines[1]["stdout"], "on-host\n");
    assert_ne!(lines[1]["sandbox"]["mode"], "container");
}

#[test]
fn the_policy_refuses_or_rewrites_the_callers_container() {
    let c = Container::start();
    let ws = workspace();
    let route = format!(
        r#"route = function(req)
    if req.input.container == "forbidden" then return {{deny = "not that one"}} end
    if req.input.container == "alias" then return "{}" end
  end,"#,
        c.name
    );
    let body = format!("{TRY}try{{command = 'echo x', container = 'forbidden'}}\ntry{{command = 'cat /etc/profile.d/sluice.sh', container = 'alias'}}");
    let (out, lines) = run(
        &ws,
        &allow_all(&route),
        &["--container-engine", "podman"],
        &[],
        &body,
    );
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(lines[0]["code"], "permission_denied");
    assert_eq!(
        lines[0]["message"],
        "the policy's route refused to run this command in container \"forbidden\": not that one; the command did not run"
    );
    assert_eq!(lines[0]["container"], "forbidden");
    assert_eq!(lines[1]["stdout"], "export SLUICE_TEST_PROFILE=loaded\n");
    assert_eq!(lines[1]["sandbox"]["container"], json!(c.name));
    // The record shows the rewrite.
    let shown = sluice_in(ws.path(), &["audit", "show", "last", "--call", "2"]);
    assert!(
        shown.stdout.contains(&format!(
            "route        container:{} (asked alias)\n",
            c.name
        )),
        "{}",
        shown.stdout
    );
}

#[test]
fn env_entries_are_renamed_inside_and_never_configure_the_host_engine() {
    let c = Container::start();
    let ws = workspace();
    // A `podman` in the requested PATH would run instead of the real one
    // if the entry reached the host's transport process.
    let evil = ws.path().parent().unwrap().join("evil");
    std::fs::create_dir_all(&evil).unwrap();
    let marker = evil.join("ran");
    std::fs::write(
        evil.join("podman"),
        format!("#!/bin/sh\ntouch {}\n", marker.display()),
    )
    .unwrap();
    std::fs::set_permissions(
        evil.join("podman"),
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    let path = format!("{}:/bin", evil.display());
    // The policy judges the entries as the line's leading assignments;
    // this one lets them through to test the transport.
    let pol = allow_all("decide = function(req) return \"allow\" end,");
    let body = format!(
        "{TRY}try{{command = 'echo \"$PATH|$GREETING|${{SLUICE_CONTAINER_ENV_PATH-unset}}\"', container = '{}', env = {{PATH = '{path}', GREETING = 'hi there'}}}}",
        c.name
    );
    let (out, lines) = run(&ws, &pol, &["--container-engine", "podman"], &[], &body);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(
        lines[0]["stdout"],
        format!("{path}|hi there|unset\n"),
        "{}",
        lines[0]
    );
    assert!(
        !marker.exists(),
        "the requested PATH chose the host's podman"
    );
}

#[test]
fn a_login_shell_applies_the_profile_and_a_script_arrives_on_stdin() {
    let c = Container::start();
    let ws = workspace();
    let script = "cat <<'EOF'\nit's \"quoted\" $HOME\nEOF\necho \"$SLUICE_TEST_PROFILE $1 $2\"";
    let body = format!(
        "{TRY}try{{script = {}, interpreter = 'sh', args = {{'a b', 'c'}}, container = '{}'}}\ntry{{command = 'ps -o args', container = '{}'}}",
        common::lua_str(script),
        c.name,
        c.name
    );
    let (out, lines) = routed(&ws, &body);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(lines[0]["stdout"], "it's \"quoted\" $HOME\nloaded a b c\n");
    // The program travels on stdin: no argv inside holds its text.
    assert!(!lines[1]["stdout"].as_str().unwrap().contains("quoted"));
}

#[test]
fn a_timeout_stops_the_process_inside_the_container_and_names_the_logical_command() {
    let c = Container::start();
    let ws = workspace();
    let body = format!(
        "{TRY}try{{command = 'sleep 77', container = '{}', timeoutMs = 1000}}",
        c.name
    );
    let t0 = Instant::now();
    let (out, lines) = routed(&ws, &body);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(lines[0]["code"], "timeout");
    assert_eq!(lines[0]["command"], "sleep 77");
    assert_eq!(lines[0]["container"], json!(c.name));
    assert!(!lines[0]["message"].as_str().unwrap().contains("podman"));
    assert!(t0.elapsed() < Duration::from_secs(20));
    assert_eq!(c.running("sleep 77"), Vec::<String>::new());
}

#[test]
fn what_a_command_leaves_running_in_the_container_ends_with_it() {
    let c = Container::start();
    let ws = workspace();
    let body = format!(
        "{TRY}try{{command = 'sleep 66 & echo started', container = '{}'}}",
        c.name
    );
    let (out, lines) = routed(&ws, &body);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(lines[0]["stdout"], "started\n");
    // The sweep has sent KILL before the call returns; on a loaded machine
    // the process can take a moment to be gone from `ps`.
    let t0 = std::time::Instant::now();
    while !c.running("sleep 66").is_empty() && t0.elapsed() < Duration::from_secs(2) {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(c.running("sleep 66"), Vec::<String>::new());
}

#[test]
fn a_background_job_in_a_container_is_read_and_killed_there() {
    let c = Container::start();
    let ws = workspace();
    let body = format!(
        r#"local job = sluice.bash{{command = 'echo ready; sleep 88', container = '{}', background = true}}
local seen = ""
for _ = 1, 100 do
  seen = seen .. job:read().stdout
  if seen:find("ready") then break end
  sluice.sleep(50)
end
emit({{seen = seen}})
emit({{killed = job:kill()}})
job:wait(5000)
emit({{status = job.status, mode = job.sandbox and job.sandbox.mode}})"#,
        c.name
    );
    let (out, lines) = routed(&ws, &body);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(lines[0]["seen"], "ready\n");
    assert_eq!(lines[1]["killed"], true);
    assert_eq!(lines[2], json!({"status": "killed", "mode": "container"}));
    assert_eq!(c.running("sleep 88"), Vec::<String>::new());
}

fn declared(extra: &str) -> String {
    allow_all(&format!(
        r#"containers = {{ box = {{ image = "{}", engine = "podman", mounts = {{"${{workspace}}:/srv"}}, workdir = "/srv"{extra} }} }},
  route = function(req) return "box" end,"#,
        containers::image()
    ))
}

#[test]
fn a_declared_container_starts_on_first_use_is_reused_and_removed_when_the_run_ends() {
    let ws = workspace();
    std::fs::write(ws.file("seen.txt"), "from the workspace\n").unwrap();
    // `run.txt` is judged as the workspace's (the line is judged as on the
    // host) and lands in /srv, the workspace's mount.
    let body = format!("{TRY}try{{command = 'cat seen.txt; echo $SLUICE_RUN_ID > run.txt; hostname'}}\ntry{{command = 'cat run.txt; hostname'}}");
    let (out, lines) = run(&ws, &declared(""), &[], &[], &body);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let first = lines[0]["stdout"].as_str().unwrap();
    let second = lines[1]["stdout"].as_str().unwrap();
    assert!(first.starts_with("from the workspace\n"), "{first}");
    let run_id = second.lines().next().unwrap();
    // One container for both calls: the second sees the first's file.
    assert_eq!(first.lines().last(), second.lines().last());
    assert_eq!(lines[1]["sandbox"]["container"], "box");
    assert!(!run_id.is_empty());
    assert_eq!(
        containers::of_run(run_id),
        Vec::<String>::new(),
        "the run's container outlived it"
    );
}

#[test]
fn a_declared_container_is_removed_after_ctrl_c() {
    let ws = workspace();
    let pol = policy(&ws, "p.lua", &declared(""));
    let script = common::script_file(
        ws.path(),
        "sluice.bash{command = 'echo $SLUICE_RUN_ID; sleep 60'}",
    );
    let mut child = sluice_run(ws.path(), &script, &["--policy", &pol], &[])
        .envs(containers::env())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // The container exists once the command runs in it.
    let t0 = Instant::now();
    let mine = loop {
        let found: Vec<String> = containers::named("sluice-")
            .into_iter()
            .filter(|n| n.ends_with("-box"))
            .filter(|n| {
                containers::podman(&["inspect", "--format", "{{.Config.Labels}}", n])
                    .stdout
                    .windows(10)
                    .any(|w| w == b"sluice.run")
            })
            .collect();
        let running = containers::podman(&["ps", "--format", "{{.Names}} {{.Command}}"]);
        if let Some(line) = String::from_utf8_lossy(&running.stdout)
            .lines()
            .find(|l| found.iter().any(|f| l.starts_with(f.as_str())))
        {
            let name = line.split(' ').next().unwrap().to_string();
            if containers::podman(&["exec", &name, "ps", "-o", "args"])
                .stdout
                .windows(8)
                .any(|w| w == b"sleep 60")
            {
                break name;
            }
        }
        assert!(
            t0.elapsed() < Duration::from_secs(60),
            "the declared container never ran the command"
        );
        std::thread::sleep(Duration::from_millis(100));
    };
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGINT,
    )
    .unwrap();
    let status = common::exit_within(&mut child, Duration::from_secs(15));
    assert_eq!(status.code(), Some(130));
    assert_eq!(
        containers::named(&mine),
        Vec::<String>::new(),
        "{mine} outlived the interrupted run"
    );
}

#[test]
fn a_kept_declared_container_stays() {
    let ws = workspace();
    let body = format!("{TRY}try{{command = 'echo $SLUICE_RUN_ID'}}");
    let (out, lines) = run(&ws, &declared(", keep = true"), &[], &[], &body);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let run_id = lines[0]["stdout"].as_str().unwrap().trim().to_string();
    let left = containers::of_run(&run_id);
    for name in &left {
        containers::podman(&["rm", "-f", "-t", "0", name]);
    }
    assert_eq!(left.len(), 1, "keep = true: the container stays");
}

#[test]
fn a_sealed_host_runs_commands_only_in_its_container() {
    let c = Container::start();
    let ws = workspace();
    let body = format!("{TRY}try{{command = 'echo x'}}\ntry{{command = 'echo x', container = 'other'}}\ntry{{command = 'pwd', container = '{}'}}", c.name);
    let (out, lines) = run(
        &ws,
        &allow_all(""),
        &[],
        &[
            ("SLUICE_BASH_CONTAINER", &c.name),
            ("SLUICE_TEST_CWD", "/srv"),
        ],
        &body,
    );
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(lines[0]["code"], "outside_container");
    assert_eq!(
        lines[0]["message"],
        format!("this host is sealed to container \"{0}\" (SLUICE_BASH_CONTAINER): commands run only there, and this one would run on the host; give container = \"{0}\"", c.name)
    );
    assert_eq!(lines[1]["code"], "outside_container");
    assert!(lines[1]["message"]
        .as_str()
        .unwrap()
        .contains("would run on container \"other\""));
    assert_eq!(lines[2]["stdout"], "/srv\n");
}

#[test]
fn a_missing_engine_a_missing_container_and_no_route_are_clear_errors() {
    let ws = workspace();
    let body = format!("{TRY}try{{command = 'true', container = 'sluice-no-such-container'}}");
    let (_, lines) = routed(&ws, &body);
    assert_eq!(lines[0]["code"], "provider_unavailable");
    assert_eq!(lines[0]["container"], "sluice-no-such-container");
    assert_eq!(lines[0]["engine"], "podman");
    let msg = lines[0]["message"].as_str().unwrap();
    assert!(msg.starts_with("podman could not run the command in container sluice-no-such-container: Error: no container with name or ID \"sluice-no-such-container\" found"), "{msg}");

    let (_, lines) = run(
        &ws,
        &allow_all(""),
        &["--container-engine", "podman"],
        &[("PATH", "/nonexistent")],
        &body,
    );
    assert_eq!(lines[0]["code"], "provider_unavailable");
    assert_eq!(
        lines[0]["message"],
        "container sluice-no-such-container: container engine podman is not installed (not found on sluice's PATH); install it, or choose the other engine with --container-engine; the command did not run"
    );

    let (_, lines) = run(&ws, &allow_all(""), &[], &[], &body);
    assert_eq!(lines[0]["code"], "provider_unavailable");
    assert!(lines[0]["message"]
        .as_str()
        .unwrap()
        .contains("Drop `container` to run on the host"));

    let body = format!("{TRY}try{{command = 'true', container = 'x', mode = 'hermetic', reads = {{}}, writes = {{}}}}");
    let (_, lines) = routed(&ws, &body);
    assert_eq!(lines[0]["code"], "invalid_input");
    assert_eq!(lines[0]["field"], "container");
}

#[test]
fn the_route_is_recorded_shown_and_answered_by_replay() {
    let c = Container::start();
    let ws = workspace();
    let body = format!(
        "{TRY}try{{command = 'cat /etc/profile.d/sluice.sh', container = '{}'}}",
        c.name
    );
    let (out, lines) = routed(&ws, &body);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let call = common::exported_calls(ws.path()).remove(0);
    assert_eq!(
        call["route"],
        json!({"container": c.name, "engine": "podman", "requested": c.name})
    );
    let text = sluice_in(ws.path(), &["audit", "show", "last", "--call", "1"]);
    assert!(
        text.stdout
            .contains(&format!("route        container:{}\n", c.name)),
        "{}",
        text.stdout
    );
    // The container is gone: the replay answers from the record.
    let name = c.name.clone();
    drop(c);
    assert_eq!(containers::named(&name), Vec::<String>::new());
    let replay = sluice_in(ws.path(), &["replay", "last"]);
    assert_eq!(replay.code, 0, "{}\n{}", replay.stdout, replay.stderr);
    assert_eq!(
        replay
            .stdout
            .lines()
            .next()
            .map(|l| serde_json::from_str::<Value>(l).unwrap()["stdout"].clone()),
        Some(lines[0]["stdout"].clone())
    );
}

#[test]
fn confined_host_commands_cannot_reach_the_engine_under_either_runner() {
    let c = Container::start();
    let ws = workspace();
    std::fs::copy(containers::conf(), ws.file("containers.conf")).unwrap();
    let conf = ws.file("containers.conf").display().to_string();
    for runner in ["bwrap", "landlock"] {
        let body = format!(
            "{TRY}try{{command = 'podman exec {0} echo reached', env = {{CONTAINERS_CONF = '{conf}'}}}}\ntry{{command = 'echo reached', container = '{0}'}}",
            c.name
        );
        let (out, lines) = run(
            &ws,
            &allow_all(""),
            &["--container-engine", "podman", "--sandbox", runner],
            &[],
            &body,
        );
        assert_eq!(out.code, 0, "{runner}: {}", out.stderr);
        assert_ne!(
            lines[0]["exitCode"], 0,
            "{runner}: a confined command reached the engine: {}",
            lines[0]
        );
        assert_eq!(lines[0]["stdout"], "", "{runner}");
        // The control: the route itself reaches it.
        assert_eq!(lines[1]["stdout"], "reached\n", "{runner}");
    }
}

#[test]
fn the_transport_reaches_the_engine_with_its_own_variables_only() {
    let c = Container::start();
    let ws = workspace();
    // podman finds the project's containers.conf only through
    // CONTAINERS_CONF, which the transport carries; a credential-shaped
    // variable of sluice's does not cross.
    let body = format!(
        "{TRY}try{{command = 'echo ${{SECRET_TOKEN-absent}}', container = '{}'}}",
        c.name
    );
    let (out, lines) = run(
        &ws,
        &allow_all(""),
        &["--container-engine", "podman"],
        &[("SECRET_TOKEN", "s3cret")],
        &body,
    );
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(lines[0]["stdout"], "absent\n");
    let _ = Path::new("/");
}

#[test]
fn doctor_lists_the_engines_that_work() {
    let ws = workspace();
    let out: Run = std::process::Command::new(common::sluice_bin())
        .args(["doctor", "--json"])
        .envs(containers::env())
        .current_dir(ws.path())
        .output()
        .unwrap()
        .into();
    let report: Value =
        serde_json::from_str(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", out.stdout));
    assert_eq!(report["engines"]["podman"]["works"], true, "{report}");
    assert!(
        report["engines"]["podman"]["program"]
            .as_str()
            .unwrap()
            .ends_with("/podman (podman version 4.3.1)")
            || report["engines"]["podman"]["program"]
                .as_str()
                .unwrap()
                .contains("/podman (podman version ")
    );
    assert!(report["engines"]["docker"].is_object());
}

#[test]
fn output_bounds_spill_files_and_invalid_probes_work_as_on_the_host() {
    let c = Container::start();
    let ws = workspace();
    let body = format!(
        "{TRY}try{{command = 'yes 0123456789 | head -c 100000', container = '{0}'}}\n\
         try{{command = 'no-such-program --version', container = '{0}'}}\n\
         try{{command = 'true', container = '{0}', cwd = '/no/such/folder'}}\n\
         try{{command = 'exit 127', container = '{0}'}}",
        c.name
    );
    let (out, lines) = run(
        &ws,
        &allow_all(""),
        &["--container-engine", "podman", "--keep-spill"],
        &[],
        &body,
    );
    assert_eq!(out.code, 0, "{}", out.stderr);
    let big = &lines[0];
    assert_eq!(big["stdoutTruncated"], true);
    assert_eq!(big["stdoutDroppedBytes"], 100_000 - 30_000);
    let spill = big["stdoutSpillPath"].as_str().expect("a spill file");
    let kept = std::fs::read(spill).unwrap();
    assert_eq!(kept.len(), 100_000);
    std::fs::remove_file(spill).unwrap();

    assert_eq!(lines[1]["exitCode"], 127);
    assert_eq!(lines[1]["invalidProbe"]["reason"], "unknown-command");
    assert_eq!(
        lines[1]["invalidProbe"]["evidence"],
        format!(
            "in container {}: /bin/sh: no-such-program: not found",
            c.name
        )
    );
    assert_eq!(lines[2]["invalidProbe"]["reason"], "unknown-path");
    assert!(
        lines[2]["invalidProbe"]["evidence"]
            .as_str()
            .unwrap()
            .starts_with(&format!(
                "the working folder /no/such/folder does not exist in container {}: ",
                c.name
            )),
        "{}",
        lines[2]
    );
    // A 127 the command chose proves nothing.
    assert_eq!(lines[3]["exitCode"], 127);
    assert!(lines[3].get("invalidProbe").is_none(), "{}", lines[3]);
}

#[test]
fn a_route_that_is_not_a_container_name_is_a_deny_never_an_engine_option() {
    let c = Container::start();
    let ws = workspace();
    let route = r#"route = function(req) if req.input.command == "echo a" then return "--privileged" end return req.input.container end,"#;
    let body = format!(
        "{TRY}try{{command = 'echo a'}}\ntry{{command = 'echo b', container = '{}', sandboxPermissions = 'danger-full-access', justification = 'x'}}\ntry{{command = 'echo c', container = '{}'}}",
        c.name, c.name
    );
    let (out, lines) = run(
        &ws,
        &allow_all(route),
        &["--container-engine", "podman"],
        &[],
        &body,
    );
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(lines[0]["code"], "permission_denied");
    let msg = lines[0]["message"].as_str().unwrap();
    assert!(
        msg.contains("route returned \"--privileged\", which is not a container name"),
        "{msg}"
    );
    assert_eq!(lines[1]["code"], "invalid_input");
    assert_eq!(lines[1]["field"], "sandboxPermissions");
    // The control: a real name still routes.
    assert_eq!(lines[2]["stdout"], "c\n");
}

#[test]
fn a_bad_container_declaration_stops_the_run_naming_the_field() {
    let ws = workspace();
    let bad = policy(
        &ws,
        "bad.lua",
        &allow_all(r#"containers = { box = { image = "i", network = "bridge" } },"#),
    );
    let script = common::script_file(ws.path(), "print('ran')");
    let out: Run = sluice_run(ws.path(), &script, &["--policy", &bad], &[])
        .output()
        .unwrap()
        .into();
    assert_eq!(out.code, 2);
    assert_eq!(out.stdout, "");
    assert!(
        out.stderr.starts_with(&format!("sluice: policy {bad}: containers.box.network: unknown variant `bridge`, expected `none` or `host`")),
        "{}",
        out.stderr
    );
    let one = policy(
        &ws,
        "one.lua",
        &allow_all(r#"containers = { box = { image = "i" } },"#),
    );
    let two = policy(
        &ws,
        "two.lua",
        &allow_all(r#"containers = { box = { image = "j" } },"#),
    );
    let out: Run = sluice_run(
        ws.path(),
        &script,
        &["--policy", &one, "--policy", &two],
        &[],
    )
    .output()
    .unwrap()
    .into();
    assert_eq!(out.code, 2);
    assert_eq!(
        out.stderr,
        format!("sluice: policy {two}: container box is already declared by policy {one}; give it another name\n")
    );
}

/// The attack: a policy routes every command into the container a host is
/// sealed to, and a script calls `shell_command` (Codex's tool) instead of
/// `bash`. It must run in the container as `bash` does, never on the host:
/// a file it writes lands in the container, not at the host's path, and
/// its result says where it ran. The control: `bash` under the same route.
#[test]
fn shell_command_follows_the_route_into_the_container_never_the_host() {
    let c = Container::start();
    let ws = workspace();
    let host_dir = tempfile::tempdir().unwrap();
    let marker = host_dir.path().join("escaped");
    let route = format!(r#"route = function(req) return "{}" end,"#, c.name);
    let body = format!(
        r#"local r, e = sluice.shell_command{{command = "mkdir -p {dir}; echo in > {m}; cat {m}; cat /etc/profile.d/sluice.sh"}}
emit(r or e)
local b, e2 = sluice.bash{{command = "cat {m}"}}
emit(b or e2)"#,
        dir = host_dir.path().display(),
        m = marker.display()
    );
    for env in [vec![], vec![("SLUICE_BASH_CONTAINER", c.name.as_str())]] {
        // The policy would let the command write the host's folder too.
        let pol = format!(
            "local p = require(\"sluice.policy\")\nreturn {{ rules = {{ p.programs, p.allow \"proc:spawn:*\", p.allow \"fs:*:${{workspace}}/**\", p.allow \"fs:*:{}/**\" }}, {route} }}",
            host_dir.path().display()
        );
        let (out, lines) = run(&ws, &pol, &["--container-engine", "podman"], &env, &body);
        assert_eq!(out.code, 0, "{}", out.stderr);
        assert_eq!(lines[0]["exitCode"], 0, "{}", lines[0]);
        let said = lines[0]["output"].as_str().unwrap();
        assert!(
            said.ends_with("Output:\nin\nexport SLUICE_TEST_PROFILE=loaded\n"),
            "{said}"
        );
        assert_eq!(lines[0]["sandbox"]["mode"], "container");
        assert_eq!(lines[0]["sandbox"]["container"], json!(c.name));
        assert!(!marker.exists(), "shell_command wrote on the host");
        assert_eq!(
            lines[1]["stdout"], "in\n",
            "bash sees the same container file"
        );
        c.sh(&format!("rm -f {}", marker.display()));
    }
}

/// On a host sealed to a container the file flows act on the container's
/// files, and language servers run on the host: `lsp` is `unsupported`
/// naming the container (never a host server reading the host's file of
/// that name), and an edit's diagnostics say they were not checked. The
/// control: the edit itself lands in the container.
#[test]
fn lsp_on_a_sealed_host_is_unsupported_and_an_edits_diagnostics_unchecked() {
    let c = Container::start();
    let ws = workspace();
    c.sh("mkdir -p /srv && printf 'x = 1\\n' > /srv/a.py");
    let lsp = r#"lsp = { python = { command = { "/bin/false" }, extensions = { ".py" } } },"#;
    let body = r#"
local r, e = sluice.lsp{operation = "hover", path = "/srv/a.py", line = 1, character = 1}
emit(r or e)
local ed, e2 = sluice.edit{path = "/srv/a.py", oldString = "x = 1", newString = "x = 2"}
emit(ed or e2)"#;
    let (out, lines) = run(
        &ws,
        &format!(
            "local p = require(\"sluice.policy\")\nreturn {{ rules = {{ p.programs, p.allow \"proc:spawn:*\", p.allow \"fs:*:/srv/**\", p.allow \"fs:*:{}:/srv/**\" }}, {lsp} }}",
            c.name
        ),
        &[],
        &[("SLUICE_BASH_CONTAINER", &c.name), ("SLUICE_TEST_CWD", "/srv")],
        body,
    );
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(lines[0]["code"], "unsupported", "{}", lines[0]);
    assert!(lines[0]["message"]
        .as_str()
        .unwrap()
        .starts_with(&format!("this host is sealed to container {}", c.name)));
    assert_eq!(lines[1]["replacements"], 1, "{}", lines[1]);
    assert_eq!(
        lines[1]["diagnostics"]["status"], "unchecked",
        "{}",
        lines[1]
    );
    assert_eq!(c.sh("cat /srv/a.py"), "x = 2\n");
}
