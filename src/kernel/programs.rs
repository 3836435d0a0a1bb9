//! The table of what makes an allowed program run something its rule did
//! not name: environment variables that make a program run code or read
//! another configuration, and the *forms* of common programs (options,
//! subcommands, script commands) that make them run another program, load
//! code, or write files the line names.
//!
//! An allow rule such as `proc:spawn:git *` grants git's ordinary uses. A
//! command that holds something of this table is granted only when every
//! such thing is *named* by one of the allow rules that match it (see
//! [`Form`] for what naming is), or by a rule naming the whole command
//! exactly; otherwise it goes on to the ask rules and the policy's
//! `otherwise`, as if no allow rule had matched. A pattern of the run's
//! ceiling admits it when it names every such thing (or admits every
//! command line); a pre-approval (`--approve`) grants it as one allow rule
//! would.
//!
//! - A variable of [`VARS`] (`PAGER`, `GIT_SSH_COMMAND`, `HOME`, `PATH`,
//!   ...), set by the call's `env`, by the line (`PAGER=x git log`,
//!   `export PATH=...`, `env HOME=x git`), is not granted by any wildcard,
//!   `proc:spawn:*` included: the rule must spell the assignment
//!   (`proc:spawn:PAGER=less git log`, `proc:spawn:PAGER=* git *`).
//! - A program form (`git -c core.pager=x`, `tar --to-command`, `sed e`,
//!   `python3 -c`) is granted by a rule that spells it
//!   (`proc:spawn:git -c core.pager=less *`, `proc:spawn:python3 -c *`), or
//!   by a rule that grants every command line anyway (`proc:spawn:*`), since
//!   that rule already grants whatever the form would run.
//!
//! Programs that exist to run the command in their arguments (`timeout`,
//! `taskset`, `flock`, `watch`, `ssh HOST CMD`, `find -exec`, ...) are not
//! here: the shell analysis unwraps them ([`super::shell`]) and the command
//! they run is judged as a command of its own.
//!
//! # Programs covered
//!
//! Each entry of `GTFOBins` (<https://gtfobins.github.io>) whose function is
//! `shell` or `command`, for the programs Debian's base system and common
//! developer tools install, is either a form below, a variable of [`VARS`],
//! a wrapper the shell analysis unwraps, or out of reach because it needs a
//! person at a terminal (sluice gives commands none; see README).
//!
//! | program | forms |
//! |---|---|
//! | git | `-c KEY=` and `--config-env=KEY=` for keys that run code or read another file (`alias.*`, `core.fsmonitor`, `core.pager`, `core.editor`, `core.sshCommand`, `core.hooksPath`, `diff.external`, `filter.*`, `include.path`, `protocol.*.allow`, ...: see `GIT_KEYS`), `config KEY VALUE` setting one, `--exec-path=`, `--git-dir`, `--work-tree`, `--upload-pack`/`-u`, `--receive-pack`, `--exec`, `--template`, `ext::` URLs, `grep -O`, `difftool -x`, `rebase -x`, `bisect run`, `submodule foreach`, `filter-branch`, `send-email --smtp-server=/path`/`--*-cmd`, `instaweb`, `daemon --access-hook`, `hook run`, `remote-ext` |
//! | find | `-delete`, `-fprint`, `-fprint0`, `-fprintf`, `-fls` (`-exec`, `-execdir`, `-ok`, `-okdir` are unwrapped) |
//! | tar | `--to-command`, `-I`/`--use-compress-program`, `--checkpoint-action=exec=`, `-F`/`--info-script`/`--new-volume-script`, `--rsh-command`, `--rmt-command` |
//! | rsync | `-e`/`--rsh`, `--rsync-path` |
//! | ssh, scp, sftp | `-o` with `ProxyCommand`, `LocalCommand`, `PermitLocalCommand`, `KnownHostsCommand`, `RemoteCommand`, `Include`, `PKCS11Provider`, `SecurityKeyProvider`; `-F`; ssh `-I`; scp and sftp `-S`, `-D`; sftp `-b`, `-s PATH`; commands on standard input (sftp's, and ssh's remote shell when no command is given; a remote command is unwrapped) |
//! | sed | the `e` command, `s///e`, `w`, `W`, `s///w` (none with `--sandbox`) |
//! | awk, gawk, mawk, nawk | `system()`, pipes (`\|`, `\|&`), `print >`, `/inet/`, `@load`, `-l`/`--load` (none with gawk's `--sandbox`) |
//! | make | `--eval`/`-E`, a makefile read from standard input (`-f -`), `SHELL=`, `.SHELLFLAGS=`, `MAKESHELL=`, `MAKEFLAGS=`, `MAKEFILES=` |
//! | less | `+COMMAND`, `-o`/`-O`/`--log-file`, `-k`/`--lesskey-file`/`--lesskey-src` |
//! | man | `-H`/`--html`, `-P`/`--pager`, `-C`/`--config-file` |
//! | vi, vim, nvim, ex, view, ... | `-c`, `+COMMAND`, `--cmd`, `-S`, `-u`, `-U` (but `NONE`, `NORC`), `-s`, `--remote-send`, `--remote-expr`, and commands on standard input |
//! | python, perl, ruby, node, php, lua, tclsh, expect | code in the line (`-c`, `-e`, `-E`, `-r`, `-p`, `--eval`, `--print`, ...), a program on standard input (`-`, `-i`, none given or `/dev/stdin` when standard input is fed) |
//! | emacs | `--eval`/`-eval`/`--execute`, `-f`/`--funcall` |
//! | gdb | `-ex`/`--eval-command`, `-iex`/`--init-eval-command`, commands on standard input (without `-batch`) |
//! | sqlite3 | `.shell`, `.system`, `.load`, `.output \|`, `.once \|`, `.once -x`, `.excel`, `.read \|`, `.import \|`, `load_extension(`, `edit(` in its arguments or `-cmd`; `-init`; commands on standard input (none with `-safe`) |
//! | ed, ftp, cpan, debugfs, psql, mysql, irb, jshell, ... | commands on standard input |
//! | sh, bash, dash, zsh, ... | commands on standard input, from a pipe, a file or the call's `stdin`, also when named as the script (`sh /dev/stdin`) (`-c` and here-documents are unwrapped) |
//! | zip | `-TT`/`--unzip-command` |
//! | socat | `EXEC:` and `SYSTEM:` addresses |
//! | nc, ncat | `-e`, `-c`, `--exec`, `--sh-exec`, `--lua-exec` |
//! | cargo, rustc | `--config`, `-C linker=` |
//! | gcc, g++, cc, clang | `-wrapper`, `-B`, `-fplugin=`, `-specs=` |
//! | npm, pnpm, yarn | `--script-shell` (`npm exec`, `npx` and the like are unwrapped) |
//! | pip | `--editor` |
//! | strace | `-o \|COMMAND` |
//! | split, sort | `--filter`, `--compress-program` |
//! | tmux | `-c`, `-f`, `-S`, `-L`, and the commands that run a shell command (`new-session`, `new-window`, `split-window`, `respawn-*`, `run-shell`, `if-shell`, `pipe-pane`, `display-popup`, `source-file`) |
//! | wget | `--use-askpass`, `-e`/`--execute`, `--config` |
//! | apt, apt-get | `-o` setting a `*::Pre-Invoke`/`Post-Invoke`/`Pre-Install-Pkgs` hook, `-c` |
//! | groff, nroff, troff, pic | `-U` |
//! | zic | `-y` |
//! | jrunscript, Rscript, R, dc, gnuplot | `-e` |
//!
//! Left out: a program's own files and scripts (`make` runs its Makefile,
//! `cargo` its build scripts, `npm run` the package's scripts, `python3
//! x.py` its file): allowing the program allows what those files do, and
//! the sandbox confines them. Root-only tricks (`sysctl
//! kernel.core_pattern`, `service ../../x`, `dpkg -i`) and programs outside
//! the tools above (docker, kubectl, ...) are not in the table.

use super::shell;

/// An environment variable of the table.
#[derive(Debug)]
pub struct Var {
    /// The name, or how names of the group start when `prefix`
    /// (`LD_`, `GIT_CONFIG_KEY_`).
    pub name: &'static str,
    /// `name` is the start of the names it covers.
    pub prefix: bool,
    /// What it makes a program do.
    pub why: &'static str,
    /// It acts before the command itself: on the dynamic loader, or on the
    /// shell sluice runs the line with. The `env` of `bash` refuses these
    /// outright (the policy could not see what they do there); in the line
    /// itself they are judged like the others.
    pub startup: bool,
}

const fn var(name: &'static str, why: &'static str) -> Var {
    Var {
        name,
        prefix: false,
        why,
        startup: false,
    }
}

const fn group(name: &'static str, why: &'static str) -> Var {
    Var {
        name,
        prefix: true,
        why,
        startup: false,
    }
}

const fn startup(name: &'static str, prefix: bool, why: &'static str) -> Var {
    Var {
        name,
        prefix,
        why,
        startup: true,
    }
}

const RUNS: &str = "the program runs the command it holds";
const GIT_CONFIG: &str = "git takes configuration (core.fsmonitor, aliases, ...) from it";

