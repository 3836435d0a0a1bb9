//! The landlock runner: the fallback when bubblewrap is absent or cannot
//! create namespaces. A landlock ruleset confines the filesystem and a
//! seccomp filter refuses non-Unix sockets when the network is closed.
//!
//! Everything that allocates or takes locks (opening paths, building the
//! ruleset, compiling the BPF program) happens in the parent, in
//! [`prepare`]. The parent is multi-threaded, so between fork and exec the
//! child may only make raw syscalls: [`Prepared::apply`] does exactly that.

use super::{Enforcement, Mode, Profile};
use landlock::{
    Access, AccessFs, AccessNet, BitFlags, CompatLevel, Compatible, PathBeneath, PathFd, Ruleset,
    RulesetAttr, RulesetCreated, RulesetCreatedAttr, Scope, ABI,
};
use nix::libc;
use seccompiler::{
    sock_filter, BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition,
    SeccompFilter, SeccompRule, TargetArch,
};
use std::collections::BTreeMap;
use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};

/// The newest ABI whose rights we ask for. The ruleset is built best effort,
/// so rights the running kernel lacks are dropped, not refused.
const NEWEST: ABI = ABI::V10;

/// Character devices commands routinely write to. Nothing else under /dev
/// or /proc is writable.
// Not /dev/tty: a confined command writing there could paint a fake prompt
// on the user's terminal.
const WRITABLE_DEVICES: [&str; 3] = ["/dev/null", "/dev/zero", "/dev/full"];

/// What the child must do between fork and exec, prepared in the parent.
#[derive(Debug)]
pub struct Prepared {
    /// The landlock ruleset to enforce; `None` when landlock has nothing to
    /// restrict (danger-full-access with the network open, or with a kernel
    /// lacking landlock or its network rights).
    ruleset: Option<OwnedFd>,
    /// The seccomp program; empty when the network is open.
    filter: BpfProgram,
}

// Shared through an Arc with `pre_exec` closures, which must be Send + Sync.
const _: fn() = || {
    fn shared<T: Send + Sync>() {}
    shared::<Prepared>();
};

/// Which landlock ABI this kernel offers, or why the runner cannot work
/// here (for `sluice doctor`). Also checks that seccomp filters work, which
/// the runner needs to close the network.
pub fn probe() -> Result<u32, String> {
    let abi = landlock_abi()?;
    seccomp_available()?;
    Ok(abi)
}

/// Builds what [`Prepared::apply`] enforces for `profile`. The reasons are
/// this runner's own (the profile's `partial` ones come on top); the
/// enforcement accounts for both. Fails (so the caller refuses the call)
/// when the kernel cannot enforce the profile at all.
pub fn prepare(profile: &Profile) -> Result<(Prepared, Enforcement, Vec<String>), String> {
    let (ruleset, reasons) = landlock_part(profile)?;

    let filter = if profile.network {
        BpfProgram::new()
    } else {
        seccomp_available()?;
        network_filter()?
    };
    let enforcement = if reasons.is_empty() && profile.partial.is_empty() {
        Enforcement::Full
    } else {
        Enforcement::Partial
    };
    Ok((Prepared { ruleset, filter }, enforcement, reasons))
}

/// The ruleset fd and what this ABI leaves unenforced. With files
/// unconfined, landlock only adds to seccomp's network closing (TCP rights,
/// scopes), so a kernel without it is no error then.
fn landlock_part(profile: &Profile) -> Result<(Option<OwnedFd>, Vec<String>), String> {
    // Full access still keeps its read-only paths (the audit store, git's
    // hooks): the filesystem is then granted entry by entry around them.
    let confine_files = profile.mode != Mode::DangerFullAccess || !profile.read_only.is_empty();
    if !confine_files && profile.network {
        return Ok((None, Vec::new()));
    }
    let abi = match landlock_abi() {
        Ok(abi) => abi,
        Err(why) if confine_files => return Err(why),
        Err(_) => return Ok((None, Vec::new())),
    };
    let gaps = if confine_files {
        abi_gaps(abi)
    } else {
        Vec::new()
    };
    Ok((build_ruleset(profile, confine_files)?, gaps))
}

