//! The table of programs whose options the analysis parses: the wrappers,
//! whose options tell where the command they run starts, and the programs
//! that name files in their operands, whose options tell which words are
//! operands (what hermetic mode checks). One grammar a program, read by the
//! one parser of [`super::getopt`]; the shells, whose options are not
//! getopt's, are read by bash's rules.

use super::getopt::{shell_options, Grammar, Options};
use super::words::Arg;

/// The options of `program` (a file name) in its arguments `args`, by the
/// table's grammar for it; `None` for a program the table does not have.
/// Indices count from `args`'s first word.
pub(super) fn options(program: &str, args: &[Arg]) -> Option<Options> {
    if is_shell(program) {
        return Some(shell_options(args));
    }
    let (grammar, skip) = grammar(program, args)?;
    Some(grammar.parse(args.get(skip..)?).shifted(skip))
}

/// The grammar of `program`, and how many of `args` come before the
/// options it reads (a subcommand such as `perf stat`, or `env`'s `-`).
fn grammar(program: &str, args: &[Arg]) -> Option<(&'static Grammar, usize)> {
    let first = args.first().map(|a| a.text.as_str());
    let grammar = match program {
        // `-` alone is `-i`.
        "env" => return Some((&ENV, args.iter().take_while(|a| a.text == "-").count())),
        "timeout" => &TIMEOUT,
        "nice" => &NICE,
        "nohup" | "builtin" | "setsid" | "command" | "taskset" | "logsave" | "valgrind" => {
            &Grammar::NONE
        }
        "stdbuf" => &STDBUF,
        "time" => &TIME,
        "exec" => &EXEC,
        "sudo" => &SUDO,
        "doas" => &DOAS,
        "xargs" => &XARGS,
        "chrt" => &CHRT,
        "ionice" => &IONICE,
        "unshare" => &UNSHARE,
        "nsenter" => &NSENTER,
        "setpriv" => &SETPRIV,
        "flock" => &FLOCK,
        // `setarch [ARCH] [options] [program]`; its aliases take no ARCH.
        "setarch" => {
            let skip = usize::from(first.is_some_and(|a| !a.starts_with('-')));
            return Some((&Grammar::NONE, skip));
        }
        "linux32" | "linux64" | "i386" | "i686" | "x86_64" | "uname26" => &Grammar::NONE,
        "choom" => &CHOOM,
        "prlimit" => &PRLIMIT,
        "chroot" => &CHROOT,
        "script" => &SCRIPT,
        "watch" => &WATCH,
        "strace" => &STRACE,
        "ssh-agent" => &SSH_AGENT,
        "start-stop-daemon" => &START_STOP_DAEMON,
        "rlwrap" => &RLWRAP,
        "ssh" => &SSH,
        "run-parts" => &RUN_PARTS,
        "systemd-run" => &SYSTEMD_RUN,
        "parallel" => &PARALLEL,
        "npx" | "bunx" | "uvx" => &RUNNER,
        "npm" | "pnpm" | "yarn" | "bun" => match first {
            Some("exec" | "x" | "dlx") => return Some((&RUNNER, 1)),
            _ => return None,
        },
        "uv" | "poetry" | "pipx" | "pdm" | "hatch" => match first {
            Some("run") => return Some((&RUNNER, 1)),
            _ => return None,
        },
        "bundle" | "bundler" => match first {
            Some("exec") => return Some((&RUNNER, 1)),
            _ => return None,
        },
        "perf" => match first {
            Some("stat" | "record" | "trace") => return Some((&PERF, 1)),
            _ => return None,
        },
        p if is_loader(p) => &LOADER,
        // Programs that name files.
        "cp" => &CP,
        "mv" | "ln" => &MV,
        "install" => &INSTALL,
        "mkdir" => &MKDIR,
        "touch" => &TOUCH,
        "truncate" => &TRUNCATE,
        "shred" => &SHRED,
        "chmod" | "chgrp" => &CHMOD,
        "chown" => &CHOWN,
        "rm" | "rmdir" | "tee" => &NO_ARGUMENTS,
        "sed" => &SED,
        _ => return None,
    };
    Some((grammar, 0))
}

/// The shells whose `-c` script and here-documents are analyzed.
const SHELLS: &[&str] = &["sh", "bash", "zsh", "dash", "ksh", "mksh", "ash"];

/// Whether `program` (a file name) is one of the shells the analysis reads
/// the scripts of; their options are read as bash reads them.
pub fn is_shell(program: &str) -> bool {
    SHELLS.contains(&program)
}

/// The dynamic loader, run as a program (`ld.so`, `ld-linux-x86-64.so.2`).
pub(super) fn is_loader(program: &str) -> bool {
    program == "ld.so" || (program.starts_with("ld-") && program.contains(".so"))
}