/// Variables that make a program run code or read another configuration.
pub const VARS: &[Var] = &[
    // The loader and the shell sluice starts.
    startup(
        "LD_",
        true,
        "the dynamic loader preloads or finds libraries by it",
    ),
    startup(
        "GCONV_PATH",
        false,
        "the C library loads character-set modules from it",
    ),
    startup(
        "GLIBC_TUNABLES",
        false,
        "changes how the C library behaves at start",
    ),
    startup("BASH_FUNC_", true, "bash imports it as a function"),
    startup("BASH_ENV", false, "bash runs the file it names at start"),
    startup("ENV", false, "the shell runs the file it names at start"),
    startup("SHELLOPTS", false, "turns on shell options at start"),
    startup("BASHOPTS", false, "turns on shell options at start"),
    startup(
        "PS4",
        false,
        "bash expands it, substitutions included, when tracing",
    ),
    startup("IFS", false, "changes how the shell splits words"),
    startup("CDPATH", false, "changes where the shell's cd goes"),
    startup("GLOBIGNORE", false, "changes what the shell's globs match"),
    startup("PROMPT_COMMAND", false, "bash runs it before a prompt"),
    // Where programs are found and read their configuration from.
    var("PATH", "decides which program a name runs"),
    var(
        "HOME",
        "programs read their configuration (~/.gitconfig, ~/.bashrc, ...) there",
    ),
    var("XDG_CONFIG_HOME", "programs read their configuration there"),
    var("XDG_CONFIG_DIRS", "programs read their configuration there"),
    var("XDG_DATA_HOME", "programs load plugins and data from there"),
    var("XDG_DATA_DIRS", "programs load plugins and data from there"),
    var(
        "SHELL",
        "programs start it as the shell (vi's :sh, script, su)",
    ),
    // Pagers, editors, browsers, helpers.
    var("PAGER", RUNS),
    var("MANPAGER", RUNS),
    var("GIT_PAGER", RUNS),
    var("SYSTEMD_PAGER", RUNS),
    var("EDITOR", RUNS),
    var("VISUAL", RUNS),
    var("GIT_EDITOR", RUNS),
    var("GIT_SEQUENCE_EDITOR", RUNS),
    var("SUDO_EDITOR", RUNS),
    var("SYSTEMD_EDITOR", RUNS),
    var("FCEDIT", RUNS),
    var("BROWSER", RUNS),
    var("LESSOPEN", "less runs it on every file it opens"),
    var("LESSCLOSE", "less runs it on every file it closes"),
    var("LESS", "less takes options from it, `+` commands included"),
    var("LESSKEY", "less reads key bindings from the file it names"),
    var(
        "LESSKEYIN",
        "less reads key bindings from the file it names",
    ),
    var("LESSEDIT", "less runs it as the editor"),
    var("MANOPT", "man takes options from it (`-H` runs a browser)"),
    var("SSH_ASKPASS", RUNS),
    var("SUDO_ASKPASS", RUNS),
    // git.
    var("GIT_CONFIG", "git reads the configuration file it names"),
    var(
        "GIT_CONFIG_GLOBAL",
        "git reads the configuration file it names",
    ),
    var(
        "GIT_CONFIG_SYSTEM",
        "git reads the configuration file it names",
    ),
    var("GIT_CONFIG_COUNT", GIT_CONFIG),
    group("GIT_CONFIG_KEY_", GIT_CONFIG),
    group("GIT_CONFIG_VALUE_", GIT_CONFIG),
    var("GIT_CONFIG_PARAMETERS", GIT_CONFIG),
    var(
        "GIT_DIR",
        "git uses another repository, with its configuration and hooks",
    ),
    var(
        "GIT_WORK_TREE",
        "git uses another repository, with its configuration and hooks",
    ),
    var(
        "GIT_COMMON_DIR",
        "git uses another repository, with its configuration and hooks",
    ),
    var(
        "GIT_EXEC_PATH",
        "git runs its commands from the folder it names",
    ),
    var(
        "GIT_TEMPLATE_DIR",
        "git init copies hooks from the folder it names",
    ),
    var("GIT_SSH", RUNS),
    var("GIT_SSH_COMMAND", RUNS),
    var("GIT_ASKPASS", RUNS),
    var("GIT_PROXY_COMMAND", RUNS),
    var("GIT_EXTERNAL_DIFF", RUNS),
    var(
        "GIT_ALLOW_PROTOCOL",
        "lets git use protocols such as ext::, which run commands",
    ),
    // Interpreters.
    var(
        "PYTHONPATH",
        "python imports modules from the folders it names",
    ),
    var(
        "PYTHONHOME",
        "python imports its library from the folder it names",
    ),
    var("PYTHONSTARTUP", "python runs the file it names"),
    var("PYTHONBREAKPOINT", "python calls the function it names"),
    var(
        "PYTHONWARNINGS",
        "python imports the modules its filters name",
    ),
    var("PERL5OPT", "perl takes options (-M, -d) from it"),
    var("PERL5LIB", "perl loads modules from the folders it names"),
    var("PERLLIB", "perl loads modules from the folders it names"),
    var("PERL5DB", "perl runs it as the debugger"),
    var("RUBYOPT", "ruby takes options (-r) from it"),
    var("RUBYLIB", "ruby loads libraries from the folders it names"),
    var("NODE_OPTIONS", "node takes options (--require) from it"),
    var("NODE_PATH", "node loads modules from the folders it names"),
    group(
        "npm_config_",
        "npm takes configuration (script-shell, ...) from it",
    ),
    group(
        "NPM_CONFIG_",
        "npm takes configuration (script-shell, ...) from it",
    ),
    group("LUA_INIT", "lua runs the code it holds"),
    group("LUA_PATH", "lua loads modules from where it says"),
    group("LUA_CPATH", "lua loads modules from where it says"),
    var(
        "TCLLIBPATH",
        "tclsh loads packages from the folders it names",
    ),
    var(
        "PHPRC",
        "php reads the configuration it names (auto_prepend_file)",
    ),
    var(
        "PHP_INI_SCAN_DIR",
        "php reads configuration from the folder it names",
    ),
    var("EXINIT", "vi runs the commands it holds"),
    var("VIMINIT", "vim runs the commands it holds"),
    var("GVIMINIT", "vim runs the commands it holds"),
    var("MYVIMRC", "vim reads the configuration it names"),
    var(
        "VIMRUNTIME",
        "vim loads its runtime files from the folder it names",
    ),
    var(
        "EMACSLOADPATH",
        "emacs loads lisp from the folders it names",
    ),
    var(
        "JAVA_TOOL_OPTIONS",
        "java takes options (-javaagent) from it",
    ),
    var("_JAVA_OPTIONS", "java takes options (-javaagent) from it"),
    var(
        "JDK_JAVA_OPTIONS",
        "java takes options (-javaagent) from it",
    ),
    // Build tools and archivers.
    var("MAKEFLAGS", "make takes options (--eval) from it"),
    var("MFLAGS", "make takes options (--eval) from it"),
    var("MAKEFILES", "make reads the makefiles it names"),
    var("CC", "build tools run the compiler it names"),
    var("CXX", "build tools run the compiler it names"),
    var("RUSTC", "cargo runs the compiler it names"),
    var("RUSTDOC", "cargo runs the program it names"),
    var(
        "RUSTC_WRAPPER",
        "cargo runs the compiler through the program it names",
    ),
    var(
        "RUSTC_WORKSPACE_WRAPPER",
        "cargo runs the compiler through the program it names",
    ),
    var("RUSTFLAGS", "rustc takes options (-C linker=) from it"),
    var("RUSTDOCFLAGS", "rustdoc takes options from it"),
    var(
        "CARGO_ENCODED_RUSTFLAGS",
        "rustc takes options (-C linker=) from it",
    ),
    var(
        "CARGO_HOME",
        "cargo reads its configuration (aliases, runners) there",
    ),
    group(
        "CARGO_BUILD_",
        "cargo takes its build configuration (rustc-wrapper) from it",
    ),
    group(
        "CARGO_TARGET_",
        "cargo takes a target's runner and linker from it",
    ),
    var("TAR_OPTIONS", "tar takes options (--to-command) from it"),
    var("ZIPOPT", "zip takes options (-TT) from it"),
    var("RSYNC_RSH", RUNS),
    var("RSYNC_CONNECT_PROG", RUNS),
    var(
        "GROFF_BIN_PATH",
        "groff runs its programs from the folders it names",
    ),
    var(
        "KUBECONFIG",
        "kubectl reads the configuration (exec plugins) it names",
    ),
    var("CURL_HOME", "curl reads its .curlrc there"),
    var(
        "WGETRC",
        "wget reads the configuration (use_askpass) it names",
    ),
];

/// The table's entry for variable `name`, if it has one.
pub fn var_of(name: &str) -> Option<&'static Var> {
    VARS.iter().find(|v| {
        if v.prefix {
            name.starts_with(v.name)
        } else {
            name == v.name
        }
    })
}

/// Whether `name` acts before the command starts ([`Var::startup`]).
pub fn steers_startup(name: &str) -> bool {
    var_of(name).is_some_and(|v| v.startup)
}

/// A form of the table found in one command.
///
/// A rule *names* a form when the rule, read as a command line itself
/// (`git -c core.pager=* log` read as the words `git`, `-c`,
/// `core.pager=*`, `log`), holds a form with the same `key` whose value
/// matches the command's `value` as a glob. So `proc:spawn:git -c
/// core.pager=less *` grants `git -c core.pager=less log` but neither `git
/// -c core.pager='sh -c x' log` nor a second `-c core.fsmonitor=x` hidden
/// in its `*`: each form of the command must be named on its own.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Form {
    /// What the form is, as a rule spells it: `PAGER=`, `-c core.pager`,
    /// `--upload-pack`, `bisect run`, `e` (sed's command), `system()`.
    pub key: String,
    /// What it names: the command, file or key's value given; empty for a
    /// form that names nothing (`-delete`).
    pub value: String,
    /// What it makes the program do, for the reason a refusal gives.
    pub why: &'static str,
    /// Found only from what the command leaves out (a program read on
    /// standard input because none was given): a rule cannot spell it, so
    /// only an exact rule (or one granting every command) grants it.
    pub implied: bool,
    /// An assignment to a variable of [`VARS`]: no wildcard grants it.
    pub variable: bool,
}

/// Which side of a check a command is on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    /// The command being judged.
    Command,
    /// A rule's resource read as a command: only what it spells counts, so
    /// nothing is inferred from what it leaves out.
    Rule,
}

/// The forms of the table in one command: its assignments (`env`, as
/// `NAME=value`), then its program's forms. `program` is the program's
/// file name (the kernel asks for the name as written and for the file it
/// resolves to); `args` its arguments; `fed`, whether its standard input
/// carries data (see [`shell::Command::fed`]).
pub fn forms(program: &str, args: &[String], env: &[String], fed: bool, side: Side) -> Vec<Form> {
    let mut out = Vec::new();
    for assignment in env {
        let (name, value) = assignment.split_once('=').unwrap_or((assignment, ""));
        if let Some(v) = var_of(name) {
            out.push(Form {
                key: format!("{name}="),
                value: value.to_string(),
                why: v.why,
                implied: false,
                variable: true,
            });
        }
    }
    let mut f = Found {
        out: &mut out,
        side,
        fed: fed || side == Side::Rule,
    };
    program_forms(&family(program), args, &mut f);
    out
}

/// Where forms are collected.
struct Found<'a> {
    out: &'a mut Vec<Form>,
    side: Side,
    fed: bool,
}