impl Prepared {
    /// Runs in the child after fork, before exec: only raw syscalls (no
    /// allocation, no locks), so it is safe in a multi-threaded parent's
    /// `pre_exec`. Order matters: no_new_privs first (both landlock and
    /// seccomp require it without CAP_SYS_ADMIN), seccomp last.
    pub fn apply(&self) -> io::Result<()> {
        if self.ruleset.is_none() && self.filter.is_empty() {
            return Ok(());
        }
        // SAFETY: prctl with integer arguments touches no memory of ours.
        check(unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) } as libc::c_long)?;
        if let Some(fd) = &self.ruleset {
            // SAFETY: the fd is a live landlock ruleset we own; flags 0.
            check(unsafe { libc::syscall(libc::SYS_landlock_restrict_self, fd.as_raw_fd(), 0) })?;
        }
        if !self.filter.is_empty() {
            let program = libc::sock_fprog {
                // `network_filter` keeps the program under BPF_MAXINSNS.
                len: self.filter.len() as libc::c_ushort,
                // seccompiler's sock_filter is #[repr(C)] with libc's layout;
                // the kernel only reads the program.
                filter: self.filter.as_ptr() as *mut libc::sock_filter,
            };
            // SAFETY: `program` points at our live instructions; the kernel
            // copies them before returning.
            check(unsafe {
                libc::syscall(
                    libc::SYS_seccomp,
                    libc::SECCOMP_SET_MODE_FILTER,
                    0,
                    &program as *const libc::sock_fprog,
                )
            })?;
        }
        Ok(())
    }
}

/// Turns a raw syscall result into an error from errno (no allocation).
fn check(rc: libc::c_long) -> io::Result<()> {
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

/// The kernel's landlock ABI version, or why landlock is unusable. Asked
/// with a raw syscall: the `landlock` crate keeps its probe private.
fn landlock_abi() -> Result<u32, String> {
    // SAFETY: a null attribute with size 0 and the VERSION flag only asks
    // for the ABI number.
    let version = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<u8>(),
            0usize,
            1u32, // LANDLOCK_CREATE_RULESET_VERSION
        )
    };
    if version >= 1 {
        return Ok(version as u32);
    }
    let err = io::Error::last_os_error();
    Err(match err.raw_os_error() {
        Some(libc::ENOSYS) => "landlock is unavailable: this kernel lacks it (it needs Linux 5.13 \
             or later built with CONFIG_SECURITY_LANDLOCK); install bubblewrap instead"
            .to_string(),
        Some(libc::EOPNOTSUPP) => "landlock is unavailable: the kernel has it but it is disabled \
             at boot; add `landlock` to the kernel's `lsm=` parameter, or install bubblewrap"
            .to_string(),
        _ => format!("landlock is unavailable: probing it failed ({err}); install bubblewrap"),
    })
}

/// Whether seccomp filters returning an errno work here (a kernel without
/// CONFIG_SECCOMP_FILTER, or one older than 4.14, says no).
fn seccomp_available() -> Result<(), String> {
    let action: u32 = libc::SECCOMP_RET_ERRNO;
    // SAFETY: the kernel reads one u32 from `action`.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_seccomp,
            libc::SECCOMP_GET_ACTION_AVAIL,
            0,
            &action as *const u32,
        )
    };
    check(rc).map_err(|err| {
        format!(
            "seccomp filters are unavailable ({err}), so the landlock runner cannot close \
             the network; use a kernel with CONFIG_SECCOMP_FILTER, or install bubblewrap"
        )
    })
}

/// What the profile asks that this ABI cannot enforce (files only: the
/// network is closed by seccomp whatever the ABI).
fn abi_gaps(abi: u32) -> Vec<String> {
    let mut gaps = Vec::new();
    if abi < 3 {
        gaps.push(format!(
            "landlock ABI {abi} cannot stop truncating files outside the writable roots \
             (needs Linux 6.2); install bubblewrap for full enforcement"
        ));
    }
    if abi < 5 {
        gaps.push(format!(
            "landlock ABI {abi} cannot restrict ioctl on devices (needs Linux 6.10); \
             install bubblewrap for full enforcement"
        ));
    }
    gaps
}

/// What to grant write on, and whether each is a folder. Landlock only
/// adds permissions, so a writable tree holding read-only paths (`.git`,
/// `.sluice`, what a deny names) cannot be granted whole: its entries are,
/// one by one, except those paths (folders holding one are split the same
/// way). New entries can then not be made at those levels, only inside the
/// folders granted; symlinks are never granted (landlock would follow them
/// out of the tree).
fn write_grants(profile: &Profile) -> Vec<(PathBuf, bool)> {
    let mut out = Vec::new();
    for root in writable_roots(profile) {
        split(&root, &profile.read_only, &mut out);
    }
    out
}

