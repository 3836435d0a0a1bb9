//! What a command runs besides itself, from its words: the command a
//! wrapper runs (`sudo rm x`), a shell's script (`sh -c 'S'`), and the rest
//! the module doc lists. What is found here the walk lists in turn.

use super::getopt::{shell_options, Options};
use super::grammars::{is_loader, is_shell};
use super::walk::Walk;
use super::words::{joined, quote, Arg};
use std::ops::Range;

/// One thing a command runs. Indices count its arguments (its words after
/// its name).
pub(super) enum Inner {
    /// The command in the arguments `words`, given more arguments at run
    /// time if `appended`, with the assignments `env` the wrapper makes for
    /// it.
    Argv {
        words: Range<usize>,
        appended: bool,
        env: Vec<String>,
    },
    /// A script it hands to a shell (`sh -c 'S'`, `watch 'a; b'`), made of
    /// the arguments `words`.
    Script { script: Arg, words: Vec<usize> },
    /// A shell's script file: its argument at this index.
    File(usize),
    /// A shell's standard input, which a here-document may hold.
    Stdin,
    /// A shell of its own, given no command (`script`, `chroot /`): it runs
    /// whatever it reads.
    Shell,
}

impl Inner {
    fn argv(words: Range<usize>) -> Inner {
        Inner::Argv {
            words,
            appended: false,
            env: Vec::new(),
        }
    }

    fn script(script: Arg, words: impl IntoIterator<Item = usize>) -> Inner {
        Inner::Script {
            script,
            words: words.into_iter().collect(),
        }
    }
}

/// What `program` (a file name) runs, from its arguments `args` and the
/// options its grammar found in them (see the module doc of
/// [`super`] for the list).
pub(super) fn runs(program: &str, args: &[Arg], options: Option<&Options>) -> Walk<Vec<Inner>> {
    let none = Options::default();
    let options = options.unwrap_or(&none);
    Ok(match program {
        p if is_shell(p) => match shell_input(options) {
            ShellInput::Command(Some(i)) => vec![Inner::script(args[i].clone(), [i])],
            ShellInput::Command(None) => Vec::new(),
            ShellInput::Stdin => vec![Inner::Stdin],
            ShellInput::File(i) => vec![Inner::File(i)],
        },
        "su" | "runuser" => vec![match su_command(args) {
            Some((i, script)) => Inner::script(script, [i]),
            // Without `-c`, su starts the user's shell.
            None => Inner::Shell,
        }],
        "eval" if !args.is_empty() => vec![Inner::script(joined(args), 0..args.len())],
        "trap" => {
            let skip = usize::from(args.first().is_some_and(|a| a.text == "--"));
            match &args[skip..] {
                [action, _, ..]
                    if !action.text.starts_with('-')
                        && !action.text.bytes().all(|b| b.is_ascii_digit()) =>
                {
                    vec![Inner::script(action.clone(), [skip])]
                }
                _ => Vec::new(),
            }
        }
        "find" => find_exec(args),
        _ => wrapped(program, args, options)?.into_iter().collect(),
    })
}

/// Whether `words` (a command, name first) is a shell that reads its
/// script on standard input.
pub(super) fn runs_stdin(words: &[Arg]) -> bool {
    words.split_first().is_some_and(|(name, args)| {
        !name.dynamic
            && is_shell(name.text.rsplit('/').next().unwrap_or_default())
            && matches!(shell_input(&shell_options(args)), ShellInput::Stdin)
    })
}

/// The commands of `find`'s `-exec`, `-execdir`, `-ok` and `-okdir`, each
/// up to its `;` or `+`.
fn find_exec(args: &[Arg]) -> Vec<Inner> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < args.len() {
        if matches!(
            args[i].text.as_str(),
            "-exec" | "-execdir" | "-ok" | "-okdir"
        ) {
            let start = i + 1;
            let mut end = start;
            while end < args.len()
                && (args[end].dynamic || !matches!(args[end].text.as_str(), ";" | "+"))
            {
                end += 1;
            }
            if end > start {
                out.push(Inner::Argv {
                    words: start..end,
                    appended: args[start..end].iter().any(|a| a.text.contains("{}")),
                    env: Vec::new(),
                });
            }
            i = end;
        }
        i += 1;
    }
    out
}