// ---- wrappers ---------------------------------------------------------------

const ENV: Grammar = Grammar::stop("uCPa", &["--unset", "--chdir", "--split-string", "--argv0"]);
const TIMEOUT: Grammar = Grammar::stop("ks", &["--kill-after", "--signal"]);
const NICE: Grammar = Grammar::stop("n", &["--adjustment"]);
const STDBUF: Grammar = Grammar::stop("ioe", &["--input", "--output", "--error"]);
const TIME: Grammar = Grammar::stop("fo", &["--format", "--output"]);
const EXEC: Grammar = Grammar::stop("a", &[]);
const SUDO: Grammar = Grammar {
    optional_arg: "h",
    long_flags: &["--login"],
    ..Grammar::stop(
        "aCcDgpRrTtUu",
        &[
            "--auth-type",
            "--close-from",
            "--login-class",
            "--chdir",
            "--group",
            "--prompt",
            "--chroot",
            "--role",
            "--type",
            "--command-timeout",
            "--other-user",
            "--user",
        ],
    )
};
const DOAS: Grammar = Grammar::stop("aCu", &[]);
const XARGS: Grammar = Grammar {
    optional_arg: "eil",
    ..Grammar::stop(
        "adEILnPs",
        &[
            "--arg-file",
            "--delimiter",
            "--max-args",
            "--max-procs",
            "--max-chars",
            "--process-slot-var",
        ],
    )
};

// util-linux and coreutils.
const CHRT: Grammar = Grammar::stop(
    "TPD",
    &["--sched-runtime", "--sched-period", "--sched-deadline"],
);
const IONICE: Grammar = Grammar::stop(
    "cnpPu",
    &["--class", "--classdata", "--pid", "--pgid", "--uid"],
);
const UNSHARE: Grammar = Grammar {
    optional_arg: "muinpUCT",
    ..Grammar::stop(
        "RwSG",
        &[
            "--map-user",
            "--map-group",
            "--map-users",
            "--map-groups",
            "--propagation",
            "--setgroups",
            "--root",
            "--wd",
            "--setuid",
            "--setgid",
            "--monotonic",
            "--boottime",
        ],
    )
};
const NSENTER: Grammar = Grammar {
    optional_arg: "muinpCUTrw",
    // Its argument, if any, is attached: `--wd=DIR`.
    long_flags: &["--wd"],
    ..Grammar::stop("tSGW", &["--target", "--setuid", "--setgid", "--wdns"])
};
const SETPRIV: Grammar = Grammar::stop(
    "",
    &[
        "--ambient-caps",
        "--inh-caps",
        "--bounding-set",
        "--ruid",
        "--euid",
        "--rgid",
        "--egid",
        "--reuid",
        "--regid",
        "--groups",
        "--securebits",
        "--pdeathsig",
        "--selinux-label",
        "--apparmor-profile",
        "--landlock-access",
        "--landlock-rule",
    ],
);
const FLOCK: Grammar = Grammar::stop("wEc", &["--timeout", "--conflict-exit-code", "--command"]);
const CHOOM: Grammar = Grammar::stop("np", &["--adjust", "--pid"]);
const PRLIMIT: Grammar = Grammar {
    optional_arg: "cdefilmnqrstuvxy",
    ..Grammar::stop("po", &["--pid", "--output"])
};
const CHROOT: Grammar = Grammar::stop("", &["--groups", "--userspec"]);
const SCRIPT: Grammar = Grammar {
    optional_arg: "t",
    ..Grammar::stop(
        "IOBTmEoc",
        &[
            "--log-in",
            "--log-out",
            "--log-io",
            "--log-timing",
            "--logging-format",
            "--echo",
            "--output-limit",
            "--command",
        ],
    )
};
const WATCH: Grammar = Grammar {
    optional_arg: "d",
    ..Grammar::stop("nq", &["--interval", "--equexit"])
};