fn split(dir: &Path, read_only: &[PathBuf], out: &mut Vec<(PathBuf, bool)>) {
    if !read_only.iter().any(|p| p.starts_with(dir) && p != dir) {
        out.push((dir.to_path_buf(), true));
        return;
    }
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let Ok(kind) = entry.file_type() else {
            continue;
        };
        if kind.is_symlink() || read_only.contains(&path) {
            continue;
        }
        if kind.is_dir() {
            split(&path, read_only, out);
        } else if kind.is_file() {
            out.push((path, false));
        }
    }
}

/// Every tree the command may write: the whole filesystem when files are
/// unconfined, else the writable roots and the private temp folder.
fn writable_roots(profile: &Profile) -> Vec<PathBuf> {
    if profile.mode == Mode::DangerFullAccess {
        return vec![PathBuf::from("/")];
    }
    let mut roots = profile.writable.clone();
    roots.push(profile.tmp.clone());
    roots
}

/// Creates the ruleset fd: files confined unless `confine_files` is false,
/// TCP and abstract Unix sockets closed unless the network is open.
fn build_ruleset(profile: &Profile, confine_files: bool) -> Result<Option<OwnedFd>, String> {
    let failed = |e: landlock::RulesetError| format!("landlock: building the ruleset failed: {e}");
    let mut ruleset = Ruleset::default().set_compatibility(CompatLevel::BestEffort);
    if confine_files {
        // Signals out of the sandbox are refused, as bubblewrap's own pid
        // namespace does.
        ruleset = ruleset
            .handle_access(AccessFs::from_all(NEWEST))
            .and_then(|r| r.scope(Scope::Signal))
            .map_err(failed)?;
    }
    if !profile.network {
        // Without bubblewrap's network namespace, abstract Unix sockets
        // would reach daemons outside; TCP is also refused by seccomp.
        ruleset = ruleset
            .handle_access(AccessNet::from_all(NEWEST))
            .and_then(|r| r.scope(Scope::AbstractUnixSocket))
            .map_err(failed)?;
    }
    let mut created = ruleset.create().map_err(failed)?;
    if confine_files {
        created = add_file_rules(created, profile)?;
    }
    Ok(created.into())
}

/// Read and execute everywhere, everything under the writable trees, and
/// writes to the usual character devices.
fn add_file_rules(
    mut created: RulesetCreated,
    profile: &Profile,
) -> Result<RulesetCreated, String> {
    // Connecting to named Unix sockets stays open everywhere (the profile
    // never closes Unix sockets), on kernels that can restrict it.
    let read = AccessFs::from_read(NEWEST) | AccessFs::ResolveUnix;
    created = add_path(created, Path::new("/"), read)?;
    for (path, is_dir) in write_grants(profile) {
        let access = if is_dir {
            AccessFs::from_all(NEWEST)
        } else {
            AccessFs::from_file(NEWEST)
        };
        created = add_path(created, &path, access)?;
    }
    // No ioctl: on /dev/tty it would allow TIOCSTI, typing commands into
    // the user's shell.
    let device = AccessFs::ReadFile | AccessFs::WriteFile | AccessFs::Truncate;
    for device_path in WRITABLE_DEVICES.iter().map(Path::new) {
        // A container may lack /dev/tty: nothing to allow then.
        if device_path.exists() {
            created = add_path(created, device_path, device)?;
        }
    }
    Ok(created)
}

fn add_path(
    created: RulesetCreated,
    path: &Path,
    access: BitFlags<AccessFs>,
) -> Result<RulesetCreated, String> {
    let fd = PathFd::new(path).map_err(|e| {
        format!(
            "landlock: cannot open {} to allow it ({e}); it must exist",
            path.display()
        )
    })?;
    created
        .add_rule(PathBeneath::new(fd, access))
        .map_err(|e| format!("landlock: allowing {} failed: {e}", path.display()))
}

