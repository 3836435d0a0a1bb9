//! Issue 13, item 7: an allow rule for a program covers its ordinary uses,
//! not the forms that make it run another program (src/kernel/programs.rs,
//! and the wrappers src/kernel/shell.rs unwraps).
//!
//! The entries are GTFOBins' `shell` and `command` entries (and the forms
//! the issue lists) for the programs the table covers, with the shell they
//! spawn replaced by `touch MARKER`. Each one:
//! - is refused under a policy allowing its program (`proc:spawn:PROG *`,
//!   `otherwise = "deny"`), and its marker never appears;
//! - where it can run without a terminal, network or another machine,
//!   makes its marker under the same policy plus a rule that names its form
//!   (for a wrapper: allows the command it runs), so the attack is real and
//!   naming the form is what grants it.
//!
//! Entries that need a person at a terminal (less's `!`, more, man's
//! pager) are checked by [`escapes_that_need_a_terminal_are_out_of_reach`]:
//! sluice gives commands no terminal, and the escape never runs.

mod common;
mod policy_support;

use policy_support::{policy_text, repo, require, PATH};
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::fs;

/// One entry: a line using a form of `program` that runs `touch MARKER`.
struct Entry {
    /// The program the policy allows (`proc:spawn:PROG *`).
    program: &'static str,
    line: &'static str,
    /// Fed to the command on standard input.
    stdin: Option<&'static str>,
    /// Rules that name the form (or, for a wrapper, allow what it runs).
    grant: &'static [&'static str],
    /// The Debian package the control needs, or `None` when the entry
    /// cannot run here without a terminal, a network, a second machine or
    /// privileges (its refusal is still checked).
    package: Option<&'static str>,
}

const fn e(
    program: &'static str,
    line: &'static str,
    grant: &'static [&'static str],
    package: Option<&'static str>,
) -> Entry {
    Entry {
        program,
        line,
        stdin: None,
        grant,
        package,
    }
}

const fn fed(
    program: &'static str,
    line: &'static str,
    stdin: &'static str,
    grant: &'static [&'static str],
    package: Option<&'static str>,
) -> Entry {
    Entry {
        program,
        line,
        stdin: Some(stdin),
        grant,
        package,
    }
}

const TOUCH: &[&str] = &["proc:spawn:touch *"];
const GIT: Option<&str> = Some("git");
const UTIL: Option<&str> = Some("util-linux");
const CORE: Option<&str> = Some("coreutils");