/// What a shell runs, from its arguments.
enum ShellInput {
    /// `-c`: the first word after the options (if any), at this index.
    Command(Option<usize>),
    /// No operand (or `-s`): standard input.
    Stdin,
    /// A script file, at this index.
    File(usize),
}

/// What a shell given the options `o` runs.
fn shell_input(o: &Options) -> ShellInput {
    match o.next() {
        _ if o.has(&["c"]) => ShellInput::Command(o.next()),
        Some(i) if !o.has(&["s"]) => ShellInput::File(i),
        _ => ShellInput::Stdin,
    }
}

/// The command of `su -c CMD` (also `-cCMD`, `--command CMD`,
/// `--command=CMD`), and the index of the word that holds it; su's options
/// may follow the user name.
fn su_command(args: &[Arg]) -> Option<(usize, Arg)> {
    let next = |i: usize| args.get(i + 1).map(|a| (i + 1, a.clone()));
    for (i, arg) in args.iter().enumerate() {
        let t = arg.text.as_str();
        if t == "--" {
            break;
        }
        let part = |text: &str| {
            let part = Arg {
                text: text.to_owned(),
                dynamic: arg.dynamic,
            };
            Some((i, part))
        };
        if let Some(long) = t.strip_prefix("--") {
            let (name, value) = match long.split_once('=') {
                Some((name, value)) => (name, Some(value)),
                None => (long, None),
            };
            if name.len() >= 2
                && ("command".starts_with(name) || "session-command".starts_with(name))
            {
                return match value {
                    Some(value) => part(value),
                    None => next(i),
                };
            }
            continue;
        }
        if let Some(cluster) = t.strip_prefix('-') {
            // The first letter that takes an argument decides.
            if let Some(at) = cluster.find(['c', 'g', 'G', 's', 'w']) {
                if cluster[at..].starts_with('c') {
                    let rest = &cluster[at + 1..];
                    return if rest.is_empty() { next(i) } else { part(rest) };
                }
            }
        }
    }
    None
}

/// The `NAME=value` words from `from` on (as `env` and `sudo` take them),
/// and the index after them.
fn assignments(args: &[Arg], from: usize) -> (Vec<String>, usize) {
    let mut i = from;
    let mut set = Vec::new();
    while let Some(a) = args.get(i).filter(|a| a.text.contains('=')) {
        set.push(a.text.clone());
        i += 1;
    }
    (set, i)
}

/// `words` as a script that runs them as one command.
fn quoted(words: &[Arg]) -> Arg {
    Arg {
        text: words
            .iter()
            .map(|w| quote(&w.text))
            .collect::<Vec<_>>()
            .join(" "),
        dynamic: words.iter().any(|w| w.dynamic),
    }
}