impl Found<'_> {
    fn push(&mut self, key: impl Into<String>, value: impl Into<String>, why: &'static str) {
        self.out.push(Form {
            key: key.into(),
            value: value.into(),
            why,
            implied: false,
            variable: false,
        });
    }

    /// A program that runs commands it reads on standard input: a form
    /// when something feeds it, and only on the command's side.
    fn stdin(&mut self, why: &'static str) {
        if self.fed && self.side == Side::Command {
            self.out.push(Form {
                key: "stdin".into(),
                value: String::new(),
                why,
                implied: true,
                variable: false,
            });
        }
    }
}

/// The name a program's forms are listed under: `python3.11` is `python`,
/// `vim.basic` is `vim`, `gawk` is `awk`.
fn family(program: &str) -> String {
    let name = program.rsplit('/').next().unwrap_or(program);
    let stem = name.trim_end_matches(|c: char| c.is_ascii_digit() || c == '.');
    let stem = if stem.is_empty() { name } else { stem };
    match stem {
        "python" | "pypy" => "python".into(),
        "perl" => "perl".into(),
        "ruby" => "ruby".into(),
        "node" | "nodejs" => "node".into(),
        "php" | "php-cli" => "php".into(),
        "lua" | "luajit" => "lua".into(),
        "tclsh" | "wish" => "tclsh".into(),
        "awk" | "gawk" | "mawk" | "nawk" | "original-awk" => "awk".into(),
        "sed" | "gsed" => "sed".into(),
        "make" | "gmake" => "make".into(),
        "tar" | "gtar" => "tar".into(),
        "gcc" | "g++" | "cc" | "c++" | "clang" | "clang++" | "gcc-" | "g++-" | "clang-" => {
            "gcc".into()
        }
        "nc" | "netcat" | "ncat" | "nc.traditional" | "nc.openbsd" => "nc".into(),
        "pip" => "pip".into(),
        "sqlite" => "sqlite3".into(),
        "groff" | "nroff" | "troff" | "pic" => "groff".into(),
        "npm" | "pnpm" | "yarn" => "npm".into(),
        "emacs" | "emacs-nox" | "emacs-gtk" => "emacs".into(),
        _ if name.starts_with("vim.") || name.starts_with("gcc-") || name.starts_with("g++-") => {
            name.split(['.', '-'])
                .next()
                .unwrap_or(name)
                .replace("g++", "gcc")
        }
        _ => name.into(),
    }
}

fn program_forms(family: &str, args: &[String], f: &mut Found) {
    match family {
        "git" => git(args, f),
        "find" => find(args, f),
        "tar" => tar(args, f),
        "rsync" => rsync(args, f),
        "ssh" | "scp" | "sftp" | "slogin" => ssh(family, args, f),
        "sed" => sed(args, f),
        "awk" => awk(args, f),
        "make" => make(args, f),
        "less" => less(args, f),
        "man" => man(args, f),
        "vi" | "vim" | "nvim" | "ex" | "view" | "rview" | "rvim" | "vimdiff" | "gvim" | "evim"
        | "gview" => vim(family, args, f),
        "python" => python(args, f),
        "perl" => perl(args, f),
        "ruby" | "irb" => ruby(family, args, f),
        "node" => node(args, f),
        "php" => php(args, f),
        "lua" => lua(args, f),
        "tclsh" | "expect" => tcl(family, args, f),
        "emacs" => emacs(args, f),
        "gdb" => gdb(args, f),
        "sqlite3" => sqlite3(args, f),
        "ed" | "ftp" | "tnftp" | "cpan" | "debugfs" | "psql" | "mysql" | "mariadb" | "jshell"
        | "ghci" | "guile" | "octave" | "clisp" | "smbclient" | "pry" | "dc" | "R" | "gnuplot"
        | "lftp" | "tasksh" => repl(family, args, f),
        "sh" | "bash" | "dash" | "zsh" | "ksh" | "mksh" | "ash" | "yash" | "posh" | "fish" => {
            shell(args, f)
        }
        "zip" => zip(args, f),
        "socat" => socat(args, f),
        "nc" => nc(args, f),
        "cargo" => cargo(args, f),
        "rustc" => rustc(args, f),
        "gcc" => gcc(args, f),
        "npm" => npm(args, f),
        "pip" => pip(args, f),
        "strace" => strace(args, f),
        "split" => opts(args, &[("--filter", true)], RUNS_VALUE, f),
        "sort" => opts(args, &[("--compress-program", true)], RUNS_VALUE, f),
        "tmux" => tmux(args, f),
        "wget" => wget(args, f),
        "apt" | "apt-get" => apt(args, f),
        "groff" if shorts(args, "").iter().any(|(c, _)| *c == 'U') => {
            f.push("-U", "", "groff runs shell commands the document holds")
        }
        "zic" => {
            for (c, v) in shorts(args, "dlLpty") {
                if c == 'y' {
                    f.push("-y", v, RUNS_VALUE);
                }
            }
        }
        "jrunscript" | "Rscript" => {
            for v in single_dash(args, &["-e"]) {
                f.push("-e", v, CODE);
            }
        }
        _ => {}
    }
}

const RUNS_VALUE: &str = "the program runs the command it is given";
const CODE: &str = "the interpreter runs the code given in the line";
const READS_CONFIG: &str =
    "the program reads configuration (which can run commands) from the file it names";
const WRITES: &str = "the program writes the file it names";
const STDIN: &str =
    "the program runs the commands it reads on standard input, and something feeds it";

// ---- option scanning --------------------------------------------------------

/// The long options `--NAME[=VALUE]` of `args` (up to `--`) that are one of
/// `names` or a prefix of one (GNU getopt takes unambiguous prefixes) of
/// at least three letters, with their value: after `=`, or the next word
/// when the option takes one (`true` in `names`). Each is returned under
/// its full name.
fn longs<'a>(args: &'a [String], names: &[(&'static str, bool)]) -> Vec<(&'static str, &'a str)> {
    let mut out = Vec::new();
    let mut i = 0;
    while let Some(a) = args.get(i) {
        i += 1;
        if a == "--" {
            break;
        }
        let Some(body) = a.strip_prefix("--") else {
            continue;
        };
        let (name, value) = match body.split_once('=') {
            Some((n, v)) => (n, Some(v)),
            None => (body, None),
        };
        let hit = names
            .iter()
            .find(|(full, _)| {
                let full = full.trim_start_matches('-');
                name == full || (name.len() >= 3 && full.starts_with(name))
            })
            .copied();
        if let Some((full, takes)) = hit {
            let value = match value {
                Some(v) => v,
                None if takes => next_value(args, &mut i),
                None => "",
            };
            out.push((full, value));
        }
    }
    out
}

/// The word after an option that takes one, as its value. A word that
/// looks like an option is still read as options too, so a grammar that
/// wrongly says an option takes a value cannot hide the next one: what is
/// looked for here must be found, even at the cost of a false alarm.
fn next_value<'a>(args: &'a [String], i: &mut usize) -> &'a str {
    let value = args.get(*i).map_or("", String::as_str);
    if !value.starts_with('-') || value.len() < 2 {
        *i += 1;
    }
    value
}

/// The short options of `args` (up to `--`), each with its value when it is
/// one of `with_arg` (attached, or the next word: see [`next_value`]). A
/// cluster such as `-avze` yields each letter.
fn shorts<'a>(args: &'a [String], with_arg: &str) -> Vec<(char, &'a str)> {
    let mut out = Vec::new();
    let mut i = 0;
    while let Some(a) = args.get(i) {
        i += 1;
        if a == "--" {
            break;
        }
        if a.starts_with("--") || !a.starts_with('-') || a.len() < 2 {
            continue;
        }
        for (at, c) in a[1..].char_indices() {
            if with_arg.contains(c) {
                let rest = &a[1 + at + c.len_utf8()..];
                let value = if rest.is_empty() {
                    next_value(args, &mut i)
                } else {
                    rest
                };
                out.push((c, value));
                break;
            }
            out.push((c, ""));
        }
    }
    out
}

/// Words that are exactly one of `names` (options written with one dash,
/// `-ex`, `-cmd`), with the word after each; also `NAME=VALUE` and, for a
/// name that starts with one dash, its two-dash spelling.
fn single_dash<'a>(args: &'a [String], names: &[&str]) -> Vec<&'a str> {
    let mut out = Vec::new();
    let mut i = 0;
    while let Some(a) = args.get(i) {
        i += 1;
        let (word, value) = match a.split_once('=') {
            Some((w, v)) => (w, Some(v)),
            None => (a.as_str(), None),
        };
        let bare = word.trim_start_matches('-');
        let hit = names
            .iter()
            .any(|n| *n == word || (word.starts_with("--") && n.trim_start_matches('-') == bare));
        if hit {
            match value {
                Some(v) => out.push(v),
                None => {
                    out.push(args.get(i).map_or("", String::as_str));
                    i += 1;
                }
            }
        }
    }
    out
}

/// Long options of `names` found in `args`, each a form under its own name.
fn opts(args: &[String], names: &[(&'static str, bool)], why: &'static str, f: &mut Found) {
    for (name, value) in longs(args, names) {
        f.push(name, value, why);
    }
}

/// The words of `args` that are not options, up to the first when
/// `first_only`; `with_arg` and `long_with_arg` say which options take the
/// next word. A `--` ends the options.
fn operands<'a>(
    args: &'a [String],
    with_arg: &str,
    long_with_arg: &[&str],
    first_only: bool,
) -> Vec<&'a str> {
    let mut out = Vec::new();
    let mut i = 0;
    let mut options = true;
    while let Some(a) = args.get(i) {
        i += 1;
        if options && a == "--" {
            options = false;
            continue;
        }
        if options && a.starts_with("--") && a.len() > 2 {
            let name = a[2..].split('=').next().unwrap_or("");
            if !a.contains('=')
                && long_with_arg
                    .iter()
                    .any(|l| l.trim_start_matches('-') == name)
            {
                i += 1;
            }
            continue;
        }
        if options && a.starts_with('-') && a.len() > 1 {
            let cluster = &a[1..];
            if let Some(at) = cluster.find(|c| with_arg.contains(c)) {
                if at + 1 == cluster.len() {
                    i += 1;
                }
            }
            continue;
        }
        out.push(a.as_str());
        if first_only {
            break;
        }
    }
    out
}