/// The entries, in the order they run (git's change the repository).
const ENTRIES: &[Entry] = &[
    // git
    e("git", "git -c core.fsmonitor='touch MARKER' status", &["proc:spawn:git -c core.fsmonitor=* status"], GIT),
    e("git", "git -c alias.x='!touch MARKER' x", &["proc:spawn:git -c alias.x=* x"], GIT),
    e("git", "git -c core.editor='touch MARKER' -c user.name=t -c user.email=t@example.org commit --allow-empty", &["proc:spawn:git -c core.editor=* *"], GIT),
    e("git", "git -c core.sshCommand='touch MARKER' ls-remote ssh://example.invalid/x", &["proc:spawn:git -c core.sshCommand=* ls-remote *"], GIT),
    e("git", "git -c diff.external='touch MARKER' diff", &["proc:spawn:git -c diff.external=* diff"], GIT),
    e("git", "git -c filter.x.clean='touch MARKER' add a.txt", &["proc:spawn:git -c filter.x.clean=* add a.txt"], GIT),
    e("git", "git --exec-path=. x", &["proc:spawn:git --exec-path=. x"], GIT),
    e("git", "git ls-remote --upload-pack='touch MARKER;' .", &["proc:spawn:git ls-remote --upload-pack=* ."], GIT),
    e("git", "git clone --no-local -u 'touch MARKER;' . copy", &["proc:spawn:git clone --no-local -u * . copy"], GIT),
    e("git", "git -c protocol.ext.allow=always ls-remote 'ext::sh -c touch% MARKER'", &["proc:spawn:git -c protocol.ext.allow=always ls-remote ext::*"], GIT),
    e("git", "git grep -O'touch MARKER' three", &["proc:spawn:git grep -O* three"], GIT),
    e("git", "git difftool -y -x 'touch MARKER'", &["proc:spawn:git difftool -y -x *"], GIT),
    e("git", "git archive --remote=. --exec='touch MARKER;' HEAD", &["proc:spawn:git archive --remote=. --exec=* HEAD"], GIT),
    e("git", "git rebase --autostash --exec 'touch MARKER' HEAD~1", &["proc:spawn:git rebase --autostash --exec * HEAD~1"], GIT),
    e("git", "git bisect start HEAD HEAD~1 && git bisect run touch MARKER", &["proc:spawn:git bisect run *"], GIT),
    e("git", "git -c core.pager='touch MARKER' -p log", &[], None),
    e("git", "git submodule foreach 'touch MARKER'", &[], None),
    e("git", "git filter-branch --tree-filter 'touch MARKER' HEAD", &[], None),
    e("git", "git config core.fsmonitor 'touch MARKER'", &[], None),
    e("git", "git init --template=tpl x", &[], None),
    e("git", "git -c core.hooksPath=hooks commit --allow-empty -m x", &[], None),
    e("git", "git -c include.path=evil.gitconfig status", &[], None),
    e("git", "PAGER='touch MARKER' git -p help", &[], None),
    // find, xargs
    e("find", "find . -exec touch MARKER \\; -quit", TOUCH, Some("findutils")),
    e("find", "find . -maxdepth 0 -fprint MARKER", &["proc:spawn:find . -maxdepth 0 -fprint MARKER"], Some("findutils")),
    e("xargs", "xargs -a /dev/null touch MARKER", TOUCH, Some("findutils")),
    // tar
    e("tar", "tar cf /dev/null /dev/null --checkpoint=1 --checkpoint-action=exec='touch MARKER'", &["proc:spawn:tar cf /dev/null /dev/null --checkpoint=1 --checkpoint-action=*"], Some("tar")),
    e("tar", "tar xf /dev/null -I 'sh -c \"touch MARKER\"'", &["proc:spawn:tar xf /dev/null -I *"], Some("tar")),
    e("tar", "tar xf a.tar --to-command='touch MARKER'", &["proc:spawn:tar xf a.tar --to-command=*"], Some("tar")),
    // rsync, ssh, scp, sftp
    e("rsync", "rsync -e 'sh -c \"touch MARKER\"' x:x .", &["proc:spawn:rsync -e * x:x ."], Some("rsync")),
    e("ssh", "ssh -o ProxyCommand='touch MARKER' x", &["proc:spawn:ssh -o ProxyCommand=* x"], Some("openssh-client")),
    e("ssh", "ssh -o PermitLocalCommand=yes -o LocalCommand='touch MARKER' localhost", &[], None),
    e("ssh", "ssh localhost touch MARKER", &[], None),
    e("scp", "scp -o 'ProxyCommand=;touch MARKER' x x:", &["proc:spawn:scp -o ProxyCommand=* x x:"], Some("openssh-client")),
    e("sftp", "sftp -o ProxyCommand='touch MARKER' x", &["proc:spawn:sftp -o ProxyCommand=* x"], Some("openssh-client")),
    // sed, awk
    e("sed", "sed -n '1e touch MARKER' /etc/hosts", &["proc:spawn:sed -n 1e touch MARKER /etc/hosts"], Some("sed")),
    fed("sed", "sed e", "touch MARKER\n", &["proc:spawn:sed e"], Some("sed")),
    e("awk", "awk 'BEGIN {system(\"touch MARKER\")}'", &["proc:spawn:awk BEGIN \\{system(\"touch MARKER\")\\}"], Some("mawk")),
    e("gawk", "gawk 'BEGIN {system(\"touch MARKER\")}'", &["proc:spawn:gawk BEGIN \\{system(\"touch MARKER\")\\}"], Some("gawk")),
    e("mawk", "mawk 'BEGIN {system(\"touch MARKER\")}'", &["proc:spawn:mawk BEGIN \\{system(\"touch MARKER\")\\}"], Some("mawk")),
    e("nawk", "nawk 'BEGIN {system(\"touch MARKER\")}'", &["proc:spawn:nawk BEGIN \\{system(\"touch MARKER\")\\}"], Some("mawk")),
    // make
    e("make", "make --eval='$(shell touch MARKER)' .", &["proc:spawn:make --eval=* ."], Some("make")),
    // wrappers: what they run is judged on its own
    e("env", "env touch MARKER", TOUCH, CORE),
    e("env", "env -S 'touch MARKER'", &["proc:spawn:env -S 'touch MARKER'"], CORE),
    e("script", "script -q -c 'touch MARKER' /dev/null", TOUCH, UTIL),
    fed("script", "script -q /dev/null", "touch MARKER\nexit\n", &[], None),
    // Real-time scheduling needs CAP_SYS_NICE, which no confined command
    // has: the refusal alone is checked.
    e("chrt", "chrt 1 touch MARKER", TOUCH, None),
    e("taskset", "taskset 1 touch MARKER", TOUCH, UTIL),
    e("ionice", "ionice touch MARKER", TOUCH, UTIL),
    e("unshare", "unshare touch MARKER", TOUCH, UTIL),
    e("setpriv", "setpriv --nnp touch MARKER", TOUCH, UTIL),
    e("nsenter", "nsenter touch MARKER", TOUCH, UTIL),
    e("flock", "flock -u / touch MARKER", TOUCH, UTIL),
    e("flock", "flock lock -c 'touch MARKER'", TOUCH, UTIL),
    e("setarch", "setarch x86_64 touch MARKER", TOUCH, UTIL),
    e("choom", "choom -n 0 touch MARKER", TOUCH, UTIL),
    e("prlimit", "prlimit touch MARKER", TOUCH, UTIL),
    // chroot needs CAP_SYS_CHROOT, which no confined command has (the
    // sandbox drops every capability): its refusal alone is checked.
    e("chroot", "chroot --skip-chdir / touch MARKER", TOUCH, None),
    e("timeout", "timeout 0 touch MARKER", TOUCH, CORE),
    e("nice", "nice touch MARKER", TOUCH, CORE),
    e("stdbuf", "stdbuf -i0 touch MARKER", TOUCH, CORE),
    e("time", "time touch MARKER", TOUCH, None),
    e("logsave", "logsave /dev/null touch MARKER", TOUCH, Some("logsave")),
    e("ssh-agent", "ssh-agent touch MARKER", TOUCH, Some("openssh-client")),
    e("watch", "watch -x touch MARKER", TOUCH, None),
    e("watch", "watch 'touch MARKER'", TOUCH, None),
    e("strace", "strace -o /dev/null touch MARKER", TOUCH, Some("strace")),
    e("strace", "strace -o '|touch MARKER' true", &["proc:spawn:strace -o |touch MARKER true", "proc:spawn:true"], Some("strace")),
    e("busybox", "busybox sh -c 'touch MARKER'", &["proc:spawn:sh -c *", "proc:spawn:touch *"], Some("busybox")),
    e("capsh", "capsh -- -c 'touch MARKER'", &["proc:spawn:bash -c *", "proc:spawn:touch *"], Some("libcap2-bin")),
    e("/lib64/ld-linux-x86-64.so.2", "/lib64/ld-linux-x86-64.so.2 /usr/bin/touch MARKER", TOUCH, Some("libc6")),
    e("sg", "sg root -c 'touch MARKER'", TOUCH, Some("login")),
    e("su", "su -c 'touch MARKER'", TOUCH, None),
    e("run-parts", "run-parts --regex '^touch$' /usr/bin", &[], None),
    e("parallel", "parallel touch ::: MARKER", &[], None),
    e("npx", "npx touch MARKER", &[], None),
    // shells
    e("bash", "bash -c 'touch MARKER'", TOUCH, Some("bash")),
    e("dash", "dash -c 'touch MARKER'", TOUCH, Some("dash")),
    fed("bash", "bash -s", "touch MARKER\n", &["proc:spawn:bash -s"], Some("bash")),
    // programs that run the commands they read on standard input
    fed("ed", "ed /dev/null", "!touch MARKER\nq\n", &["proc:spawn:ed /dev/null"], Some("ed")),
    fed("ftp", "ftp -n", "!touch MARKER\nbye\n", &["proc:spawn:ftp -n"], Some("ftp")),
    fed("tclsh", "tclsh -", "exec touch MARKER\n", &["proc:spawn:tclsh -"], Some("tcl")),
    fed("vi", "vi /dev/null", ":!touch MARKER\n:q!\n", &["proc:spawn:vi /dev/null"], Some("vim-tiny")),
    fed("vi", "vi -es", "!touch MARKER\nq!\n", &["proc:spawn:vi -es"], Some("vim-tiny")),
    fed("python3", "python3 -", "import os; os.system('touch MARKER')\n", &["proc:spawn:python3 -"], Some("python3")),
    fed("sqlite3", "sqlite3 /dev/null", ".shell touch MARKER\n", &["proc:spawn:sqlite3 /dev/null"], Some("sqlite3")),
    fed("gdb", "gdb -nx -q", "!touch MARKER\nquit\n", &["proc:spawn:gdb -nx -q"], Some("gdb")),
    // code in the line
    e("vi", "vi -c ':!touch MARKER' -c ':q!' /dev/null", &["proc:spawn:vi -c * -c * /dev/null"], Some("vim-tiny")),
    e("vi", "vi -es -c '!touch MARKER' -c 'q!'", &["proc:spawn:vi -es -c * -c *"], Some("vim-tiny")),
    e("python3", "python3 -c 'import os; os.system(\"touch MARKER\")'", &["proc:spawn:python3 -c *"], Some("python3")),
    e("perl", "perl -e 'system(\"touch MARKER\")'", &["proc:spawn:perl -e *"], Some("perl")),
    e("perl", "PERL5OPT=-d PERL5DB='system(\"touch MARKER\")' perl /dev/null", &["proc:spawn:PERL5OPT=-d PERL5DB=* perl /dev/null"], Some("perl")),
    e("node", "node -e 'require(\"child_process\").execSync(\"touch MARKER\")'", &["proc:spawn:node -e *"], Some("nodejs")),
    e("lua", "lua -e 'os.execute(\"touch MARKER\")'", &["proc:spawn:lua -e *"], Some("lua5.4")),
    e("expect", "expect -c 'exec touch MARKER'", &["proc:spawn:expect -c *"], Some("expect")),
    e("gdb", "gdb -nx -batch -ex '!touch MARKER'", &["proc:spawn:gdb -nx -batch -ex *"], Some("gdb")),
    e("sqlite3", "sqlite3 /dev/null '.shell touch MARKER'", &["proc:spawn:sqlite3 /dev/null .shell touch MARKER"], Some("sqlite3")),
    e("ruby", "ruby -e 'system(\"touch MARKER\")'", &[], None),
    e("php", "php -r 'system(\"touch MARKER\");'", &[], None),
    e("emacs", "emacs -Q -nw --eval '(shell-command \"touch MARKER\")'", &[], None),
    e("jrunscript", "jrunscript -e 'exec(\"touch MARKER\")'", &[], None),
    // other programs
    e("zip", "zip z.zip /etc/hosts -T -TT 'touch MARKER #'", &["proc:spawn:zip z.zip /etc/hosts -T -TT *"], Some("zip")),
    e("socat", "socat - 'exec:touch MARKER'", &["proc:spawn:socat - exec:*"], Some("socat")),
    e("split", "split --filter='touch MARKER' /etc/hosts", &["proc:spawn:split --filter=* /etc/hosts"], CORE),
    e("man", "man '-Htouch MARKER #' man", &[], None),
    e("less", "less -o MARKER /etc/hosts", &[], None),
    e("less", "LESSOPEN='|touch MARKER %s' less /etc/hosts", &["proc:spawn:LESSOPEN=* less /etc/hosts"], Some("less")),
    e("pip", "pip config --editor 'touch MARKER' edit", &[], None),
    e("gcc", "gcc -wrapper touch,MARKER -x c /dev/null", &[], None),
    e("tmux", "tmux -c 'touch MARKER'", &[], None),
    e("wget", "wget --use-askpass='touch MARKER' http://u@example.invalid/", &[], None),
    e("nc", "nc -e 'touch MARKER' example.invalid 1", &[], None),
    e("cargo", "cargo --config 'target.x.runner=\"touch MARKER\"' run", &[], None),
    e("apt-get", "apt-get update -o APT::Update::Pre-Invoke::='touch MARKER'", &[], None),
    e("zic", "zic -d . -y 'touch MARKER' zones", &[], None),
];

