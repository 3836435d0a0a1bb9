use super::*;
use std::os::unix::process::CommandExt;

fn limits(pairs: &[(Kind, u64)]) -> ResourceLimits {
    let mut l = ResourceLimits::default();
    for &(k, v) in pairs {
        l.set(k, v);
    }
    l
}

fn settled(pairs: &[(Kind, u64)], by: &[(Kind, Mechanism)]) -> Settled {
    let mut mechanisms = [None; 4];
    for &(k, m) in by {
        mechanisms[k.index()] = Some(m);
    }
    Settled {
        limits: limits(pairs),
        mechanisms,
        partial: Vec::new(),
        oom_kills: 0,
        fork_failures: 0,
    }
}

fn named(k: Kind) -> String {
    format!("policy {}.lua", k.name())
}

#[test]
fn the_strictest_value_of_each_limit_wins() {
    let a = limits(&[(Kind::MemoryMb, 4096), (Kind::Pids, 100)]);
    let b = limits(&[(Kind::MemoryMb, 64), (Kind::CpuSeconds, 9)]);
    let both = a.strictest(b);
    assert_eq!(
        both.iter().collect::<Vec<_>>(),
        [
            (Kind::MemoryMb, 64),
            (Kind::Pids, 100),
            (Kind::CpuSeconds, 9)
        ]
    );
    assert!(ResourceLimits::default().is_empty());
    assert_eq!(ResourceLimits::default().strictest(a), a);
}

#[test]
fn rlimits_cross_to_a_helper_and_back_and_nothing_else_does() {
    let mut set = rlimit::Set::default();
    let mut partial = Vec::new();
    rlimit::add(&mut set, Kind::FileSizeMb, 3, &mut partial);
    rlimit::add(&mut set, Kind::CpuSeconds, 7, &mut partial);
    let bytes = set.encode();
    let step = ChildStep::with_rlimits(&[5, 6], &bytes).unwrap();
    assert_eq!(step.fds(), [5, 6]);
    assert_eq!(step.encoded_rlimits(), bytes);
    assert!(
        ChildStep::with_rlimits(&[], &[]).is_some(),
        "no rlimits at all"
    );
    // A resource sluice never sets, a torn item, too many descriptors.
    let mut other = bytes.clone();
    other[..4].copy_from_slice(&7u32.to_le_bytes()); // RLIMIT_NOFILE
    assert!(ChildStep::with_rlimits(&[], &other).is_none());
    assert!(ChildStep::with_rlimits(&[], &bytes[..bytes.len() - 1]).is_none());
    assert!(ChildStep::with_rlimits(&[1, 2, 3], &bytes).is_none());
}

#[test]
fn a_child_that_applies_the_step_runs_under_its_rlimits_and_cannot_raise_them() {
    let mut set = rlimit::Set::default();
    let mut partial = Vec::new();
    assert_eq!(
        rlimit::add(&mut set, Kind::FileSizeMb, 2, &mut partial),
        Mechanism::Rlimit
    );
    rlimit::add(&mut set, Kind::CpuSeconds, 5, &mut partial);
    rlimit::add(&mut set, Kind::MemoryMb, 512, &mut partial);
    let step = ChildStep {
        rlimits: set,
        ..ChildStep::default()
    };
    // `ulimit -f` counts 512-byte blocks in dash; -H reads the hard limit.
    let mut cmd = std::process::Command::new("/bin/sh");
    cmd.args([
        "-c",
        "ulimit -f; ulimit -t; ulimit -H -t; ulimit -d; ulimit -f 999999 2>/dev/null || echo refused",
    ]);
    // SAFETY: the step makes raw system calls alone.
    unsafe {
        cmd.pre_exec(move || step.apply().map_err(std::io::Error::from_raw_os_error));
    }
    let out = cmd.output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines, ["4096", "5", "6", "524288", "refused"], "{text}");
}

#[test]
fn a_memory_cgroup_that_killed_is_a_hit_of_memory_naming_the_policy_to_raise() {
    let mut s = settled(
        &[(Kind::MemoryMb, 64)],
        &[(Kind::MemoryMb, Mechanism::CgroupV1)],
    );
    assert!(
        s.report(137, "Killed", &named).hit.is_empty(),
        "no kill counted"
    );
    s.oom_kills = 1;
    let r = s.report(137, "Killed", &named);
    assert_eq!(r.hit.len(), 1);
    assert_eq!(r.hit[0].limit, "memoryMb");
    assert!(r.hit[0].how.contains("OOM killer"), "{:?}", r.hit);
    let notice = r.notice.unwrap();
    assert!(
        notice.contains("limits.memoryMb = 64") && notice.contains("policy memoryMb.lua"),
        "{notice}"
    );
    assert_eq!(r.enforcement["memoryMb"], Mechanism::CgroupV1);
    assert_eq!(r.values["memoryMb"], 64);
}

