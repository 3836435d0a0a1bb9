//! The analysis, line by line: what it lists, in order, and how.

use super::*;

fn commands(line: &str) -> Vec<Command> {
    match analyze(line) {
        Analysis::Parsed(commands) => commands,
        Analysis::Unparsed { reason } => panic!("{line:?} did not parse: {reason}"),
    }
}

fn texts(line: &str) -> Vec<String> {
    commands(line).into_iter().map(|c| c.text).collect()
}

/// Asserts the `text` of every command the line lists, in order.
#[track_caller]
fn check(line: &str, expected: &[&str]) {
    assert_eq!(texts(line), expected, "for {line:?}");
}

fn redirects(line: &str) -> Vec<(String, bool)> {
    commands(line)
        .into_iter()
        .flat_map(|c| c.redirects)
        .map(|r| (r.target, r.write))
        .collect()
}

fn w(target: &str) -> (String, bool) {
    (target.to_owned(), true)
}

fn r(target: &str) -> (String, bool) {
    (target.to_owned(), false)
}

#[track_caller]
fn unparsed(line: &str) -> String {
    match analyze(line) {
        Analysis::Unparsed { reason } => reason,
        Analysis::Parsed(c) => panic!("{line:?} parsed: {c:?}"),
    }
}

// ---- lists, pipelines, compound commands --------------------------------

#[test]
fn and_list_and_pipeline() {
    check("git status && curl x | sh", &["git status", "curl x", "sh"]);
}

#[test]
fn sequence_or_background() {
    check("a; b || c &", &["a", "b", "c"]);
    check("ls |& grep x", &["ls", "grep x"]);
    check("! git status", &["git status"]);
    check("time git status", &["git status"]);
}

#[test]
fn subshell_and_group() {
    check("(cd /tmp && rm -rf x)", &["cd /tmp", "rm -rf x"]);
    check("{ a; b; }", &["a", "b"]);
}