/// The entry's line, stdin and rules with its own marker name.
fn marked(text: &str, n: usize) -> String {
    text.replace("MARKER", &format!("MARKER{n}"))
}

/// A workspace for `program`'s entries: for git a repository (see
/// [`repo`]) with what its entries use (an attribute naming the `x` filter,
/// a `git-x` command, a config file); for tar an archive.
fn setup(program: &str) -> common::Workspace {
    let ws = common::workspace();
    if program == "git" {
        repo(ws.path());
        fs::write(ws.file(".gitattributes"), "a.txt filter=x\n").unwrap();
        // `git --exec-path=. x` runs it: it makes that entry's marker.
        let n = ENTRIES
            .iter()
            .position(|e| e.line.starts_with("git --exec-path"))
            .unwrap();
        let x = ws.file("git-x");
        fs::write(&x, format!("#!/bin/sh\ntouch MARKER{n}\n")).unwrap();
        use std::os::unix::fs::PermissionsExt;
        fs::set_permissions(&x, fs::Permissions::from_mode(0o755)).unwrap();
    }
    if program == "tar" {
        fs::write(ws.file("f"), "x").unwrap();
        let ok = std::process::Command::new("tar")
            .args(["cf", "a.tar", "f"])
            .current_dir(ws.path())
            .status()
            .expect("tar runs");
        assert!(ok.success());
    }
    ws
}