// ---- git --------------------------------------------------------------------

/// git configuration keys that make git run a program or read another
/// file, as `(section, name)`: any subsection; `*` for any name.
const GIT_KEYS: &[(&str, &str)] = &[
    ("alias", "*"),
    ("core", "fsmonitor"),
    ("core", "sshcommand"),
    ("core", "pager"),
    ("core", "editor"),
    ("core", "askpass"),
    ("core", "hookspath"),
    ("core", "gitproxy"),
    ("core", "alternaterefscommand"),
    ("core", "worktree"),
    ("core", "attributesfile"),
    ("pager", "*"),
    ("diff", "external"),
    ("diff", "textconv"),
    ("diff", "command"),
    ("difftool", "cmd"),
    ("merge", "driver"),
    ("mergetool", "cmd"),
    ("filter", "*"),
    ("credential", "helper"),
    ("gpg", "program"),
    ("sequence", "editor"),
    ("interactive", "difffilter"),
    ("uploadpack", "packobjectshook"),
    ("remote", "uploadpack"),
    ("remote", "receivepack"),
    ("protocol", "allow"),
    ("include", "path"),
    ("includeif", "*"),
    ("init", "templatedir"),
    ("web", "browser"),
    ("browser", "cmd"),
    ("browser", "path"),
    ("man", "cmd"),
    ("man", "path"),
    ("sendemail", "smtpserver"),
    ("sendemail", "tocmd"),
    ("sendemail", "cccmd"),
    ("sendemail", "headercmd"),
    ("sendemail", "sendmailcmd"),
    ("hook", "command"),
    ("submodule", "update"),
    ("trailer", "command"),
    ("trailer", "cmd"),
    ("tar", "command"),
    ("imap", "tunnel"),
    ("safe", "directory"),
    ("ssh", "variant"),
];

/// `key` (as written, any case) when it is one of [`GIT_KEYS`], lowercased.
fn git_key(key: &str) -> Option<String> {
    let lower = key.to_ascii_lowercase();
    let section = lower.split('.').next()?;
    let name = lower.rsplit('.').next()?;
    if !lower.contains('.') {
        return None;
    }
    GIT_KEYS
        .iter()
        .any(|(s, n)| *s == section && (*n == "*" || *n == name))
        .then_some(lower)
}

const GIT_RUNS: &str = "git runs the command it sets, or reads the file it names";

/// git's global options that take the next word.
const GIT_GLOBAL_ARG: &[&str] = &[
    "-C",
    "-c",
    "--git-dir",
    "--work-tree",
    "--namespace",
    "--config-env",
    "--super-prefix",
    "--attr-source",
    "--list-cmds",
];

fn git(args: &[String], f: &mut Found) {
    // Global options, up to the subcommand.
    let mut i = 0;
    while let Some(a) = args.get(i) {
        let (name, attached) = match a.split_once('=') {
            Some((n, v)) if n.starts_with("--") => (n, Some(v)),
            _ => (a.as_str(), None),
        };
        if !name.starts_with('-') {
            break;
        }
        i += 1;
        let takes = GIT_GLOBAL_ARG.contains(&name) && attached.is_none();
        let value = match attached {
            Some(v) => v,
            None if takes => {
                i += 1;
                args.get(i - 1).map_or("", String::as_str)
            }
            None => "",
        };
        match name {
            "-c" => git_config_pair(value, "-c", f),
            _ if name.starts_with("-c") && name.len() > 2 => git_config_pair(&name[2..], "-c", f),
            "--config-env" => {
                let key = value.split('=').next().unwrap_or(value);
                if let Some(key) = git_key(key) {
                    f.push(format!("--config-env {key}"), value, GIT_RUNS);
                }
            }
            "--exec-path" if attached.is_some() => f.push(
                "--exec-path",
                value,
                "git runs its commands from the folder it names",
            ),
            "--git-dir" | "--work-tree" => f.push(
                name,
                value,
                "git uses another repository, with its configuration and hooks",
            ),
            _ => {}
        }
    }
    let Some(sub) = args.get(i) else { return };
    let rest = &args[i + 1..];
    for a in rest {
        if a.to_ascii_lowercase().starts_with("ext::") {
            f.push(
                "ext::",
                a.as_str(),
                "git runs the command the ext:: URL holds",
            );
        }
    }
    opts(
        rest,
        &[
            ("--upload-pack", true),
            ("--receive-pack", true),
            ("--exec", true),
        ],
        "git runs the program it names on the other side, here",
        f,
    );
    let words: Vec<&str> = operands(rest, "", &[], false);
    match sub.as_str() {
        "config" => git_config_command(rest, f),
        "clone" => {
            for (c, v) in shorts(rest, "ubcjo") {
                match c {
                    'u' => f.push("--upload-pack", v, "git runs the program it names"),
                    'c' => git_config_pair(v, "-c", f),
                    _ => {}
                }
            }
            for (_, v) in longs(rest, &[("--config", true)]) {
                git_config_pair(v, "-c", f);
            }
            opts(
                rest,
                &[("--template", true)],
                "git copies hooks from the folder it names",
                f,
            );
        }
        "init" => opts(
            rest,
            &[("--template", true)],
            "git copies hooks from the folder it names",
            f,
        ),
        "grep" => {
            // `-O[PAGER]`: the value, if any, is attached.
            for a in rest.iter().take_while(|a| *a != "--") {
                if let Some(v) = a.strip_prefix("-O") {
                    f.push("--open-files-in-pager", v, RUNS_VALUE);
                }
            }
            opts(rest, &[("--open-files-in-pager", false)], RUNS_VALUE, f);
        }
        "difftool" => {
            for (c, v) in shorts(rest, "xt") {
                if c == 'x' {
                    f.push("--extcmd", v, RUNS_VALUE);
                }
            }
            opts(rest, &[("--extcmd", true)], RUNS_VALUE, f);
        }
        "rebase" => {
            for (c, v) in shorts(rest, "xsXC") {
                if c == 'x' {
                    f.push("--exec", v, RUNS_VALUE);
                }
            }
        }
        "bisect" if words.first() == Some(&"run") => {
            f.push("bisect run", words[1..].join(" "), RUNS_VALUE)
        }
        "submodule" if words.first() == Some(&"foreach") => {
            f.push("submodule foreach", words[1..].join(" "), RUNS_VALUE)
        }
        "filter-branch" => f.push(
            "filter-branch",
            rest.join(" "),
            "git runs the filters it is given",
        ),
        "send-email" => {
            for (name, v) in longs(
                rest,
                &[
                    ("--smtp-server", true),
                    ("--to-cmd", true),
                    ("--cc-cmd", true),
                    ("--header-cmd", true),
                    ("--sendmail-cmd", true),
                ],
            ) {
                if name != "--smtp-server"
                    || v.starts_with('/')
                    || v.starts_with('.')
                    || f.side == Side::Rule
                {
                    f.push(name, v, RUNS_VALUE);
                }
            }
        }
        "instaweb" => f.push(
            "instaweb",
            rest.join(" "),
            "git runs a web server and a browser",
        ),
        "daemon" => opts(rest, &[("--access-hook", true)], RUNS_VALUE, f),
        "hook" if words.first() == Some(&"run") => f.push(
            "hook run",
            words[1..].join(" "),
            "git runs the hook it names",
        ),
        "remote-ext" => f.push("remote-ext", rest.join(" "), RUNS_VALUE),
        _ => {}
    }
}

/// `KEY[=VALUE]` given to `-c` (or clone's `--config`): a form when KEY is
/// one of [`GIT_KEYS`].
fn git_config_pair(pair: &str, option: &str, f: &mut Found) {
    let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
    if let Some(key) = git_key(key) {
        f.push(format!("{option} {key}"), value, GIT_RUNS);
    }
}

/// `git config [options] KEY VALUE` or `git config set KEY VALUE` setting
/// one of [`GIT_KEYS`] (in any file: a later `include.path` or `-C` would
/// read it).
fn git_config_command(rest: &[String], f: &mut Found) {
    let reading = rest.iter().any(|a| {
        a.starts_with("--get")
            || a.starts_with("--unset")
            || matches!(
                a.as_str(),
                "-l" | "--list" | "--rename-section" | "--remove-section" | "-e" | "--edit"
            )
    });
    let words = operands(
        rest,
        "ft",
        &[
            "--file",
            "--blob",
            "--type",
            "--default",
            "--comment",
            "--value",
        ],
        false,
    );
    let (key, value) = match words.as_slice() {
        ["set", key, value, ..] => (*key, *value),
        [first, ..]
            if matches!(
                *first,
                "get"
                    | "unset"
                    | "list"
                    | "edit"
                    | "rename-section"
                    | "remove-section"
                    | "get-color"
                    | "get-colorbool"
            ) =>
        {
            return
        }
        [key, value, ..] if !reading => (*key, *value),
        _ => return,
    };
    if let Some(key) = git_key(key) {
        f.push(format!("config {key}"), value, GIT_RUNS);
    }
}

// ---- find, tar, rsync, ssh ----------------------------------------------------

fn find(args: &[String], f: &mut Found) {
    let mut i = 0;
    while let Some(a) = args.get(i) {
        i += 1;
        match a.as_str() {
            // What -exec runs is judged on its own (unwrapped): skip it.
            "-exec" | "-execdir" | "-ok" | "-okdir" => {
                while args.get(i).is_some_and(|w| w != ";" && w != "+") {
                    i += 1;
                }
                i += 1;
            }
            "-delete" => f.push("-delete", "", "find deletes every file it matches"),
            "-fprint" | "-fprint0" | "-fprintf" | "-fls" => {
                f.push(a.as_str(), args.get(i).map_or("", String::as_str), WRITES);
                i += 1;
            }
            _ => {}
        }
    }
}

const TAR_RUNS: &str = "tar runs the program it names";