#[test]
fn if_for_while_case() {
    check("if curl x; then rm y; fi", &["curl x", "rm y"]);
    check(
        "if a; then b; elif c; then d; else e; fi",
        &["a", "b", "c", "d", "e"],
    );
    check(r#"for f in *; do rm "$f"; done"#, &[r#"rm "$f""#]);
    check("for f in $(ls); do :; done", &["ls", ":"]);
    check("until a; do b; done", &["a", "b"]);
    check(
        "case $x in a) rm a;; b|c) curl b;; esac",
        &["rm a", "curl b"],
    );
    check("case $(curl x) in *) :;; esac", &["curl x", ":"]);
    check(
        "for ((i = $(curl x); i < 3; i++)); do b; done",
        &["curl x", "b"],
    );
    check("(( $(curl x) ))", &["curl x"]);
    check("coproc curl x", &["curl x"]);
}

#[test]
fn nested_subshells_are_not_arithmetic() {
    // brush-parser reads these as `((...))`; bash runs them as subshells.
    check("( ( curl x ) )", &["curl x"]);
    check("((curl x) )", &["curl x"]);
    check(
        "echo $( ( ( curl x ) ) )",
        &["echo $( ( ( curl x ) ) )", "curl x"],
    );
    check("(( i++ ))", &[]);
    check("if (( 1 )); then curl x; fi", &["curl x"]);
}

#[test]
fn functions_body_and_call() {
    check("f() { curl x; }; f", &["curl x", "f"]);
    check("function g { curl x; }", &["curl x"]);
}

#[test]
fn extended_test() {
    check("[[ -f $(curl x) ]]", &["curl x"]);
    check("[[ $x =~ ^(a|b)$ ]] && ok", &["ok"]);
}

#[test]
fn comments_and_continuations() {
    check("git status # && curl x", &["git status"]);
    check("git status \\\n  && curl x", &["git status", "curl x"]);
    check("a\nb", &["a", "b"]);
}

// ---- substitutions ------------------------------------------------------

#[test]
fn command_substitution() {
    check("echo $(curl evil)", &["echo $(curl evil)", "curl evil"]);
    check(
        "echo $(echo $(curl x))",
        &["echo $(echo $(curl x))", "echo $(curl x)", "curl x"],
    );
    check(
        r#"git commit -m "fix: $(date)""#,
        &[r#"git commit -m "fix: $(date)""#, "date"],
    );
    check("$(curl x) arg", &["$(curl x) arg", "curl x"]);
}

#[test]
fn backticks() {
    check("echo `curl evil`", &["echo `curl evil`", "curl evil"]);
    check(
        r#"echo "a `curl x` b""#,
        &[r#"echo "a `curl x` b""#, "curl x"],
    );
    check(
        "echo `echo \\`curl x\\``",
        &["echo `echo \\`curl x\\``", "echo `curl x`", "curl x"],
    );
}

#[test]
fn substitution_inside_double_quotes() {
    check(
        r#"echo "$(rm -rf /)""#,
        &[r#"echo "$(rm -rf /)""#, "rm -rf /"],
    );
}

#[test]
fn substitution_inside_expansions() {
    check("echo ${x:-$(curl x)}", &["echo ${x:-$(curl x)}", "curl x"]);
    check(
        r#"echo "${a[$(curl x)]}""#,
        &[r#"echo "${a[$(curl x)]}""#, "curl x"],
    );
    check(
        "echo ${x/$(curl a)/$(curl b)}",
        &["echo ${x/$(curl a)/$(curl b)}", "curl a", "curl b"],
    );
    check(
        "echo $(( $(curl x) + 1 ))",
        &["echo $(( $(curl x) + 1 ))", "curl x"],
    );
}

#[test]
fn process_substitution() {
    check("cat <(curl x)", &["cat <(curl x)", "curl x"]);
    check("diff >(tee f) g", &["diff >(tee f) g", "tee f"]);
    check("echo hi > >(curl x)", &["echo hi", "curl x"]);
    assert!(commands("cat <(curl x)")[0].dynamic);
}

// ---- assignments --------------------------------------------------------

#[test]
fn leading_assignments_are_not_words() {
    check("FOO=1 git status", &["git status"]);
    check("FOO=1 BAR='a b' git status", &["git status"]);
    check("FOO=$(curl x) git status", &["git status", "curl x"]);
    check("export A=$(curl x)", &["export A=$(curl x)", "curl x"]);
}

#[test]
fn bare_assignment_yields_its_substitution() {
    check("X=$(curl x)", &["curl x"]);
    check("X=1", &[]);
    check("a=(1 $(curl x))", &["curl x"]);
    check("a[$(curl x)]=1", &["curl x"]);
}

// ---- words --------------------------------------------------------------

#[test]
fn quote_removal_of_static_words() {
    let c = &commands(r#"echo 'a b' "c" d\ e $'f\tg' "h\$i""#)[0];
    assert_eq!(c.words, ["echo", "a b", "c", "d e", "f\tg", "h$i"]);
    assert_eq!(c.text, "echo a b c d e f\tg h$i");
    assert!(!c.dynamic);
    // Ways to spell `rm` are all `rm`.
    for line in [
        r"\rm -rf /",
        "'r'm -rf /",
        r#""rm" -rf /"#,
        "r''m -rf /",
        r"$'\x72m' -rf /",
        r"$'\162m' -rf /",
    ] {
        check(line, &["rm -rf /"]);
    }
}

#[test]
fn dynamic_words_keep_their_source() {
    let c = &commands(r#"echo ~ *.rs "$HOME" {a,b} $x [ab] ~/x "~/y""#)[0];
    assert_eq!(
        c.words,
        [
            "echo",
            "~",
            "*.rs",
            r#""$HOME""#,
            "{a,b}",
            "$x",
            "[ab]",
            "~/x",
            "~/y"
        ]
    );
    assert!(c.dynamic);
    let c = &commands("[ -f x ] && git log -1 HEAD@{1}")[..];
    assert!(!c[0].dynamic && !c[1].dynamic, "{c:?}");
    // An ANSI-C escape that is not a plain string stays as written.
    check(r"echo $'a\0b'", &[r"echo $'a\0b'"]);
}

// ---- redirections -------------------------------------------------------

#[test]
fn redirect_into_protected_files() {
    let c = commands("echo hi > .git/config");
    assert_eq!(c[0].text, "echo hi");
    assert_eq!(
        c[0].redirects,
        [Redirect {
            write: true,
            target: ".git/config".into(),
            dynamic: false
        }]
    );
    let c = commands("echo hi >> ~/.bashrc");
    assert_eq!(c[0].text, "echo hi");
    assert_eq!(
        c[0].redirects,
        [Redirect {
            write: true,
            target: "~/.bashrc".into(),
            dynamic: true
        }]
    );
    assert_eq!(redirects("cat < /etc/shadow"), [r("/etc/shadow")]);
    assert_eq!(redirects("echo hi &> out"), [w("out")]);
    assert_eq!(redirects("echo hi &>> out"), [w("out")]);
    assert_eq!(redirects("echo hi >| out"), [w("out")]);
    assert_eq!(redirects("echo hi >& out"), [w("out")]);
    assert_eq!(redirects("cat 4<> f"), [w("f")]);
    assert_eq!(redirects(r#"> "a b" echo hi 2>err"#), [w("a b"), w("err")]);
    check("> .git/config", &[""]);
    assert_eq!(redirects("> .git/config"), [w(".git/config")]);
    assert_eq!(redirects("exec 3> f"), [w("f")]);
}

#[test]
fn redirect_without_a_command() {
    // `$(<file)` reads the file without running anything.
    check("x=$(</etc/shadow)", &[""]);
    assert_eq!(redirects("x=$(</etc/shadow)"), [r("/etc/shadow")]);
    check("exec >/tmp/log 2>&1", &["exec"]);
    assert_eq!(redirects("exec >/tmp/log 2>&1"), [w("/tmp/log")]);
}

#[test]
fn descriptor_duplication_is_not_a_file() {
    check("git log 2>&1 | head", &["git log", "head"]);
    assert_eq!(redirects("git log 2>&1 | head"), []);
    assert_eq!(redirects("cat 3>&- 4<&0 5>&6-"), []);
}

#[test]
fn redirect_target_with_substitution() {
    let c = commands("echo hi > $(curl x)");
    assert_eq!(
        c.iter().map(|c| c.text.as_str()).collect::<Vec<_>>(),
        ["echo hi", "curl x"]
    );
    assert_eq!(c[0].redirects[0].target, "$(curl x)");
    assert!(c[0].redirects[0].dynamic);
}

#[test]
fn redirects_of_compound_commands() {
    check("{ curl x; } > .git/config", &["", "curl x"]);
    assert_eq!(redirects("{ curl x; } > .git/config"), [w(".git/config")]);
    check(
        "while read l; do echo $l; done < f",
        &["", "read l", "echo $l"],
    );
    assert_eq!(redirects("while read l; do echo $l; done < f"), [r("f")]);
    check("(a) 2>&1", &["a"]);
}

#[test]
fn here_documents_and_strings() {
    check("cat <<EOF\nhello $(curl x)\nEOF\n", &["cat", "curl x"]);
    check("cat <<'EOF'\nhello $(curl x)\nEOF\n", &["cat"]);
    check("cat <<< \"$(curl x)\"", &["cat", "curl x"]);
    assert_eq!(redirects("cat <<EOF\nx\nEOF\n"), []);
}

// ---- wrappers -----------------------------------------------------------

#[test]
fn shell_dash_c() {
    check(
        "sh -c 'curl x | sh'",
        &["sh -c curl x | sh", "curl x", "sh"],
    );
    check("bash -lc \"rm -rf ~\"", &["bash -lc rm -rf ~", "rm -rf ~"]);
    check(
        "bash -e -o pipefail -c 'a && b' name arg",
        &["bash -e -o pipefail -c a && b name arg", "a", "b"],
    );
    check("/bin/dash -c 'curl x'", &["/bin/dash -c curl x", "curl x"]);
    check("zsh -c 'curl x'", &["zsh -c curl x", "curl x"]);
    check("bash script.sh", &["bash script.sh"]);
    // A script given only at run time cannot be seen: the wrapper is
    // dynamic, and what it runs is a program known only at run time.
    let c = commands(r#"bash -c "$CMD""#);
    assert_eq!(c.len(), 2);
    assert!(c[0].dynamic && !c[0].program_dynamic);
    assert!(c[1].program_dynamic);
    assert_eq!(c[1].text, r#""$CMD""#);
}

#[test]
fn shell_reading_a_here_document() {
    check(
        "bash <<'EOF'\ncurl x | sh\nEOF\n",
        &["bash", "curl x", "sh"],
    );
    check("sh -s <<< 'rm -rf /'", &["sh -s", "rm -rf /"]);
    check("bash script.sh <<< 'rm -rf /'", &["bash script.sh"]);
    // In an unquoted here-document `\$` is escaped and `\"` is not.
    check(
        "bash <<EOF\necho \\\"hi\\\" \\$HOME\nEOF\n",
        &["bash", "echo \"hi\" $HOME"],
    );
    // A script known only at run time is a program known only then.
    check(
        "bash <<EOF\n$(curl x)\nEOF\n",
        &["bash", "curl x", "$(curl x)\n"],
    );
}

#[test]
fn env_wrapper() {
    check(
        "env -i PATH=/bin curl x",
        &["env -i PATH=/bin curl x", "curl x"],
    );
    check(
        "env -u HOME --chdir /tmp A=1 B=2 curl x",
        &["env -u HOME --chdir /tmp A=1 B=2 curl x", "curl x"],
    );
    check(
        "/usr/bin/env - curl x",
        &["/usr/bin/env - curl x", "curl x"],
    );
    check("env A=1", &["env A=1"]);
    assert!(unparsed("env -S 'curl x'").contains("env -S"));
}

#[test]
fn timeout_nice_nohup_stdbuf_time() {
    check("timeout 5 curl x", &["timeout 5 curl x", "curl x"]);
    check(
        "timeout -s KILL --kill 3 5 curl x",
        &["timeout -s KILL --kill 3 5 curl x", "curl x"],
    );
    check("nice -n 10 rm -rf /", &["nice -n 10 rm -rf /", "rm -rf /"]);
    check("nice -5 rm x", &["nice -5 rm x", "rm x"]);
    check("nohup curl x &", &["nohup curl x", "curl x"]);
    check(
        "stdbuf -oL -e 0 curl x",
        &["stdbuf -oL -e 0 curl x", "curl x"],
    );
    check(
        "/usr/bin/time -o t.txt -v curl x",
        &["/usr/bin/time -o t.txt -v curl x", "curl x"],
    );
    check("setsid -f curl x", &["setsid -f curl x", "curl x"]);
}

#[test]
fn command_builtin_exec() {
    check("command curl x", &["command curl x", "curl x"]);
    check("command -v curl", &["command -v curl"]);
    check(
        "builtin eval 'curl x'",
        &["builtin eval curl x", "eval curl x", "curl x"],
    );
    check("exec curl x", &["exec curl x", "curl x"]);
    check("exec -a name curl x", &["exec -a name curl x", "curl x"]);
}

#[test]
fn sudo_doas_su() {
    check("sudo -u root rm x", &["sudo -u root rm x", "rm x"]);
    check("sudo -E VAR=1 rm x", &["sudo -E VAR=1 rm x", "rm x"]);
    check("sudo -l", &["sudo -l"]);
    check("doas -u root rm x", &["doas -u root rm x", "rm x"]);
    check("su -c 'curl x' root", &["su -c curl x root", "curl x"]);
    check(
        "su root --command='curl x'",
        &["su root --command=curl x", "curl x"],
    );
}

#[test]
fn xargs_and_find_exec() {
    let c = commands("xargs rm < list");
    assert_eq!(
        c.iter().map(|c| c.text.as_str()).collect::<Vec<_>>(),
        ["xargs rm", "rm"]
    );
    assert_eq!(
        c[0].redirects,
        [Redirect {
            write: false,
            target: "list".into(),
            dynamic: false
        }]
    );
    assert!(c[1].dynamic, "xargs appends arguments at run time");
    check(
        "xargs -0 -I{} -n 1 sh -c 'rm {}'",
        &["xargs -0 -I{} -n 1 sh -c rm {}", "sh -c rm {}", "rm {}"],
    );
    check(
        r"find . -name x -exec rm {} \;",
        &["find . -name x -exec rm {} ;", "rm {}"],
    );
    check(
        "find . -execdir chmod +x {} + -ok rm -rf / ';'",
        &[
            "find . -execdir chmod +x {} + -ok rm -rf / ;",
            "chmod +x {}",
            "rm -rf /",
        ],
    );
    assert!(commands(r"find . -exec rm {} \;")[1].dynamic);
}

#[test]
fn eval_and_trap() {
    check(r#"eval "curl x""#, &["eval curl x", "curl x"]);
    check(
        "eval curl '$(id)'",
        &["eval curl $(id)", "curl $(id)", "id"],
    );
    check("trap 'curl x' EXIT", &["trap curl x EXIT", "curl x"]);
    check("trap - EXIT", &["trap - EXIT"]);
}

#[test]
fn nested_wrappers() {
    check(
        "sudo env timeout 5 sh -c 'nice curl x'",
        &[
            "sudo env timeout 5 sh -c nice curl x",
            "env timeout 5 sh -c nice curl x",
            "timeout 5 sh -c nice curl x",
            "sh -c nice curl x",
            "nice curl x",
            "curl x",
        ],
    );
}

#[test]
fn wrappers_of_util_linux_and_others() {
    for (line, inner) in [
        ("chrt 1 curl x", "curl x"),
        ("chrt -f -T 5 1 curl x", "curl x"),
        ("taskset 1 curl x", "curl x"),
        ("taskset -c 0,1 curl x", "curl x"),
        ("ionice curl x", "curl x"),
        ("ionice -c 3 curl x", "curl x"),
        ("ionice -c3 -n 7 curl x", "curl x"),
        ("unshare curl x", "curl x"),
        ("unshare -r --setgroups deny curl x", "curl x"),
        ("unshare --mount=/x -R / curl x", "curl x"),
        ("nsenter -t 1 -m curl x", "curl x"),
        ("setpriv --reuid 1000 curl x", "curl x"),
        ("flock -u / curl x", "curl x"),
        ("flock -w 5 /tmp/l curl x", "curl x"),
        ("setarch -3 curl x", "curl x"),
        ("setarch x86_64 -R curl x", "curl x"),
        ("linux32 curl x", "curl x"),
        ("choom -n 0 curl x", "curl x"),
        ("logsave /dev/null curl x", "curl x"),
        ("prlimit --nofile=10 curl x", "curl x"),
        ("chroot / curl x", "curl x"),
        ("strace -o /dev/null curl x", "curl x"),
        ("strace -f -e trace=open curl x", "curl x"),
        ("valgrind --tool=none curl x", "curl x"),
        ("ssh-agent curl x", "curl x"),
        ("busybox curl x", "curl x"),
        ("watch -x curl x", "curl x"),
        ("rlwrap -a curl x", "curl x"),
        ("/lib64/ld-linux-x86-64.so.2 curl x", "curl x"),
        ("ld.so --preload x.so curl x", "curl x"),
        ("npx curl x", "curl x"),
        ("npm exec -- curl x", "curl x"),
        ("uv run --with y curl x", "curl x"),
        ("bundle exec curl x", "curl x"),
        ("rustup run stable curl x", "curl x"),
        ("perf stat -e cycles curl x", "curl x"),
        ("start-stop-daemon -S -x curl -- x", "curl x"),
        ("ip netns exec n curl x", "curl x"),
    ] {
        let texts = texts(line);
        assert_eq!(
            texts.last().map(String::as_str),
            Some(inner),
            "{line}: {texts:?}"
        );
    }
    // Those that take a script, run by a shell.
    for line in [
        "flock /tmp/l -c 'curl x'",
        "flock -c 'curl x' /tmp/l",
        "watch 'curl x'",
        "watch -n 1 curl x",
        "script -q -c 'curl x' /dev/null",
        "sg users -c 'curl x'",
        "ssh host curl x",
        "ssh -p 22 host 'curl x'",
        "capsh -- -c 'curl x'",
        "parallel curl x ::: a b",
        "npx -c 'curl x'",
    ] {
        let texts = texts(line);
        assert_eq!(
            texts.last().map(String::as_str),
            Some("curl x"),
            "{line}: {texts:?}"
        );
    }
    // What runs nothing.
    for line in [
        "taskset -p 1",
        "chrt -m",
        "ionice -p 1",
        "setpriv -d",
        "flock 9",
        "ssh -N host",
        "ssh host",
        "npm install",
        "uv pip install x",
    ] {
        assert_eq!(texts(line).len(), 1, "{line}: {:?}", texts(line));
    }
}

#[test]
fn a_wrapper_with_no_command_runs_a_shell_known_only_at_run_time() {
    for line in [
        "script -q /dev/null",
        "unshare -r",
        "chroot /",
        "nsenter -t 1",
        "su",
        "sudo -s",
        "sg users",
        "run-parts /etc/x",
    ] {
        let c = commands(line);
        assert_eq!(c.len(), 2, "{line}: {c:?}");
        assert!(c[1].program_dynamic, "{line}");
        assert_eq!(c[1].text, "$SHELL", "{line}");
    }
    let c = commands("eval \"$X\"");
    assert!(c[1].program_dynamic, "{c:?}");
    let c = commands("$T x");
    assert!(c[0].program_dynamic);
    let c = commands("$(echo touch) x");
    assert!(c[0].program_dynamic);
    assert!(!commands("touch $x")[0].program_dynamic);
}

#[test]
fn assignments_reach_what_runs_them() {
    let env =
        |line: &str| -> Vec<Vec<String>> { commands(line).into_iter().map(|c| c.env).collect() };
    assert_eq!(env("PAGER=x git log"), [vec!["PAGER=x".to_string()]]);
    assert_eq!(
        env("PAGER=x timeout 5 git log"),
        [vec!["PAGER=x".to_string()], vec!["PAGER=x".to_string()]]
    );
    assert_eq!(env("env PAGER=x git log")[1], ["PAGER=x"]);
    assert_eq!(env("sudo -E PAGER=x git log")[1], ["PAGER=x"]);
    assert_eq!(env("strace -E PAGER=x git log")[1], ["PAGER=x"]);
    assert_eq!(env("PAGER=x sh -c 'git log'")[1], ["PAGER=x"]);
    // A table variable set earlier in the line stays in effect; others
    // are the shell's own.
    assert_eq!(
        env("PATH=/tmp/x; git status"),
        [vec!["PATH=/tmp/x".to_string()]]
    );
    assert_eq!(env("export PAGER=x; git log")[1], ["PAGER=x"]);
    assert_eq!(env("x=1; echo $x"), [Vec::<String>::new()]);
    assert_eq!(env("export PATH; git status")[1], Vec::<String>::new());
    assert_eq!(env("read HOME; git status")[1], ["HOME=$(read)"]);
}

#[test]
fn what_feeds_standard_input() {
    let fed = |line: &str| -> Vec<bool> { commands(line).iter().map(|c| c.fed).collect() };
    assert_eq!(fed("ed f"), [false]);
    assert_eq!(fed("echo x | ed f"), [false, true]);
    assert_eq!(fed("ed f < cmds"), [true]);
    assert_eq!(fed("ed f <<< x"), [true]);
    assert_eq!(fed("ed f <<EOF\nx\nEOF\n"), [true]);
    assert_eq!(fed("{ ed f; } < cmds"), [false, true]);
    assert_eq!(fed("echo x | { ed f; }"), [false, true]);
    assert_eq!(fed("echo x | sh -c 'ed f'"), [false, true, true]);
    assert_eq!(fed("exec < cmds; ed f"), [true, true]);
    assert_eq!(fed("ed f 2> err"), [false]);
}

// ---- what is not analyzed -----------------------------------------------

#[test]
fn unparsable_lines() {
    unparsed("echo 'unterminated");
    unparsed("if then fi");
    unparsed("echo )");
    // Inner scripts must parse too.
    assert!(unparsed("bash -c 'echo ('").contains("echo ("));
    // brush-parser 0.4 rejects `case` inside `$(...)`; failing closed.
    unparsed("echo $(case x in a) curl x;; esac)");
}

#[test]
fn deep_or_long_lines_are_refused_not_crashed() {
    let deep = format!("{}a{}", "{ ".repeat(3000), ";}".repeat(3000));
    assert!(unparsed(&deep).contains("levels deep"));
    let subs = format!("echo {}x{}", "$(echo ".repeat(500), ")".repeat(500));
    assert!(unparsed(&subs).contains("levels deep"));
    let long = "a;".repeat(MAX_LINE_BYTES);
    assert!(unparsed(&long).contains("bytes"));
    // Nesting within the limit is fine.
    let ok = format!("{}curl x{}", "( ".repeat(20), " )".repeat(20));
    check(&ok, &["curl x"]);
}

// ---- what commands run, and their options -------------------------------

fn run(kind: RunKind, words: &[usize], command: Option<usize>) -> Run {
    Run {
        kind,
        words: words.to_vec(),
        command,
    }
}

#[test]
fn runs_name_their_words_and_the_command_listed_for_them() {
    use RunKind::*;
    let c = commands("sudo -u root rm x");
    assert_eq!(c[0].runs, [run(Argv, &[3, 4], Some(1))]);
    assert!(c[1].runs.is_empty());
    assert_eq!(
        commands("sh -c 'a; b' name")[0].runs,
        [run(Script, &[2], Some(1))]
    );
    assert_eq!(
        commands("eval a b")[0].runs,
        [run(Script, &[1, 2], Some(1))]
    );
    assert_eq!(commands("bash x.sh a")[0].runs, [run(File, &[1], None)]);
    assert_eq!(
        commands("bash <<'EOF'\na\nEOF\n")[0].runs,
        [run(Stdin, &[], Some(1))]
    );
    assert_eq!(commands("sh")[0].runs, [run(Stdin, &[], None)]);
    assert_eq!(commands("su")[0].runs, [run(Shell, &[], Some(1))]);
    assert_eq!(
        commands("su -c 'a' root")[0].runs,
        [run(Script, &[2], Some(1))]
    );
    let c = commands(r"find . -exec rm {} \; -exec cp {} x \;");
    assert_eq!(
        c[0].runs,
        [run(Argv, &[3, 4], Some(1)), run(Argv, &[7, 8, 9], Some(2))]
    );
    assert!(commands("git status")[0].runs.is_empty());
    // Nested: each wrapper points at the next.
    let c = commands("sudo timeout 5 sh -c 'curl x'");
    assert_eq!(c[0].runs, [run(Argv, &[1, 2, 3, 4, 5], Some(1))]);
    assert_eq!(c[1].runs, [run(Argv, &[2, 3, 4], Some(2))]);
    assert_eq!(c[2].runs, [run(Script, &[2], Some(3))]);
}

#[test]
fn runs_still_point_right_when_a_place_is_dropped() {
    // `X=$(...)` holds a place, then lists nothing of its own.
    let c = commands("X=$(sudo rm x)");
    assert_eq!(
        c.iter().map(|c| c.text.as_str()).collect::<Vec<_>>(),
        ["sudo rm x", "rm x"]
    );
    assert_eq!(c[0].runs[0].command, Some(1));
    let c = commands("a; X=$(sudo b) Y=$(sudo c)");
    assert_eq!(
        c.iter().map(|c| c.text.as_str()).collect::<Vec<_>>(),
        ["a", "sudo b", "b", "sudo c", "c"]
    );
    assert_eq!(c[1].runs[0].command, Some(2));
    assert_eq!(c[3].runs[0].command, Some(4));
}

#[test]
fn options_are_parsed_by_the_programs_grammar() {
    let options = |line: &str| commands(line)[0].options.clone();
    let o = options("cp -v -t dir a b").unwrap();
    assert!(o.has(&["v"]) && !o.has(&["r", "recursive"]));
    let dir = Value {
        word: 3,
        text: None,
    };
    assert_eq!(o.value(&["t", "target-directory"]), Some(&dir));
    assert_eq!(o.operands, [4, 5]);
    // cp's options may follow its operands, and long ones be abbreviated.
    let o = options("cp a b --target=dir").unwrap();
    let dir = Value {
        word: 3,
        text: Some("dir".into()),
    };
    assert_eq!(o.value(&["t", "target-directory"]), Some(&dir));
    assert_eq!(o.operands, [1, 2]);
    // A wrapper's end at its command.
    let o = options("timeout -s KILL 5 cp a -v").unwrap();
    assert_eq!(o.operands, [3, 4, 5, 6]);
    // A long option spelt out wins over a longer one it is a prefix of.
    assert_eq!(options("install --strip a b").unwrap().operands, [2, 3]);
    // A shell's, as bash reads them.
    let o = options("bash -eo pipefail --rcfile rc -c 'x' n").unwrap();
    assert!(o.has(&["c"]) && o.has(&["e"]));
    let rc = Value {
        word: 4,
        text: None,
    };
    assert_eq!(o.value(&["rcfile"]), Some(&rc));
    assert_eq!(o.operands, [6, 7]);
    assert!(is_shell("dash") && !is_shell("fish"));
    assert_eq!(options("git status"), None);
}

#[test]
fn a_flag_that_prefixes_a_long_option_with_an_argument_takes_none() {
    for (line, inner) in [
        ("sudo --login rm -rf /", "rm -rf /"),
        ("nsenter -t 1 --wd curl x", "curl x"),
        ("strace --summary curl x", "curl x"),
        ("start-stop-daemon --start --exec curl -- x", "curl x"),
        ("parallel --tag curl x ::: a", "curl x"),
    ] {
        let texts = texts(line);
        assert_eq!(
            texts.last().map(String::as_str),
            Some(inner),
            "{line}: {texts:?}"
        );
    }
    // Its prefixes still count as the option that takes one.
    check("sudo --login-c x rm y", &["sudo --login-c x rm y", "rm y"]);
}