// Others.
const STRACE: Grammar = Grammar {
    long_flags: &["--summary"],
    ..Grammar::stop(
        "abeEIoOpPsSuUX",
        &[
            "--attach",
            "--env",
            "--user",
            "--detach-on",
            "--interruptible",
            "--trace",
            "--signal",
            "--status",
            "--trace-path",
            "--output",
            "--string-limit",
            "--summary-sort-by",
            "--columns",
        ],
    )
};
const SSH_AGENT: Grammar = Grammar::stop("aEOPt", &[]);
const START_STOP_DAEMON: Grammar = Grammar {
    long_flags: &["--start"],
    ..Grammar::stop(
        "xaupPgcNrkdRnsI",
        &[
            "--exec",
            "--startas",
            "--user",
            "--pidfile",
            "--group",
            "--chuid",
            "--nicelevel",
            "--chroot",
            "--chdir",
            "--retry",
            "--name",
            "--signal",
            "--procsched",
            "--iosched",
            "--umask",
            "--ppid",
            "--output",
            "--notify-timeout",
        ],
    )
};
const RLWRAP: Grammar = Grammar {
    optional_arg: "amp",
    ..Grammar::stop("bCDeEfgHlMOPqsStwz", &[])
};
const SSH: Grammar = Grammar::stop("BbcDEeFIiJLlmOoPpQRSWw", &[]);
const RUN_PARTS: Grammar = Grammar::stop("u", &["--umask", "--arg", "--regex"]);
const SYSTEMD_RUN: Grammar = Grammar::stop(
    "upEMH",
    &[
        "--unit",
        "--property",
        "--description",
        "--slice",
        "--setenv",
        "--machine",
        "--host",
        "--uid",
        "--gid",
        "--nice",
        "--working-directory",
        "--service-type",
        "--on-active",
        "--on-boot",
        "--on-startup",
        "--on-unit-active",
        "--on-unit-inactive",
        "--on-calendar",
        "--timer-property",
        "--path-property",
        "--socket-property",
    ],
);
const PARALLEL: Grammar = Grammar {
    long_flags: &["--tag"],
    ..Grammar::stop(
        "adEIjLnNPSsC",
        &[
            "--arg-file",
            "--delimiter",
            "--jobs",
            "--max-args",
            "--max-lines",
            "--sshlogin",
            "--sshloginfile",
            "--max-chars",
            "--colsep",
            "--joblog",
            "--results",
            "--tmpdir",
            "--workdir",
            "--env",
            "--basefile",
            "--return",
            "--transferfile",
            "--block",
            "--timeout",
            "--delay",
            "--tagstring",
            "--retries",
            "--halt",
            "--memfree",
            "--load",
            "--nice",
            "--termseq",
            "--replace",
        ],
    )
};
/// Package runners (`npx`, `npm exec`, `uv run`, ...), after the
/// subcommand.
const RUNNER: Grammar = Grammar::stop(
    "pcCPw",
    &[
        "--package",
        "--call",
        "--with",
        "--python",
        "--project",
        "--directory",
        "--from",
        "--spec",
        "--pip-args",
        "--index-url",
        "--index",
        "--extra",
        "--group",
        "--env-file",
        "--gemfile",
        "--workspace",
    ],
);
/// `perf stat`, `perf record`, `perf trace`, after the subcommand.
const PERF: Grammar = Grammar::stop(
    "eptoCGIxMDrcFjmu",
    &[
        "--event",
        "--pid",
        "--tid",
        "--output",
        "--cpu",
        "--cgroup",
        "--repeat",
        "--field-separator",
        "--metrics",
        "--delay",
        "--count",
        "--freq",
        "--mmap-pages",
        "--uid",
        "--call-graph",
    ],
);
const LOADER: Grammar = Grammar::stop(
    "",
    &[
        "--library-path",
        "--glibc-hwcaps-prepend",
        "--glibc-hwcaps-mask",
        "--inhibit-rpath",
        "--audit",
        "--preload",
        "--argv0",
    ],
);

// ---- programs that name files -----------------------------------------------

const CP: Grammar = Grammar::permute(
    "tS",
    &[
        "--target-directory",
        "--suffix",
        "--sparse",
        "--no-preserve",
    ],
);
const MV: Grammar = Grammar::permute("tS", &["--target-directory", "--suffix"]);
const INSTALL: Grammar = Grammar {
    long_flags: &["--strip"],
    ..Grammar::permute(
        "tSmog",
        &[
            "--target-directory",
            "--suffix",
            "--mode",
            "--owner",
            "--group",
            "--strip-program",
        ],
    )
};
const MKDIR: Grammar = Grammar::permute("m", &["--mode"]);
const TOUCH: Grammar = Grammar::permute("dtr", &["--date", "--reference", "--time"]);
const TRUNCATE: Grammar = Grammar::permute("sr", &["--size", "--reference"]);
const SHRED: Grammar = Grammar::permute("ns", &["--iterations", "--size", "--random-source"]);
const CHMOD: Grammar = Grammar::permute("", &["--reference"]);
const CHOWN: Grammar = Grammar::permute("", &["--reference", "--from"]);
const NO_ARGUMENTS: Grammar = Grammar::permute("", &[]);
const SED: Grammar = Grammar {
    optional_arg: "i",
    ..Grammar::permute("efl", &["--expression", "--file", "--line-length"])
};