fn tar(args: &[String], f: &mut Found) {
    const WITH_ARG: &str = "bCfFgHIKLNTVX";
    // The old style: `tar xIf prog archive`, letters first, their values
    // after in order.
    if let Some(first) = args.first().filter(|a| !a.starts_with('-')) {
        let mut next = 1;
        for c in first.chars() {
            if WITH_ARG.contains(c) {
                let value = args.get(next).map_or("", String::as_str);
                next += 1;
                match c {
                    'I' => f.push("--use-compress-program", value, TAR_RUNS),
                    'F' => f.push("--info-script", value, TAR_RUNS),
                    _ => {}
                }
            }
        }
    }
    for (c, v) in shorts(args, WITH_ARG) {
        match c {
            'I' => f.push("--use-compress-program", v, TAR_RUNS),
            'F' => f.push("--info-script", v, TAR_RUNS),
            _ => {}
        }
    }
    for (name, v) in longs(
        args,
        &[
            ("--to-command", true),
            ("--use-compress-program", true),
            ("--checkpoint-action", true),
            ("--info-script", true),
            ("--new-volume-script", true),
            ("--rsh-command", true),
            ("--rmt-command", true),
        ],
    ) {
        match name {
            // Only the exec= action runs a command (a rule's glob may hold it).
            "--checkpoint-action" if !v.contains("exec") && f.side == Side::Command => {}
            "--new-volume-script" => f.push("--info-script", v, TAR_RUNS),
            _ => f.push(name, v, TAR_RUNS),
        }
    }
}

fn rsync(args: &[String], f: &mut Found) {
    for (c, v) in shorts(args, "eBfTM@") {
        if c == 'e' {
            f.push("--rsh", v, "rsync runs the remote shell it names");
        }
    }
    opts(
        args,
        &[("--rsh", true), ("--rsync-path", true)],
        "rsync runs the program it names",
        f,
    );
}

/// ssh options (`-o NAME=VALUE`) that run a command, load code or read
/// another configuration.
const SSH_OPTIONS: &[&str] = &[
    "proxycommand",
    "localcommand",
    "permitlocalcommand",
    "knownhostscommand",
    "remotecommand",
    "include",
    "pkcs11provider",
    "securitykeyprovider",
];

fn ssh(program: &str, args: &[String], f: &mut Found) {
    let with_arg = match program {
        "scp" => "cDFiJloPSX",
        "sftp" => "BbcDFiJloPRSsX",
        _ => "BbcDEeFIiJLlmOoPpQRSWw",
    };
    for (c, v) in shorts(args, with_arg) {
        match c {
            'o' => {
                let name = v
                    .split(['=', ' ', '\t'])
                    .next()
                    .unwrap_or(v)
                    .to_ascii_lowercase();
                if SSH_OPTIONS.contains(&name.as_str()) {
                    let value = v[name.len()..].trim_start_matches(['=', ' ', '\t']);
                    f.push(
                        format!("-o {name}"),
                        value,
                        "ssh runs the command (or loads the library, or reads the file) the option names",
                    );
                }
            }
            'F' => f.push("-F", v, READS_CONFIG),
            'I' if program == "ssh" => f.push("-I", v, "ssh loads the library it names"),
            'S' if program != "ssh" => {
                f.push("-S", v, "the program runs the program it names to connect")
            }
            'D' if program != "ssh" => f.push(
                "-D",
                v,
                "the program runs the server program it names, here",
            ),
            'b' if program == "sftp" => f.push(
                "-b",
                v,
                "sftp runs the batch file's commands, `!` commands included",
            ),
            's' if program == "sftp" && v.contains('/') => {
                f.push("-s", v, "sftp runs the server program it names")
            }
            _ => {}
        }
    }
    if program == "sftp" && !shorts(args, with_arg).iter().any(|(c, _)| *c == 'b') {
        f.stdin(STDIN);
    }
    // The remote command is unwrapped (judged as a command here, since the
    // host may be this machine); without one, the remote shell runs what
    // standard input holds.
    let no_command = operands(args, with_arg, &[], false).len() <= 1;
    if program == "ssh" && no_command && !args.iter().any(|a| a == "-N" || a.starts_with("-W")) {
        f.stdin("ssh starts a shell on the host (which may be this machine) that runs what it reads on standard input");
    }
}

// ---- sed, awk, make ---------------------------------------------------------

fn sed(args: &[String], f: &mut Found) {
    if args.iter().any(|a| a == "--sandbox") {
        return;
    }
    let mut scripts: Vec<&str> = shorts(args, "efl")
        .into_iter()
        .filter(|(c, _)| *c == 'e')
        .map(|(_, v)| v)
        .collect();
    scripts.extend(
        longs(args, &[("--expression", true)])
            .into_iter()
            .map(|(_, v)| v),
    );
    let from_file = shorts(args, "efl").iter().any(|(c, _)| *c == 'f')
        || !longs(args, &[("--file", true)]).is_empty();
    if scripts.is_empty() && !from_file {
        scripts.extend(operands(
            args,
            "efl",
            &["--expression", "--file", "--line-length"],
            true,
        ));
    }
    for script in scripts {
        sed_script(script, f);
    }
}

/// The `e`, `w` and `W` commands and the `e` and `w` flags of `s` in a sed
/// script (GNU syntax; what it cannot read it skips to the next command).
fn sed_script(script: &str, f: &mut Found) {
    let s: Vec<char> = script.chars().collect();
    let mut i = 0;
    let rest_of_line = |i: &mut usize| -> String {
        let start = *i;
        while *i < s.len() && s[*i] != '\n' {
            *i += 1;
        }
        s[start..*i].iter().collect::<String>().trim().to_string()
    };
    // A label or number: up to `;`, `}` or the end of the line.
    let argument = |i: &mut usize| {
        while *i < s.len() && !matches!(s[*i], ';' | '}' | '\n') {
            *i += 1;
        }
    };
    // Skips a delimited part (`/re/`, `s/a/b/`), from after the opening
    // delimiter; true if it closed.
    let delimited = |i: &mut usize, d: char| -> bool {
        while *i < s.len() {
            if s[*i] == '\\' {
                *i += 2;
                continue;
            }
            if s[*i] == d {
                *i += 1;
                return true;
            }
            *i += 1;
        }
        false
    };
    while i < s.len() {
        let c = s[i];
        // Addresses, separators, blocks and negation.
        if c.is_whitespace()
            || matches!(c, ';' | '{' | '}' | '!' | ',' | '$' | '~' | '+')
            || c.is_ascii_digit()
        {
            i += 1;
            continue;
        }
        if c == '/' {
            i += 1;
            delimited(&mut i, '/');
            continue;
        }
        if c == '\\' {
            if let Some(&d) = s.get(i + 1) {
                i += 2;
                delimited(&mut i, d);
            } else {
                i += 1;
            }
            continue;
        }
        i += 1;
        match c {
            'e' => f.push(
                "e",
                rest_of_line(&mut i),
                "sed runs the command given to its `e`",
            ),
            'w' => f.push("w", rest_of_line(&mut i), WRITES),
            'W' => f.push("W", rest_of_line(&mut i), WRITES),
            // A file name or text runs to the end of the line.
            'r' | 'R' | 'a' | 'i' | 'c' | '#' => {
                rest_of_line(&mut i);
            }
            ':' | 'b' | 't' | 'T' | 'l' | 'L' | 'q' | 'Q' | 'v' => argument(&mut i),
            's' | 'y' => {
                let Some(&d) = s.get(i) else { break };
                i += 1;
                if !delimited(&mut i, d) || !delimited(&mut i, d) {
                    break;
                }
                if c == 's' {
                    // Flags: letters and digits, then maybe `w FILE`.
                    while i < s.len() && (s[i].is_ascii_alphanumeric()) {
                        match s[i] {
                            'e' => f.push("s///e", "", "sed runs the pattern space as a command"),
                            'w' => {
                                i += 1;
                                f.push("s///w", rest_of_line(&mut i), WRITES);
                                break;
                            }
                            _ => {}
                        }
                        i += 1;
                    }
                }
            }
            _ => {}
        }
    }
}

fn awk(args: &[String], f: &mut Found) {
    if args.iter().any(|a| a == "--sandbox" || a == "-S") {
        return;
    }
    const WITH_ARG: &str = "fvFeilEWo";
    const LONG: &[&str] = &[
        "--file",
        "--assign",
        "--field-separator",
        "--source",
        "--include",
        "--load",
        "--exec",
    ];
    let mut programs: Vec<&str> = Vec::new();
    let mut from_file = false;
    for (c, v) in shorts(args, WITH_ARG) {
        match c {
            'e' => programs.push(v),
            'f' | 'E' | 'i' => from_file = true,
            'l' => f.push("--load", v, "awk loads the extension library it names"),
            _ => {}
        }
    }
    for (name, v) in longs(
        args,
        &[
            ("--source", true),
            ("--file", true),
            ("--exec", true),
            ("--include", true),
            ("--load", true),
        ],
    ) {
        match name {
            "--source" => programs.push(v),
            "--load" => f.push("--load", v, "awk loads the extension library it names"),
            _ => from_file = true,
        }
    }
    if programs.is_empty() && !from_file {
        programs.extend(operands(args, WITH_ARG, LONG, true));
    }
    for program in programs {
        awk_program(program, f);
    }
}

/// What an awk program does beyond reading and printing: `system()`,
/// pipes, `print >`, network files, `@load`.
fn awk_program(program: &str, f: &mut Found) {
    let mut code = String::new();
    let mut strings = String::new();
    // Split strings (and regexes) out, so `"a|b"` is not a pipe.
    let mut chars = program.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '"' => {
                code.push('"');
                while let Some(c) = chars.next() {
                    match c {
                        '\\' => {
                            chars.next();
                        }
                        '"' => break,
                        _ => strings.push(c),
                    }
                }
                strings.push(' ');
            }
            '#' => {
                for c in chars.by_ref() {
                    if c == '\n' {
                        break;
                    }
                }
                code.push('\n');
            }
            _ => code.push(c),
        }
    }
    let has_word = |w: &str| {
        code.match_indices(w).any(|(i, _)| {
            let before = code[..i].chars().last();
            let after = code[i + w.len()..].trim_start().chars().next();
            !before.is_some_and(|b| b.is_alphanumeric() || b == '_') && after == Some('(')
        })
    };
    if has_word("system") {
        f.push("system()", "", "awk runs the command given to system()");
    }
    let pipes = code.replace("||", "  ");
    if pipes.contains('|') {
        f.push("|", "", "awk runs the command it pipes to or from");
    }
    // `print ... > file`: a `>` at depth 0 of a print statement.
    for (i, _) in code.match_indices("print") {
        let mut depth = 0i32;
        for c in code[i..].chars() {
            match c {
                '(' => depth += 1,
                ')' => depth -= 1,
                ';' | '}' | '\n' => break,
                '>' if depth <= 0 => {
                    f.push(">", "", WRITES);
                    break;
                }
                _ => {}
            }
        }
    }
    if strings.contains("/inet") {
        f.push("/inet/", "", "awk opens the network connection it names");
    }
    if code.contains("@load") {
        f.push("@load", "", "awk loads the extension library it names");
    }
}