/// The seccomp program that refuses every socket but Unix ones with EACCES
/// (and io_uring, which can open sockets without the socket syscall).
fn network_filter() -> Result<BpfProgram, String> {
    let failed = |e: seccompiler::BackendError| format!("seccomp: building the filter failed: {e}");
    let arch = TargetArch::try_from(std::env::consts::ARCH).map_err(failed)?;
    let not_unix = || -> Result<Vec<SeccompRule>, seccompiler::BackendError> {
        let domain = SeccompCondition::new(
            0,
            SeccompCmpArgLen::Dword,
            SeccompCmpOp::Ne,
            libc::AF_UNIX as u64,
        )?;
        Ok(vec![SeccompRule::new(vec![domain])?])
    };
    let rules = BTreeMap::from([
        (libc::SYS_socket, not_unix().map_err(failed)?),
        (libc::SYS_socketpair, not_unix().map_err(failed)?),
        (libc::SYS_io_uring_setup, Vec::new()),
    ]);
    let filter = SeccompFilter::new(
        rules,
        SeccompAction::Allow,
        SeccompAction::Errno(libc::EACCES as u32),
        arch,
    )
    .map_err(failed)?;
    let program: BpfProgram = filter.try_into().map_err(failed)?;
    let program = refuse_x32(program);
    if program.len() > libc::BPF_MAXINSNS as usize {
        return Err("seccomp: the filter is too long".to_string());
    }
    Ok(program)
}