#[test]
fn an_allocation_failure_under_rlimit_data_is_a_hit_only_when_the_command_failed() {
    let s = settled(
        &[(Kind::MemoryMb, 64)],
        &[(Kind::MemoryMb, Mechanism::Rlimit)],
    );
    let hit = s.report(1, "Traceback...\nMemoryError\n", &named).hit;
    assert_eq!(hit[0].limit, "memoryMb");
    assert!(hit[0].how.contains("MemoryError"), "{hit:?}");
    assert!(s.report(0, "MemoryError", &named).hit.is_empty());
}

#[test]
fn refused_forks_are_a_hit_of_pids_by_count_or_by_words() {
    let mut s = settled(&[(Kind::Pids, 16)], &[(Kind::Pids, Mechanism::CgroupV2)]);
    s.fork_failures = 3;
    let hit = s.report(0, "", &named).hit;
    assert!(hit[0].how.contains("refused 3 fork(s)"), "{hit:?}");
    let s = settled(&[(Kind::Pids, 16)], &[(Kind::Pids, Mechanism::Rlimit)]);
    let said = "sh: 1: Cannot fork\n";
    assert_eq!(s.report(2, said, &named).hit[0].limit, "pids");
    // Not enforced: nothing can be hit, whatever was said.
    let s = settled(&[(Kind::Pids, 16)], &[(Kind::Pids, Mechanism::None)]);
    assert!(s.report(2, said, &named).hit.is_empty());
}

#[test]
fn sigxcpu_and_sigxfsz_and_efbig_are_hits_of_their_limits() {
    let s = settled(
        &[(Kind::CpuSeconds, 1), (Kind::FileSizeMb, 1)],
        &[
            (Kind::CpuSeconds, Mechanism::Rlimit),
            (Kind::FileSizeMb, Mechanism::Rlimit),
        ],
    );
    let names = |status, said| -> Vec<&'static str> {
        s.report(status, said, &named)
            .hit
            .iter()
            .map(|h| h.limit)
            .collect()
    };
    assert_eq!(names(128 + 24, ""), ["cpuSeconds"]);
    assert_eq!(names(128 + 25, ""), ["fileSizeMb"]);
    assert_eq!(
        names(1, "OSError: [Errno 27] File too large"),
        ["fileSizeMb"]
    );
    assert_eq!(
        names(0, "File size limit exceeded (core dumped)"),
        ["fileSizeMb"]
    );
    assert!(names(0, "").is_empty());
    assert!(names(1, "error").is_empty());
    // A limit not set is never hit.
    let none = settled(&[], &[]);
    assert!(none.report(128 + 24, "", &named).hit.is_empty());
}

#[test]
fn a_report_says_each_limit_and_what_enforced_it_in_its_json() {
    let mut s = settled(
        &[(Kind::MemoryMb, 2048), (Kind::FileSizeMb, 10)],
        &[
            (Kind::MemoryMb, Mechanism::CgroupV1),
            (Kind::FileSizeMb, Mechanism::Rlimit),
        ],
    );
    s.partial.push("why".into());
    let json = serde_json::to_value(s.report(0, "", &named)).unwrap();
    assert_eq!(
        json,
        serde_json::json!({
            "memoryMb": 2048,
            "fileSizeMb": 10,
            "enforcement": {"memoryMb": "cgroup-v1", "fileSizeMb": "rlimit"},
            "partial": ["why"],
        })
    );
}

#[test]
fn without_cgroups_memory_falls_to_rlimit_data_and_pids_to_nothing_for_root() {
    let mut set = rlimit::Set::default();
    let mut partial = Vec::new();
    assert_eq!(
        rlimit::add(&mut set, Kind::MemoryMb, 64, &mut partial),
        Mechanism::Rlimit
    );
    let pids = rlimit::add(&mut set, Kind::Pids, 64, &mut partial);
    if nix::unistd::getuid().is_root() {
        assert_eq!(pids, Mechanism::None);
        assert!(partial[1].contains("not enforced"), "{partial:?}");
    } else {
        assert_eq!(pids, Mechanism::Rlimit);
        assert!(partial[1].contains("every process"), "{partial:?}");
    }
    assert!(partial[0].contains("RLIMIT_DATA"), "{partial:?}");
}