fn make(args: &[String], f: &mut Found) {
    for (c, v) in shorts(args, "CfIoWE") {
        match c {
            'E' => f.push("--eval", v, "make runs the makefile text given"),
            'f' if is_stdin_file(v) => {
                f.push("--file", v, "make reads a makefile from standard input")
            }
            _ => {}
        }
    }
    for (name, v) in longs(
        args,
        &[("--eval", true), ("--file", true), ("--makefile", true)],
    ) {
        match name {
            "--eval" => f.push("--eval", v, "make runs the makefile text given"),
            _ if is_stdin_file(v) => {
                f.push("--file", v, "make reads a makefile from standard input")
            }
            _ => {}
        }
    }
    for a in operands(
        args,
        "CfIoWE",
        &[
            "--file",
            "--makefile",
            "--directory",
            "--include-dir",
            "--eval",
        ],
        false,
    ) {
        let name = a.split('=').next().unwrap_or(a);
        if a.contains('=')
            && matches!(
                name,
                "SHELL" | ".SHELLFLAGS" | "MAKESHELL" | "MAKEFLAGS" | "MAKEFILES"
            )
        {
            f.push(
                format!("{name}="),
                &a[name.len() + 1..],
                "make runs its recipes with it",
            );
        }
    }
}

fn is_stdin_file(path: &str) -> bool {
    path == "-" || path.starts_with("/dev/") || path.starts_with("/proc/")
}

// ---- pagers, editors --------------------------------------------------------

fn less(args: &[String], f: &mut Found) {
    for a in args {
        if let Some(command) = a.strip_prefix('+') {
            f.push("+", command, "less runs the command it is given at start");
        }
    }
    for (c, v) in shorts(args, "bhjkoOpPtTxyz#D") {
        match c {
            'o' | 'O' => f.push("--log-file", v, WRITES),
            'k' => f.push("--lesskey-file", v, READS_CONFIG),
            _ => {}
        }
    }
    for (name, v) in longs(
        args,
        &[
            ("--log-file", true),
            ("--LOG-FILE", true),
            ("--lesskey-file", true),
            ("--lesskey-src", true),
        ],
    ) {
        match name {
            "--log-file" | "--LOG-FILE" => f.push("--log-file", v, WRITES),
            _ => f.push("--lesskey-file", v, READS_CONFIG),
        }
    }
}

fn man(args: &[String], f: &mut Found) {
    for a in args {
        if let Some(browser) = a.strip_prefix("-H") {
            f.push("--html", browser, "man runs the browser it names");
        }
    }
    for (c, v) in shorts(args, "CRLmMpPrSseEk") {
        match c {
            'P' => f.push("--pager", v, RUNS_VALUE),
            'C' => f.push("--config-file", v, READS_CONFIG),
            _ => {}
        }
    }
    for (name, v) in longs(
        args,
        &[
            ("--html", false),
            ("--pager", true),
            ("--config-file", true),
        ],
    ) {
        let why = match name {
            "--html" => "man runs the browser it names",
            "--pager" => RUNS_VALUE,
            _ => READS_CONFIG,
        };
        f.push(name, v, why);
    }
}

const VIM_RUNS: &str = "vim runs the editor commands given (`:!` runs a shell command)";

fn vim(program: &str, args: &[String], f: &mut Found) {
    let ex_mode = program == "ex"
        || args.iter().any(|a| {
            a.starts_with('-')
                && !a.starts_with("--")
                && (a.contains('e') || a.contains('E'))
                && a.chars().skip(1).all(|c| c.is_ascii_alphabetic())
        });
    let with_arg = if ex_mode {
        "cSuUwWTitqr"
    } else {
        "cSuUswWTitqr"
    };
    for a in args {
        if let Some(command) = a.strip_prefix('+') {
            if !command.is_empty() && !command.chars().all(|c| c.is_ascii_digit()) {
                f.push("-c", command, VIM_RUNS);
            }
        }
    }
    for (c, v) in shorts(args, with_arg) {
        match c {
            'c' => f.push("-c", v, VIM_RUNS),
            'S' => f.push("-S", v, "vim runs the script it names"),
            'u' | 'U' if !matches!(v, "NONE" | "NORC" | "DEFAULTS" | "NOPLUGIN") => {
                f.push(format!("-{c}"), v, "vim runs the vimrc it names")
            }
            's' => f.push("-s", v, "vim runs the keystrokes of the file it names"),
            _ => {}
        }
    }
    for (name, v) in longs(
        args,
        &[
            ("--cmd", true),
            ("--remote-send", true),
            ("--remote-expr", true),
        ],
    ) {
        f.push(name, v, VIM_RUNS);
    }
    f.stdin(STDIN);
}

// ---- interpreters -----------------------------------------------------------