/// Runs each `(index, entry)` as one bash call under the policy `rules`
/// (plus system reads and workspace writes), in one sluice run; the result
/// of each.
fn run_all(
    ws: &common::Workspace,
    name: &str,
    rules: &[String],
    entries: &[(usize, &Entry)],
) -> Vec<(Value, Value)> {
    let rules: Vec<&str> = rules.iter().map(String::as_str).collect();
    let policy = common::policy(ws, name, &policy_text(&rules));
    let inputs: Vec<Value> = entries
        .iter()
        .map(|(n, e)| {
            let mut input = json!({"command": marked(e.line, *n), "timeoutMs": 20000});
            if let Some(stdin) = e.stdin {
                input["stdin"] = json!(marked(stdin, *n));
            }
            input
        })
        .collect();
    let script = format!(
        "for _, input in ipairs(sluice.json.decode({})) do\n\
           local out, err = sluice.bash(input)\n\
           print(sluice.json.encode({{out = out or sluice.json.null, err = err or sluice.json.null}}))\n\
         end\n",
        common::lua_str(&Value::Array(inputs).to_string())
    );
    let run = common::run_lua_env(
        ws.path(),
        &script,
        &["--policy", &policy, "--no-audit"],
        &[],
        &[("PATH", PATH)],
    );
    assert_eq!(
        run.code, 0,
        "sluice run failed\nstdout:\n{}\nstderr:\n{}",
        run.stdout, run.stderr
    );
    let results: Vec<(Value, Value)> = run
        .stdout
        .lines()
        .map(|l| {
            let v: Value =
                serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON: {l:?}: {e}"));
            (v["out"].clone(), v["err"].clone())
        })
        .collect();
    assert_eq!(results.len(), entries.len(), "{}", run.stderr);
    results
}