/// seccompiler checks the architecture but not the x32 bit, so on x86_64
/// `socket` called through the x32 ABI (number | 0x4000_0000) would slip
/// past. Prepended instructions refuse every x32 syscall with ENOSYS, as a
/// kernel without x32 does; BPF jumps are relative, so the rest still holds.
fn refuse_x32(program: BpfProgram) -> BpfProgram {
    if !cfg!(target_arch = "x86_64") {
        return program;
    }
    const X32_SYSCALL_BIT: u32 = 0x4000_0000;
    let insn = |code: u32, jt: u8, jf: u8, k: u32| sock_filter {
        code: code as u16,
        jt,
        jf,
        k,
    };
    let mut guarded = vec![
        // Load the syscall number (offset 0 of seccomp_data).
        insn(libc::BPF_LD | libc::BPF_W | libc::BPF_ABS, 0, 0, 0),
        // Below the x32 bit: skip the refusal.
        insn(
            libc::BPF_JMP | libc::BPF_JGE | libc::BPF_K,
            0,
            1,
            X32_SYSCALL_BIT,
        ),
        insn(
            libc::BPF_RET | libc::BPF_K,
            0,
            0,
            libc::SECCOMP_RET_ERRNO | libc::ENOSYS as u32,
        ),
    ];
    guarded.extend(program);
    guarded
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpListener;
    use std::os::unix::process::CommandExt;
    use std::process::{Command, Output};
    use std::sync::Arc;
    use tempfile::TempDir;

    fn profile(mode: Mode, writable: &[&Path], network: bool, tmp: &Path) -> Profile {
        Profile {
            mode,
            writable: writable.iter().map(|p| p.to_path_buf()).collect(),
            read_only: Vec::new(),
            readable: vec![PathBuf::from("/")],
            links: Vec::new(),
            hidden: Vec::new(),
            hide_globs: Vec::new(),
            env: Vec::new(),
            network,
            tmp: tmp.to_path_buf(),
            partial: Vec::new(),
        }
    }

    /// Runs `program args` confined by `profile`.
    fn run_in(profile: &Profile, program: &str, args: &[&str]) -> Output {
        let (prepared, _, _) = prepare(profile).expect("landlock should work on this kernel");
        run_prepared(Arc::new(prepared), program, args)
    }

    fn run_prepared(prepared: Arc<Prepared>, program: &str, args: &[&str]) -> Output {
        let mut command = Command::new(program);
        command.args(args);
        // SAFETY: `apply` makes only raw syscalls.
        unsafe { command.pre_exec(move || prepared.apply()) };
        command.output().expect("spawn")
    }

    fn sh(profile: &Profile, script: &str) -> Output {
        run_in(profile, "/bin/sh", &["-c", script])
    }

    fn stderr(output: &Output) -> String {
        String::from_utf8_lossy(&output.stderr).into_owned()
    }

    /// A workspace, a folder outside it and a private temp folder.
    struct Dirs {
        work: TempDir,
        outside: TempDir,
        tmp: TempDir,
    }

    fn dirs() -> Dirs {
        let new = || tempfile::tempdir().unwrap();
        Dirs {
            work: new(),
            outside: new(),
            tmp: new(),
        }
    }

    fn workspace(d: &Dirs, network: bool) -> Profile {
        profile(
            Mode::WorkspaceWrite,
            &[d.work.path()],
            network,
            d.tmp.path(),
        )
    }

    #[test]
    fn probe_reports_an_abi() {
        let abi = probe().expect("landlock and seccomp should be available");
        assert!(abi >= 1);
    }

    #[test]
    fn writes_inside_the_writable_root_succeed() {
        let d = dirs();
        let file = d.work.path().join("made");
        let out = sh(
            &workspace(&d, false),
            &format!("echo hi > {}", file.display()),
        );
        assert!(out.status.success(), "{}", stderr(&out));
        assert_eq!(std::fs::read_to_string(file).unwrap(), "hi\n");
    }

    #[test]
    fn writes_outside_are_denied() {
        let d = dirs();
        let file = d.outside.path().join("made");
        let out = sh(
            &workspace(&d, false),
            &format!("echo hi > {}", file.display()),
        );
        assert!(!out.status.success());
        assert!(
            stderr(&out).contains("Permission denied"),
            "{}",
            stderr(&out)
        );
        assert!(!file.exists());
    }

    #[test]
    fn read_only_mode_writes_only_the_temp_folder() {
        let d = dirs();
        let p = profile(Mode::ReadOnly, &[], false, d.tmp.path());
        let script = format!(
            "echo a > {}/t && echo b > {}/w",
            d.tmp.path().display(),
            d.work.path().display()
        );
        let out = sh(&p, &script);
        assert!(!out.status.success());
        assert!(
            stderr(&out).contains("Permission denied"),
            "{}",
            stderr(&out)
        );
        assert!(d.tmp.path().join("t").exists());
        assert!(!d.work.path().join("w").exists());
    }

    #[test]
    fn temp_folder_is_writable() {
        let d = dirs();
        let script = format!(
            "mkdir {0}/sub && echo x > {0}/sub/f",
            d.tmp.path().display()
        );
        let out = sh(&workspace(&d, false), &script);
        assert!(out.status.success(), "{}", stderr(&out));
    }

    #[test]
    fn usual_devices_are_writable_other_dev_paths_are_not() {
        let d = dirs();
        let out = sh(
            &workspace(&d, false),
            "echo x > /dev/null && head -c1 /dev/zero >/dev/null",
        );
        assert!(out.status.success(), "{}", stderr(&out));
        let out = sh(
            &workspace(&d, false),
            "echo x > /dev/shm/sluice-landlock-test",
        );
        assert!(!out.status.success());
        assert!(
            stderr(&out).contains("Permission denied"),
            "{}",
            stderr(&out)
        );
    }

    #[test]
    fn stdout_and_stderr_reopen_through_dev() {
        let d = dirs();
        let out = sh(
            &workspace(&d, false),
            "echo out > /dev/stdout; echo err > /dev/stderr",
        );
        assert!(out.status.success(), "{}", stderr(&out));
        assert_eq!(String::from_utf8_lossy(&out.stdout), "out\n");
    }

    #[test]
    fn reads_anywhere_work() {
        let d = dirs();
        let out = sh(&workspace(&d, false), "cat /etc/hostname");
        assert!(out.status.success(), "{}", stderr(&out));
        assert!(!out.stdout.is_empty());
    }

    #[test]
    fn symlink_out_of_the_root_does_not_open_a_write() {
        let d = dirs();
        let link = d.work.path().join("escape");
        std::os::unix::fs::symlink(d.outside.path(), &link).unwrap();
        let out = sh(
            &workspace(&d, false),
            &format!("echo x > {}/f", link.display()),
        );
        assert!(!out.status.success());
        assert!(
            stderr(&out).contains("Permission denied"),
            "{}",
            stderr(&out)
        );
        assert!(!d.outside.path().join("f").exists());
    }

    #[test]
    fn closed_network_refuses_inet_sockets_but_not_unix_ones() {
        let d = dirs();
        let p = workspace(&d, false);
        let inet = "import socket; socket.socket(socket.AF_INET)";
        let out = run_in(&p, "python3", &["-c", inet]);
        assert!(!out.status.success());
        assert!(stderr(&out).contains("PermissionError"), "{}", stderr(&out));
        let unix = "import socket; socket.socket(socket.AF_UNIX); socket.socketpair()";
        let out = run_in(&p, "python3", &["-c", unix]);
        assert!(out.status.success(), "{}", stderr(&out));
    }

    fn connect_script(listener: &TcpListener) -> String {
        let port = listener.local_addr().unwrap().port();
        format!("import socket; socket.create_connection(('127.0.0.1', {port}), timeout=5)")
    }

    #[test]
    fn open_network_connects_to_loopback() {
        let d = dirs();
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let out = run_in(
            &workspace(&d, true),
            "python3",
            &["-c", &connect_script(&listener)],
        );
        assert!(out.status.success(), "{}", stderr(&out));
    }

    #[test]
    fn landlock_alone_refuses_tcp_where_the_abi_can() {
        if landlock_abi().unwrap() < 4 {
            return; // TCP rights came with ABI 4; seccomp still closes it.
        }
        let d = dirs();
        let (prepared, _, _) = prepare(&workspace(&d, false)).unwrap();
        let ruleset_only = Prepared {
            filter: BpfProgram::new(),
            ..prepared
        };
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let script = connect_script(&listener);
        let out = run_prepared(Arc::new(ruleset_only), "python3", &["-c", &script]);
        assert!(stderr(&out).contains("PermissionError"), "{}", stderr(&out));
    }

    #[test]
    fn danger_full_access_writes_anywhere_but_network_stays_closed() {
        let d = dirs();
        let p = profile(Mode::DangerFullAccess, &[], false, d.tmp.path());
        let file = d.outside.path().join("made");
        let out = sh(&p, &format!("echo hi > {}", file.display()));
        assert!(out.status.success(), "{}", stderr(&out));
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let out = run_in(&p, "python3", &["-c", &connect_script(&listener)]);
        assert!(stderr(&out).contains("PermissionError"), "{}", stderr(&out));
    }

    #[test]
    fn one_prepared_confines_many_children() {
        let d = dirs();
        let (prepared, _, _) = prepare(&workspace(&d, false)).unwrap();
        let prepared = Arc::new(prepared);
        for _ in 0..3 {
            let script = format!("echo x > {}/f", d.outside.path().display());
            let out = run_prepared(prepared.clone(), "/bin/sh", &["-c", &script]);
            assert!(!out.status.success());
        }
    }

    #[test]
    fn read_only_paths_inside_a_writable_root_stay_read_only_and_the_rest_writable() {
        let d = dirs();
        let root = d.work.path();
        std::fs::create_dir_all(root.join(".git/hooks")).unwrap();
        std::fs::create_dir_all(root.join("src")).unwrap();
        std::fs::write(root.join("top.txt"), "").unwrap();
        std::fs::write(root.join(".git/HEAD"), "").unwrap();
        let mut p = workspace(&d, false);
        p.read_only = vec![root.join(".git/hooks"), root.join(".sluice")];
        let (prepared, enforcement, _) = prepare(&p).unwrap();
        assert_eq!(enforcement, Enforcement::Full);
        let prepared = Arc::new(prepared);
        let script = format!(
            "cd {}; echo a > src/a; echo b > top.txt; echo c > .git/HEAD; echo h > .git/hooks/pre-commit; \
             mkdir .sluice; echo n > new.txt; true",
            root.display()
        );
        let out = run_prepared(prepared, "/bin/sh", &["-c", &script]);
        assert_eq!(std::fs::read_to_string(root.join("src/a")).unwrap(), "a\n");
        assert_eq!(
            std::fs::read_to_string(root.join("top.txt")).unwrap(),
            "b\n"
        );
        assert_eq!(
            std::fs::read_to_string(root.join(".git/HEAD")).unwrap(),
            "c\n"
        );
        assert!(
            !root.join(".git/hooks/pre-commit").exists(),
            "{}",
            stderr(&out)
        );
        assert!(!root.join(".sluice").exists());
        // The price: nothing new at the top of the split tree.
        assert!(!root.join("new.txt").exists());
    }

    #[test]
    fn read_only_outside_writable_roots_stays_full() {
        let d = dirs();
        let mut p = workspace(&d, false);
        p.read_only = vec![d.outside.path().join("x")];
        assert_eq!(prepare(&p).unwrap().1, Enforcement::Full);
    }
}