/// For an interpreter whose program is a file operand, code in an option
/// (`-c`), or standard input: the options before the program, and whether a
/// program file or `-` was given. `code` holds the letters that take code,
/// `with_arg` the other letters that take a value.
fn interpreter<'a>(
    args: &'a [String],
    code: &str,
    with_arg: &str,
) -> (Vec<(char, &'a str)>, Option<&'a str>) {
    let mut out = Vec::new();
    let mut i = 0;
    while let Some(a) = args.get(i) {
        i += 1;
        if a == "--" {
            return (out, args.get(i).map(String::as_str));
        }
        if a == "-" || !a.starts_with('-') || a.starts_with("--") {
            if a.starts_with("--") {
                continue;
            }
            return (out, Some(a.as_str()));
        }
        for (at, c) in a[1..].char_indices() {
            let rest = &a[1 + at + c.len_utf8()..];
            if code.contains(c) || with_arg.contains(c) {
                let value = if rest.is_empty() {
                    i += 1;
                    args.get(i - 1).map_or("", String::as_str)
                } else {
                    rest
                };
                out.push((c, value));
                if code.contains(c) {
                    // The code ends the options: the rest are its arguments.
                    return (out, None);
                }
                break;
            }
            out.push((c, ""));
        }
    }
    (out, None)
}

/// The forms of an interpreter: code in the line, a program on standard
/// input (`-`, or none at all while standard input is fed), `-i`.
fn interpreted(args: &[String], code: &str, with_arg: &str, interactive: char, f: &mut Found) {
    let (options, program) = interpreter(args, code, with_arg);
    let mut has_code = false;
    for (c, v) in &options {
        if code.contains(*c) {
            f.push(format!("-{c}"), *v, CODE);
            has_code = true;
        }
        if *c == interactive && f.fed {
            f.push(format!("-{c}"), "", STDIN);
        }
    }
    match program {
        Some("-") => f.push(
            "-",
            "",
            "the interpreter runs the program it reads on standard input",
        ),
        None if !has_code => f.stdin("the interpreter runs the program it reads on standard input"),
        // `python3 /dev/stdin` names standard input as its program file.
        Some(file) if is_stdin_file(file) => {
            f.stdin("the interpreter runs the program it reads on standard input")
        }
        _ => {}
    }
}

fn python(args: &[String], f: &mut Found) {
    // `-m module` runs a module from the library; `-c` code.
    let (options, _) = interpreter(args, "c", "mWXQ");
    if options.iter().any(|(c, _)| *c == 'm') {
        return;
    }
    interpreted(args, "c", "mWXQ", 'i', f);
}

fn perl(args: &[String], f: &mut Found) {
    interpreted(args, "eE", "IMmx", '\0', f);
}

fn ruby(program: &str, args: &[String], f: &mut Found) {
    if program == "irb" {
        return f.stdin(STDIN);
    }
    interpreted(args, "e", "rICEFx", '\0', f);
}

fn node(args: &[String], f: &mut Found) {
    for (name, v) in longs(args, &[("--eval", true), ("--print", true)]) {
        f.push(name, v, CODE);
    }
    let (options, program) = interpreter(args, "ep", "r");
    let mut has_code = !longs(args, &[("--eval", true), ("--print", true)]).is_empty();
    for (c, v) in options {
        match c {
            'e' => f.push("--eval", v, CODE),
            'p' => f.push("--print", v, CODE),
            'i' if f.fed => f.push("-i", "", STDIN),
            _ => continue,
        }
        has_code |= c != 'i';
    }
    match program {
        Some("-") => f.push("-", "", "node runs the program it reads on standard input"),
        None if !has_code => f.stdin("node runs the program it reads on standard input"),
        Some(file) if is_stdin_file(file) => {
            f.stdin("node runs the program it reads on standard input")
        }
        _ => {}
    }
}

fn php(args: &[String], f: &mut Found) {
    interpreted(args, "rBRE", "cdfFz", 'a', f);
}

fn lua(args: &[String], f: &mut Found) {
    interpreted(args, "e", "lW", 'i', f);
}

fn tcl(program: &str, args: &[String], f: &mut Found) {
    if program == "expect" {
        return interpreted(args, "c", "f", 'i', f);
    }
    match args.first().map(String::as_str) {
        None | Some("-") => f.stdin("tclsh runs the commands it reads on standard input"),
        Some(file) if is_stdin_file(file) => {
            f.stdin("tclsh runs the commands it reads on standard input")
        }
        _ => {}
    }
}

fn emacs(args: &[String], f: &mut Found) {
    for v in single_dash(args, &["-eval", "--eval", "-execute", "--execute"]) {
        f.push("--eval", v, "emacs runs the lisp given");
    }
    for v in single_dash(args, &["-f", "-funcall", "--funcall"]) {
        f.push("--funcall", v, "emacs calls the function it names");
    }
}

fn gdb(args: &[String], f: &mut Found) {
    for v in single_dash(args, &["-ex", "-eval-command", "--eval-command"]) {
        f.push(
            "-ex",
            v,
            "gdb runs the command given (`!` and `shell` run shell commands)",
        );
    }
    for v in single_dash(args, &["-iex", "-init-eval-command", "--init-eval-command"]) {
        f.push(
            "-iex",
            v,
            "gdb runs the command given (`!` and `shell` run shell commands)",
        );
    }
    if !args.iter().any(|a| a == "-batch" || a == "--batch") {
        f.stdin(STDIN);
    }
}

/// sqlite3 dot-commands that run a program, load code or open one.
fn sqlite_risky(text: &str) -> Option<String> {
    let lower = text.trim_start().to_ascii_lowercase();
    if lower.contains("load_extension(") {
        return Some("load_extension(".into());
    }
    if lower.contains("edit(") {
        return Some("edit(".into());
    }
    let command = lower.strip_prefix('.')?;
    let (name, rest) = command
        .split_once(char::is_whitespace)
        .unwrap_or((command, ""));
    let rest = rest.trim_start();
    let piped = rest.starts_with('|') || rest.starts_with("'|") || rest.starts_with("\"|");
    match name {
        "shell" | "system" | "sh" | "load" | "excel" => Some(format!(".{name}")),
        "output" | "once" | "read" | "import" if piped => Some(format!(".{name} |")),
        "once" if rest.starts_with("-x") || rest.starts_with("-e") => Some(".once -x".into()),
        _ => None,
    }
}

fn sqlite3(args: &[String], f: &mut Found) {
    if args.iter().any(|a| a == "-safe" || a == "--safe") {
        return;
    }
    const WITH_ARG: &[&str] = &[
        "-cmd",
        "-init",
        "-separator",
        "-newline",
        "-nullvalue",
        "-mmap",
        "-vfs",
        "-maxsize",
        "-lookaside",
        "-pagecache",
        "-heap",
        "-escape",
    ];
    let why = "sqlite3 runs the program (or loads the library) the command names";
    let mut operands = Vec::new();
    let mut i = 0;
    while let Some(a) = args.get(i) {
        i += 1;
        let name = format!("-{}", a.trim_start_matches('-'));
        if a.starts_with('-') && WITH_ARG.contains(&name.as_str()) {
            let v = args.get(i).map_or("", String::as_str);
            i += 1;
            match name.as_str() {
                "-cmd" => {
                    if let Some(key) = sqlite_risky(v) {
                        f.push(key, v, why);
                    }
                }
                "-init" => f.push("-init", v, "sqlite3 runs the commands of the file it names"),
                _ => {}
            }
            continue;
        }
        if a.starts_with('-') && operands.is_empty() {
            continue;
        }
        operands.push(a.as_str());
    }
    for sql in operands.iter().skip(1) {
        if let Some(key) = sqlite_risky(sql) {
            f.push(key, *sql, why);
        }
    }
    if operands.len() <= 1 {
        f.stdin(STDIN);
    }
}

/// Programs that read and run commands (shell escapes among them) on
/// standard input; some also take them in an option.
fn repl(program: &str, args: &[String], f: &mut Found) {
    let code = match program {
        "R" | "dc" | "gnuplot" => single_dash(args, &["-e", "--expression"]),
        "psql" => single_dash(args, &["-c", "--command"]),
        "mysql" | "mariadb" => single_dash(args, &["-e", "--execute"]),
        "lftp" => single_dash(args, &["-c", "-e"]),
        "debugfs" => single_dash(args, &["-R", "-f"]),
        _ => Vec::new(),
    };
    let has_code = !code.is_empty();
    for v in code {
        f.push("-e", v, "the program runs the commands given");
    }
    if !has_code {
        f.stdin(STDIN);
    }
}

/// A shell reading its script on standard input (no `-c`, no script
/// file, or `-s`), when something feeds it: a pipe, a file, or the call's
/// `stdin`. (A here-document the analysis read, and the script of `bash`'s
/// `script` shape, are checked as commands themselves, and do not count.)
fn shell(args: &[String], f: &mut Found) {
    let mut i = 0;
    let mut stdin = false;
    while let Some(a) = args.get(i) {
        i += 1;
        if a == "--" || a == "-" {
            break;
        }
        if a.starts_with("--") {
            if matches!(a.as_str(), "--rcfile" | "--init-file") {
                i += 1;
            }
            continue;
        }
        if a.len() > 1 && (a.starts_with('-') || a.starts_with('+')) {
            if a.contains('c') {
                return;
            }
            stdin |= a.contains('s');
            if a.contains('o') || a.contains('O') {
                i += 1;
            }
            continue;
        }
        // `sh /dev/stdin` reads its script from standard input too.
        if !stdin && !is_stdin_file(a) {
            return;
        }
        break;
    }
    f.stdin("the shell runs the commands it reads on standard input, and something feeds it");
}

// ---- the rest ---------------------------------------------------------------

fn zip(args: &[String], f: &mut Found) {
    for v in single_dash(args, &["-TT", "--unzip-command"]) {
        f.push(
            "--unzip-command",
            v,
            "zip runs the command it names to test the archive",
        );
    }
}

fn socat(args: &[String], f: &mut Found) {
    for a in args.iter().filter(|a| !a.starts_with('-') || a.len() == 1) {
        for part in a.split("!!") {
            let lower = part.to_ascii_lowercase();
            for kind in ["exec:", "system:"] {
                if lower.starts_with(kind) {
                    f.push(
                        kind,
                        &part[kind.len()..],
                        "socat runs the command the address names",
                    );
                }
            }
        }
    }
}

fn nc(args: &[String], f: &mut Found) {
    for (c, v) in shorts(args, "ecipqsTwWxXIOPV") {
        if matches!(c, 'e' | 'c') {
            f.push(
                format!("-{c}"),
                v,
                "nc runs the program it names on the connection",
            );
        }
    }
    opts(
        args,
        &[("--exec", true), ("--sh-exec", true), ("--lua-exec", true)],
        "nc runs the program it names on the connection",
        f,
    );
}

fn cargo(args: &[String], f: &mut Found) {
    for (_, v) in longs(args, &[("--config", true)]) {
        f.push(
            "--config",
            v,
            "cargo takes configuration (runners, rustc-wrapper) from it",
        );
    }
    rustc(args, f);
}

fn rustc(args: &[String], f: &mut Found) {
    let mut i = 0;
    while let Some(a) = args.get(i) {
        i += 1;
        let setting = match a.as_str() {
            "-C" | "--codegen" => {
                i += 1;
                args.get(i - 1).map_or("", String::as_str)
            }
            _ => match a
                .strip_prefix("-C")
                .or_else(|| a.strip_prefix("--codegen="))
            {
                Some(s) => s,
                None => continue,
            },
        };
        if let Some(v) = setting.strip_prefix("linker=") {
            f.push("-C linker", v, "rustc runs the linker it names");
        }
    }
}

fn gcc(args: &[String], f: &mut Found) {
    for v in single_dash(args, &["-wrapper"]) {
        f.push(
            "-wrapper",
            v,
            "gcc runs its passes through the program it names",
        );
    }
    for a in args {
        if let Some(dir) = a.strip_prefix("-B") {
            f.push("-B", dir, "gcc runs its passes from the folder it names");
        }
        if let Some(plugin) = a.strip_prefix("-fplugin=") {
            f.push("-fplugin", plugin, "gcc loads the plugin it names");
        }
        if let Some(specs) = a
            .strip_prefix("-specs=")
            .or_else(|| a.strip_prefix("--specs="))
        {
            f.push("-specs", specs, READS_CONFIG);
        }
    }
}

fn npm(args: &[String], f: &mut Found) {
    opts(
        args,
        &[("--script-shell", true)],
        "npm runs scripts with the shell it names",
        f,
    );
}

fn pip(args: &[String], f: &mut Found) {
    opts(args, &[("--editor", true)], RUNS_VALUE, f);
}

fn strace(args: &[String], f: &mut Found) {
    let mut outputs: Vec<&str> = shorts(args, "abeEIoOpPsSuUX")
        .into_iter()
        .filter(|(c, _)| *c == 'o')
        .map(|(_, v)| v)
        .collect();
    outputs.extend(
        longs(args, &[("--output", true)])
            .into_iter()
            .map(|(_, v)| v),
    );
    for v in outputs {
        if let Some(command) = v.strip_prefix('|').or_else(|| v.strip_prefix('!')) {
            f.push(
                "-o |",
                command,
                "strace pipes its output to the command it names",
            );
        }
    }
}

/// tmux commands that run a shell command.
const TMUX_RUNS: &[&str] = &[
    "new-session",
    "new",
    "new-window",
    "neww",
    "split-window",
    "splitw",
    "respawn-pane",
    "respawnp",
    "respawn-window",
    "respawnw",
    "run-shell",
    "run",
    "if-shell",
    "if",
    "pipe-pane",
    "pipep",
    "display-popup",
    "popup",
    "source-file",
    "source",
];

fn tmux(args: &[String], f: &mut Found) {
    for (c, v) in shorts(args, "cfLST") {
        match c {
            'c' => f.push("-c", v, RUNS_VALUE),
            'f' => f.push("-f", v, READS_CONFIG),
            'S' | 'L' => f.push(
                format!("-{c}"),
                v,
                "tmux attaches to the server (and its shells) it names",
            ),
            _ => {}
        }
    }
    let words = operands(args, "cfLST", &[], false);
    for (i, w) in words.iter().enumerate() {
        if TMUX_RUNS.contains(w) && (i == 0 || words[i - 1] == ";" || words[i - 1].ends_with(';')) {
            f.push(*w, words[i + 1..].join(" "), RUNS_VALUE);
        }
    }
}

fn wget(args: &[String], f: &mut Found) {
    for (c, v) in shorts(args, "eoaOPiBtTwQUYlADRXIH") {
        if c == 'e' {
            f.push("--execute", v, READS_CONFIG);
        }
    }
    for (name, v) in longs(
        args,
        &[
            ("--use-askpass", true),
            ("--execute", true),
            ("--config", true),
        ],
    ) {
        f.push(
            name,
            v,
            if name == "--use-askpass" {
                RUNS_VALUE
            } else {
                READS_CONFIG
            },
        );
    }
}

fn apt(args: &[String], f: &mut Found) {
    for (c, v) in shorts(args, "ocqt") {
        match c {
            'o' if v.contains("Invoke") || v.contains("Install-Pkgs") || f.side == Side::Rule => {
                f.push("-o", v, "apt runs the hook command the option sets")
            }
            'c' => f.push("-c", v, READS_CONFIG),
            _ => {}
        }
    }
}

/// Reads a rule's resource (`git -c core.pager=* *`) as a command, the way
/// the judged command was read, and returns its forms: only what it spells
/// (see [`Side::Rule`]). `None` when it is not one simple command. Rules
/// are few and read often, so what they read as is kept.
pub fn rule_forms(resource: &str) -> Option<Vec<Form>> {
    thread_local! {
        static READ: std::cell::RefCell<std::collections::HashMap<String, Option<Vec<Form>>>> =
            Default::default();
    }
    if let Some(known) = READ.with(|r| r.borrow().get(resource).cloned()) {
        return known;
    }
    let read = match shell::analyze(resource) {
        shell::Analysis::Parsed(commands) => commands.first().and_then(|first| {
            let (program, args) = first.words.split_first()?;
            Some(forms(program, args, &first.env, true, Side::Rule))
        }),
        shell::Analysis::Unparsed { .. } => None,
    };
    READ.with(|r| {
        let mut r = r.borrow_mut();
        // Bounded: policies are reloaded as they change, rules with them.
        if r.len() >= 4096 {
            r.clear();
        }
        r.insert(resource.to_string(), read.clone());
    });
    read
}

/// Whether a form's value matches a rule's value, as a glob (`*` any run
/// of characters, `\` escapes).
pub fn value_matches(glob: &str, value: &str) -> bool {
    if glob == value {
        return true;
    }
    globset::GlobBuilder::new(glob)
        .literal_separator(false)
        .backslash_escape(true)
        .build()
        .is_ok_and(|g| g.compile_matcher().is_match(value))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn found(line: &str) -> Vec<(String, String)> {
        let shell::Analysis::Parsed(commands) = shell::analyze(line) else {
            panic!("{line} did not parse");
        };
        let c = &commands[0];
        let (program, args) = c.words.split_first().unwrap();
        forms(program, args, &c.env, c.fed, Side::Command)
            .into_iter()
            .map(|f| (f.key, f.value))
            .collect()
    }

    fn keys(line: &str) -> Vec<String> {
        found(line).into_iter().map(|(k, _)| k).collect()
    }

    #[test]
    fn variables_of_the_table() {
        assert!(var_of("PAGER").is_some());
        assert!(var_of("GIT_CONFIG_KEY_0").is_some());
        assert!(var_of("LD_PRELOAD").is_some_and(|v| v.startup));
        assert!(var_of("LANG").is_none());
        assert!(var_of("GIT_AUTHOR_NAME").is_none());
        assert!(steers_startup("BASH_ENV"));
        assert!(!steers_startup("PAGER"));
    }

    #[test]
    fn git_forms() {
        assert_eq!(
            found("git -c alias.x='!touch X' x"),
            [("-c alias.x".into(), "!touch X".into())]
        );
        assert_eq!(keys("git -c Core.Pager=x log"), ["-c core.pager"]);
        assert_eq!(keys("git -c core.fsmonitor= status"), ["-c core.fsmonitor"]);
        assert_eq!(
            keys("git -c filter.lfs.smudge=x checkout"),
            ["-c filter.lfs.smudge"]
        );
        assert_eq!(
            keys("git -c diff.x.textconv=y diff"),
            ["-c diff.x.textconv"]
        );
        assert_eq!(
            keys("git --config-env=core.editor=E commit"),
            ["--config-env core.editor"]
        );
        assert_eq!(keys("git --exec-path=. x"), ["--exec-path"]);
        assert_eq!(keys("git clone -u 'touch X' a b"), ["--upload-pack"]);
        assert_eq!(keys("git fetch --upload-pack=x origin"), ["--upload-pack"]);
        assert_eq!(keys("git ls-remote --upload-p x ."), ["--upload-pack"]);
        assert_eq!(keys("git clone ext::sh -c x y"), ["ext::"]);
        assert_eq!(keys("git grep -Ox foo"), ["--open-files-in-pager"]);
        assert_eq!(keys("git difftool -x 'touch X'"), ["--extcmd"]);
        assert_eq!(
            keys("git archive --remote=. --exec='touch X' HEAD"),
            ["--exec"]
        );
        assert_eq!(keys("git rebase -x 'touch X' HEAD~1"), ["--exec"]);
        assert_eq!(keys("git bisect run touch X"), ["bisect run"]);
        assert_eq!(
            keys("git submodule foreach 'touch X'"),
            ["submodule foreach"]
        );
        assert_eq!(
            keys("git config core.fsmonitor 'touch X'"),
            ["config core.fsmonitor"]
        );
        assert_eq!(
            keys("git config set --global core.pager x"),
            ["config core.pager"]
        );
        assert_eq!(keys("git init --template=/tmp/t"), ["--template"]);
        // Ordinary uses hold none.
        for line in [
            "git status",
            "git log -u -p",
            "git -c color.ui=always log",
            "git -C sub status",
            "git config --get core.pager",
            "git config user.name x",
            "git commit -m '--exec x'",
            "git diff --stat",
            "git grep -n foo",
        ] {
            assert_eq!(keys(line), Vec::<String>::new(), "{line}");
        }
    }

    #[test]
    fn other_programs() {
        assert_eq!(keys("find . -name x -delete"), ["-delete"]);
        assert_eq!(keys("find . -fprintf out %p"), ["-fprintf"]);
        assert!(keys("find . -exec rm {} ;").is_empty());
        assert_eq!(keys("tar xf a --to-command=sh"), ["--to-command"]);
        assert_eq!(keys("tar -xIzstd -f a"), ["--use-compress-program"]);
        assert_eq!(keys("tar cIf prog a.tar x"), ["--use-compress-program"]);
        assert_eq!(
            keys("tar cf a x --checkpoint=1 --checkpoint-action=exec=sh"),
            ["--checkpoint-action"]
        );
        assert!(keys("tar cf a x --checkpoint-action=dot").is_empty());
        assert!(keys("tar -czf a.tgz src").is_empty());
        assert_eq!(keys("rsync -avze 'sh -c x' a b:c"), ["--rsh"]);
        assert!(keys("rsync -av --exclude x-e a b").is_empty());
        assert_eq!(keys("ssh -o ProxyCommand=';sh' x"), ["-o proxycommand"]);
        assert_eq!(
            keys("ssh -oLocalCommand=sh -o PermitLocalCommand=yes h"),
            ["-o localcommand", "-o permitlocalcommand"]
        );
        assert_eq!(keys("scp -S ./x a b:"), ["-S"]);
        assert_eq!(keys("sed -n '1e touch X' f"), ["e"]);
        assert_eq!(keys("sed 's/a/b/e' f"), ["s///e"]);
        assert_eq!(keys("sed -e 's/a/b/w out' f"), ["s///w"]);
        assert_eq!(keys("sed '/x/w out' f"), ["w"]);
        assert!(keys("sed -i 's/e/E/g; /w/d' f").is_empty());
        assert!(keys("sed --sandbox 1e\\ x f").is_empty());
        assert_eq!(keys("awk 'BEGIN {system(\"x\")}'"), ["system()"]);
        assert_eq!(keys("awk '{print | \"sh\"}'"), ["|"]);
        assert_eq!(keys("awk '{print > \"f\"}'"), [">"]);
        assert!(keys("awk '$1 > 3 || $2 == \"a|b\" {print $1}' f").is_empty());
        assert_eq!(keys("make --eval='x:' ."), ["--eval"]);
        assert_eq!(keys("make SHELL=/tmp/x"), ["SHELL="]);
        assert!(keys("make -j4 CC=clang all").is_empty());
        assert_eq!(keys("vi -c ':!sh' f"), ["-c"]);
        assert_eq!(keys("vim '+:!sh'"), ["-c"]);
        assert!(keys("vim +10 f").is_empty());
        assert_eq!(keys("python3 -c 'x'"), ["-c"]);
        assert_eq!(keys("python3 -Ic 'x'"), ["-c"]);
        assert!(keys("python3 x.py -c y").is_empty());
        assert!(keys("python3 -m http.server").is_empty());
        assert_eq!(keys("perl -ne 'print'"), ["-e"]);
        assert_eq!(keys("node -e 'x'"), ["--eval"]);
        assert_eq!(keys("gdb -nx -ex '!sh' -ex quit"), ["-ex", "-ex"]);
        assert_eq!(keys("sqlite3 /dev/null '.shell sh'"), [".shell"]);
        assert!(keys("sqlite3 db 'select 1'").is_empty());
        assert_eq!(keys("zip a b -T -TT 'sh #'"), ["--unzip-command"]);
        assert_eq!(keys("socat - exec:sh"), ["exec:"]);
        assert_eq!(keys("man '-H/bin/sh #' man"), ["--html"]);
        assert_eq!(
            keys("cargo --config 'target.x.runner=\"sh\"' run"),
            ["--config"]
        );
        assert_eq!(keys("PAGER=less git log"), ["PAGER="]);
    }

    #[test]
    fn standard_input_counts_only_when_fed() {
        assert!(keys("ed f").is_empty());
        assert_eq!(keys("ed f < cmds"), ["stdin"]);
        assert_eq!(keys("sqlite3 db <<< '.shell sh'"), ["stdin"]);
        assert_eq!(keys("python3 -"), ["-"]);
        let rule = rule_forms("ed *").unwrap();
        assert!(rule.is_empty(), "a rule spells no standard input: {rule:?}");
    }

    #[test]
    fn rules_read_as_commands() {
        let r = rule_forms("git -c core.pager=* *").unwrap();
        assert_eq!(r[0].key, "-c core.pager");
        assert!(value_matches(&r[0].value, "less -R"));
        assert!(rule_forms("git *").unwrap().is_empty());
        assert!(rule_forms("sed *").unwrap().is_empty());
        assert!(rule_forms("awk *").unwrap().is_empty());
        let env = rule_forms("PAGER=less git log").unwrap();
        assert_eq!(env[0].key, "PAGER=");
        assert!(!value_matches(&env[0].value, "'sh -c x'"));
    }

    /// Whether the module's table (its doc) has a row for `program`.
    fn documented(program: &str) -> bool {
        include_str!("programs.rs")
            .lines()
            .filter(|l| l.starts_with("//! | "))
            .any(|l| l.contains(program))
    }

    #[test]
    fn every_program_with_forms_is_documented() {
        for p in [
            "git", "find", "tar", "rsync", "sed", "awk", "make", "less", "man", "zip", "socat",
            "gdb", "sqlite3", "strace", "tmux", "wget",
        ] {
            assert!(documented(p), "{p} is missing from the module's table");
        }
    }
}