/// The entries by program, with their index.
fn by_program() -> BTreeMap<&'static str, Vec<(usize, &'static Entry)>> {
    let mut groups: BTreeMap<&str, Vec<(usize, &Entry)>> = BTreeMap::new();
    for (n, e) in ENTRIES.iter().enumerate() {
        groups.entry(e.program).or_default().push((n, e));
    }
    groups
}

/// The rule allowing `program`'s ordinary uses.
fn allow(program: &str) -> String {
    format!("proc:spawn:{} *", pattern_literal(program))
}

fn pattern_literal(text: &str) -> String {
    sluice::internals::kernel::pattern::escaped(text)
}

#[test]
fn every_entry_is_refused_under_an_allow_rule_for_its_program() {
    assert!(ENTRIES.len() >= 100, "{} entries", ENTRIES.len());
    for (program, entries) in by_program() {
        let ws = setup(program);
        let results = run_all(&ws, "program.lua", &[allow(program)], &entries);
        for ((n, e), (out, err)) in entries.iter().zip(results) {
            let line = marked(e.line, *n);
            policy_support::refused(
                &format!("`{line}` under proc:spawn:{program} *"),
                &out,
                &err,
            );
            assert!(
                !ws.file(&format!("MARKER{n}")).exists(),
                "`{line}` made its marker"
            );
        }
    }
}