/// What a program that runs a command (a wrapper) runs, from its
/// arguments and its options `o`. Each arm starts from what the options
/// leave.
fn wrapped(program: &str, args: &[Arg], o: &Options) -> Walk<Option<Inner>> {
    let len = args.len();
    // The command starting at `at`, if there is one.
    let argv = |at: Option<usize>| at.map(|start| Inner::argv(start..len));
    // The command after `skip` positional words (a priority, a mask, a
    // file) that follow the options.
    let after = |skip: usize| argv(o.next().map(|i| i + skip).filter(|&i| i < len));
    // The command starting at `at`, or else the wrapper's own shell.
    let argv_or_shell = |at: Option<usize>| Some(argv(at).unwrap_or(Inner::Shell));
    let script_value =
        |names: &[&str]| o.value(names).map(|v| Inner::script(v.arg(args), [v.word]));
    Ok(match program {
        "env" => {
            if o.has(&["S", "split-string"]) {
                return Err(
                    "env -S splits its argument into a command line by rules of its own; \
                            it is not analyzed"
                        .into(),
                );
            }
            let (env, start) = assignments(args, o.next().unwrap_or(len));
            (start < len).then_some(Inner::Argv {
                words: start..len,
                appended: false,
                env,
            })
        }
        "timeout" | "logsave" => after(1),
        "nice" | "nohup" | "builtin" | "setsid" | "stdbuf" | "time" | "exec" | "doas"
        | "valgrind" | "ssh-agent" | "rlwrap" | "prlimit" => argv(o.next()),
        p if is_loader(p) => argv(o.next()),
        // `command -v x` and `-V` describe `x`; they do not run it.
        "command" if o.has(&["v", "V"]) => None,
        "command" => argv(o.next()),
        "sudo" => {
            // Edit, list, validate, reset, version, help: nothing runs.
            let runs_nothing = o.has(&["e", "l", "v", "K", "V", "h"])
                || o.has_exactly(&[
                    "edit",
                    "list",
                    "validate",
                    "remove-timestamp",
                    "version",
                    "help",
                ]);
            let shell = o.has(&["s", "i"]) || o.has_exactly(&["shell", "login"]);
            match o.next().map(|i| assignments(args, i)) {
                _ if runs_nothing => None,
                Some((env, start)) if start < len => Some(Inner::Argv {
                    words: start..len,
                    appended: false,
                    env,
                }),
                _ if shell => Some(Inner::Shell),
                _ => None,
            }
        }
        "xargs" => o.next().map(|start| Inner::Argv {
            words: start..len,
            appended: true,
            env: Vec::new(),
        }),
        // util-linux and coreutils.
        "chrt" if o.has(&["p", "pid"]) || o.has(&["m", "max"]) => None,
        // The priority comes first.
        "chrt" => after(1),
        "taskset" if o.has(&["p", "pid"]) => None,
        // The mask (or list) comes first.
        "taskset" => after(1),
        "ionice" if o.has(&["p", "pid", "P", "pgid", "u", "uid"]) => None,
        "setpriv" if o.has(&["d", "dump"]) => None,
        "choom" if o.has(&["p", "pid"]) => None,
        "ionice" | "setpriv" | "choom" => argv(o.next()),
        "unshare" | "nsenter" => argv_or_shell(o.next()),
        "flock" => match script_value(&["c", "command"]) {
            Some(script) => Some(script),
            // `flock FILE -c CMD` or `flock FILE CMD...`; `flock N` runs nothing.
            None => match o.next().map(|i| (i, args.get(i + 1))) {
                Some((i, Some(c))) if c.text == "-c" || c.text == "--command" => {
                    args.get(i + 2).map(|s| Inner::script(s.clone(), [i + 2]))
                }
                Some((i, Some(_))) => argv(Some(i + 1)),
                _ => None,
            },
        },
        "setarch" | "linux32" | "linux64" | "i386" | "i686" | "x86_64" | "uname26" => {
            if o.has_exactly(&["list"]) {
                None
            } else {
                argv_or_shell(o.next())
            }
        }
        // After the new root; without a command, `$SHELL -i`.
        "chroot" => match o.next() {
            Some(i) if i + 1 < len => argv(Some(i + 1)),
            Some(_) => Some(Inner::Shell),
            None => None,
        },
        "sg" => {
            // `sg [-] [GROUP [-c] COMMAND]`: the command goes to `sh -c`.
            let skip = usize::from(args.first().is_some_and(|a| a.text == "-"));
            match args.get(skip + 1..) {
                Some([c, script, ..]) if c.text == "-c" => {
                    Some(Inner::script(script.clone(), [skip + 2]))
                }
                Some(rest) if !rest.is_empty() => Some(Inner::script(joined(rest), skip + 1..len)),
                _ => Some(Inner::Shell),
            }
        }
        "newgrp" => Some(Inner::Shell),
        "script" => script_value(&["c", "command"]).or(Some(Inner::Shell)),
        "watch" => match o.next() {
            Some(_) if o.has(&["x", "exec"]) => argv(o.next()),
            // Without -x the words are joined and run by `sh -c`.
            Some(i) => Some(Inner::script(joined(&args[i..]), i..len)),
            None => None,
        },
        "strace" => {
            // `-E VAR=VAL` sets the traced command's environment.
            let env = o
                .values(&["E", "env"])
                .map(|v| v.arg(args).text)
                .filter(|v| v.contains('='))
                .collect();
            o.next().map(|start| Inner::Argv {
                words: start..len,
                appended: false,
                env,
            })
        }
        "busybox" => match args.first() {
            Some(applet) if !applet.text.starts_with('-') => argv(Some(0)),
            _ => None,
        },
        "capsh" => {
            // `--` runs the shell (bash, or `--shell=`) with the rest;
            // `==` runs capsh again with the rest.
            let mut shell = None;
            for (i, a) in args.iter().enumerate() {
                if let Some(s) = a.text.strip_prefix("--shell=") {
                    shell = Some(s.to_owned());
                }
                if a.text == "--" || a.text == "==" {
                    let name = if a.text == "==" {
                        "capsh".to_owned()
                    } else {
                        shell.unwrap_or_else(|| "/bin/bash".to_owned())
                    };
                    let mut words = vec![Arg {
                        text: name,
                        dynamic: a.dynamic,
                    }];
                    words.extend_from_slice(&args[i + 1..]);
                    return Ok(Some(Inner::script(quoted(&words), i + 1..len)));
                }
            }
            None
        }
        "start-stop-daemon" if !o.has(&["S", "start"]) => None,
        "start-stop-daemon" => {
            let program = o
                .value(&["a", "startas"])
                .or_else(|| o.value(&["x", "exec"]));
            program.map(|p| {
                let rest = args
                    .iter()
                    .position(|a| a.text == "--")
                    .map_or(len, |i| i + 1);
                let mut words = vec![p.arg(args)];
                words.extend_from_slice(&args[rest..]);
                Inner::script(quoted(&words), std::iter::once(p.word).chain(rest..len))
            })
        }
        "ssh" => match o.next() {
            // The words after the destination are joined and run by the
            // remote user's shell (the host may be this machine).
            Some(i) if i + 1 < len => Some(Inner::script(joined(&args[i + 1..]), i + 1..len)),
            // Without a command, the remote shell reads standard input:
            // a form of the table when something feeds it.
            _ => None,
        },
        "run-parts" if o.has_exactly(&["test", "list"]) => None,
        // Runs every program it finds in the folder.
        "run-parts" => Some(Inner::Shell),
        "ip" => {
            // `ip [options] netns exec NAME CMD...`, `ip vrf exec NAME CMD...`.
            let words: Vec<&str> = args.iter().map(|a| a.text.as_str()).collect();
            match words.iter().position(|w| *w == "exec") {
                Some(i) if i >= 1 && matches!(words[i - 1], "netns" | "vrf" | "netn" | "net") => {
                    argv(Some(i + 2).filter(|&s| s < len))
                }
                _ => None,
            }
        }
        "systemd-run" => match o.next() {
            Some(_) => argv(o.next()),
            None if o.has(&["S", "shell"]) => Some(Inner::Shell),
            None => None,
        },
        "parallel" => match o.next() {
            // GNU parallel runs its command through the shell, or the
            // commands it reads on standard input when given none.
            Some(i) => {
                let end = args[i..]
                    .iter()
                    .position(|a| a.text.starts_with(":::"))
                    .map_or(len, |e| i + e);
                if end == i {
                    Some(Inner::Shell)
                } else {
                    Some(Inner::script(joined(&args[i..end]), i..end))
                }
            }
            None => Some(Inner::Shell),
        },
        // Package runners: the program they run is a package's, or any.
        // The grammar starts after the subcommand (`npm exec`); another
        // subcommand has none, and runs nothing.
        "npx" | "bunx" | "uvx" | "npm" | "pnpm" | "yarn" | "bun" | "uv" | "poetry" | "pipx"
        | "pdm" | "hatch" | "bundle" | "bundler" => {
            // `-c`/`--call` hands a script to the shell.
            script_value(&["c", "call"]).or_else(|| argv(o.next()))
        }
        "rustup" => match args.first().map(|a| a.text.as_str()) {
            // `rustup run TOOLCHAIN CMD...`
            Some("run") if len > 2 => argv(Some(2)),
            _ => None,
        },
        // Only `perf stat`, `record` and `trace` have a grammar.
        "perf" => argv(o.next()),
        _ => None,
    })
}