#[test]
fn each_entry_runs_under_a_rule_that_names_its_form() {
    for (program, entries) in by_program() {
        let runnable: Vec<(usize, &Entry)> = entries
            .into_iter()
            .filter(|(_, e)| e.package.is_some())
            .collect();
        if runnable.is_empty() {
            continue;
        }
        let name = program.rsplit('/').next().unwrap();
        if !program.starts_with('/') {
            require(name, runnable[0].1.package.unwrap());
        }
        let ws = setup(program);
        let mut rules = vec![allow(program)];
        for (n, e) in &runnable {
            rules.extend(e.grant.iter().map(|g| marked(g, *n)));
        }
        let results = run_all(&ws, "named.lua", &rules, &runnable);
        for ((n, e), (out, err)) in runnable.iter().zip(results) {
            let line = marked(e.line, *n);
            assert!(
                err.is_null() || err["code"] == "timeout",
                "`{line}` under {:?} was refused: {err}",
                e.grant
            );
            assert!(
                ws.file(&format!("MARKER{n}")).exists(),
                "`{line}` under {:?} did not make its marker: {out}",
                e.grant
            );
        }
    }
}

/// Ordinary uses of the programs: allowed by `proc:spawn:PROG *` alone.
const ORDINARY: &[(&str, &str)] = &[
    ("git", "git status"),
    ("git", "git log --oneline -1"),
    ("git", "git -c color.ui=never diff --stat"),
    ("git", "git -C . log -1"),
    ("git", "git grep -n three"),
    ("git", "git config --get user.name || true"),
    ("find", "find . -name a.txt"),
    ("find", "find . -type f -newer a.txt"),
    ("tar", "tar cf out.tar a.txt"),
    ("tar", "tar czf out.tgz a.txt"),
    ("tar", "tar tf a.tar"),
    ("sed", "sed -n 1p /etc/hosts"),
    ("sed", "sed -i 's/e/E/g; /w/d' a.txt"),
    ("awk", "awk '$1 > 0 {print $1}' /etc/hosts"),
    ("make", "make --version"),
    ("python3", "python3 -V"),
    ("perl", "perl -v"),
    ("vi", "vi --version"),
    ("sqlite3", "sqlite3 /dev/null 'select 1'"),
    ("zip", "zip -q z.zip a.txt"),
    ("rsync", "rsync -a a.txt b.txt"),
    ("ssh", "ssh -V"),
    ("less", "less a.txt"),
];

#[test]
fn ordinary_uses_still_run() {
    let mut by: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for (p, line) in ORDINARY {
        by.entry(p).or_default().push(line);
    }
    for (program, lines) in by {
        let ws = setup(program);
        if program != "git" {
            repo(ws.path());
        }
        let policy = common::policy(
            &ws,
            "p.lua",
            &policy_text(&[&allow(program), "proc:spawn:true"]),
        );
        for line in lines {
            let (out, err) = policy_support::bash(&ws, &policy, line, json!({}));
            policy_support::ran(line, &out, &err);
        }
    }
}

#[test]
fn escapes_that_need_a_terminal_are_out_of_reach() {
    // less, more and man read their commands from a terminal, and sluice
    // gives commands none: the escape is never read, let alone run.
    for (program, line) in [
        ("less", "less /etc/hosts"),
        ("more", "more /etc/hosts"),
        ("man", "man man"),
    ] {
        require(program, program);
        let ws = common::workspace();
        let policy = common::policy(&ws, "p.lua", &policy_text(&[&allow(program)]));
        let (out, err) =
            policy_support::bash(&ws, &policy, line, json!({"stdin": "!touch MARKER\nq\n"}));
        assert!(err.is_null() || err["code"] == "timeout", "{line}: {err}");
        assert!(!ws.file("MARKER").exists(), "{line} ran its escape: {out}");
    }
}

#[test]
fn the_refusal_says_which_form_and_the_rule_that_would_grant_it() {
    let ws = setup("git");
    let policy = common::policy(&ws, "p.lua", &policy_text(&[&allow("git")]));
    let (_, err) = policy_support::bash(&ws, &policy, "git -c core.pager=x log", json!({}));
    let reason = err["reason"].as_str().unwrap_or_default();
    assert!(
        reason.contains("uses `-c core.pager`")
            && reason.contains(r#"the allow rule "proc:spawn:git *" does not name that form"#)
            && reason.contains(r#"p.allow "proc:spawn:git -c core.pager=x log""#),
        "{err}"
    );
    assert_eq!(err["code"], "permission_denied", "{err}");
}
