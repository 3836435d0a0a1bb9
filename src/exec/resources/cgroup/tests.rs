//! Where cgroups are found, on fake trees (every layout, cgroup v2
//! delegated among them, which this machine cannot show), and on this
//! machine for real: made, limited, counted, pooled, removed.

use super::find::*;
use super::*;

/// This machine's layout: v1 controllers, a v2 hierarchy with none of
/// them (systemd's hybrid), sluice in a memory cgroup of its own.
const HYBRID: &str = "\
31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
39 31 0:36 / /sys/fs/cgroup/pids rw,relatime - cgroup cgroup rw,pids
33 31 0:30 / /sys/fs/cgroup/cpu,cpuacct rw,relatime - cgroup cgroup rw,cpu,cpuacct
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
";
const HYBRID_CGROUPS: &str = "8:pids:/\n4:memory:/process_api/abc\n2:cpu,cpuacct:/\n0::/\n";

/// A pure v2 machine (systemd), sluice in a user's terminal scope.
const UNIFIED: &str = "29 23 0:26 / /sys/fs/cgroup rw,nosuid - cgroup2 cgroup2 rw,nsdelegate\n";
const SCOPE: &str = "/user.slice/user-1000.slice/user@1000.service/app.slice/term.scope";

/// A fake cgroup tree under a temporary root: each folder with the files
/// the test writes.
struct Tree(tempfile::TempDir);

impl Tree {
    fn new() -> Tree {
        Tree(tempfile::tempdir().unwrap())
    }

    fn put(&self, path: &str, text: &str) -> &Tree {
        let p = self.0.path().join(path.trim_start_matches('/'));
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
        self
    }

    fn host(&self, mountinfo: &str, cgroups: &str) -> Host {
        Host {
            cgroups: cgroups.into(),
            mountinfo: mountinfo.into(),
            root: self.0.path().to_path_buf(),
        }
    }

    fn at(&self, path: &str) -> PathBuf {
        self.0.path().join(path.trim_start_matches('/'))
    }
}

#[test]
fn mountinfo_gives_every_cgroup_mount_with_its_controllers() {
    let all = mounts(HYBRID);
    let points: Vec<&Path> = all.iter().map(|m| m.point.as_path()).collect();
    assert_eq!(
        points,
        [
            "/sys/fs/cgroup/memory",
            "/sys/fs/cgroup/pids",
            "/sys/fs/cgroup/cpu,cpuacct",
            "/sys/fs/cgroup/unified"
        ]
        .map(Path::new)
    );
    assert!(all[3].v2 && !all[0].v2);
    assert_eq!(all[2].options, ["rw", "cpu", "cpuacct"]);
    let spaced = mounts("1 2 0:3 / /mnt/my\\040cgroups rw - cgroup2 cgroup2 rw\n");
    assert_eq!(spaced[0].point, Path::new("/mnt/my cgroups"));
}

#[test]
fn on_a_hybrid_machine_v2_offers_nothing_and_v1_gives_sluices_own_cgroups() {
    let tree = Tree::new();
    tree.put("/sys/fs/cgroup/unified/cgroup.subtree_control", "")
        .put("/sys/fs/cgroup/unified/cgroup.procs", "")
        .put("/sys/fs/cgroup/memory/process_api/abc/cgroup.procs", "")
        .put("/sys/fs/cgroup/pids/cgroup.procs", "");
    let host = tree.host(HYBRID, HYBRID_CGROUPS);
    let why = unified(&host, Controller::Memory).unwrap_err();
    assert!(
        why.contains("memory controller") && why.contains("Delegate=yes"),
        "{why}"
    );
    assert_eq!(
        legacy(&host, Controller::Memory).unwrap(),
        Parent {
            dir: tree.at("/sys/fs/cgroup/memory/process_api/abc"),
            version: Version::V1
        }
    );
    assert_eq!(
        legacy(&host, Controller::Pids).unwrap().dir,
        tree.at("/sys/fs/cgroup/pids")
    );
}

#[test]
fn a_delegated_v2_parent_offering_both_controllers_is_where_commands_cgroups_go() {
    let tree = Tree::new();
    let slice = "/sys/fs/cgroup/user.slice/user-1000.slice/user@1000.service/app.slice";
    tree.put(
        &format!("{slice}/cgroup.subtree_control"),
        "cpu memory pids\n",
    )
    .put(&format!("{slice}/cgroup.procs"), "")
    .put(&format!("/sys/fs/cgroup{SCOPE}/cgroup.subtree_control"), "")
    .put(&format!("/sys/fs/cgroup{SCOPE}/cgroup.procs"), "42\n");
    let host = tree.host(UNIFIED, &format!("0::{SCOPE}\n"));
    for c in [Controller::Memory, Controller::Pids] {
        assert_eq!(
            unified(&host, c).unwrap(),
            Parent {
                dir: tree.at(slice),
                version: Version::V2
            }
        );
    }
    // No v1 hierarchy there at all.
    assert!(legacy(&host, Controller::Memory)
        .unwrap_err()
        .contains("no cgroup v1 memory hierarchy"));
}

#[test]
fn sluices_own_v2_cgroup_serves_when_it_gives_children_the_controller() {
    // A container's cgroup namespace: sluice at its root, controllers on.
    let tree = Tree::new();
    tree.put("/sys/fs/cgroup/cgroup.subtree_control", "memory pids")
        .put("/sys/fs/cgroup/cgroup.procs", "1\n");
    let host = tree.host(UNIFIED, "0::/\n");
    assert_eq!(
        unified(&host, Controller::Pids).unwrap().dir,
        tree.at("/sys/fs/cgroup")
    );
    // One controller alone delegated: the other is not had there.
    tree.put("/sys/fs/cgroup/cgroup.subtree_control", "pids");
    assert!(unified(&host, Controller::Memory).is_err());
    assert!(unified(&host, Controller::Pids).is_ok());
}

#[test]
fn a_parent_sluice_may_not_write_or_that_offers_nothing_is_not_used() {
    use std::os::unix::fs::PermissionsExt;
    let tree = Tree::new();
    let slice = "/sys/fs/cgroup/app.slice";
    tree.put(&format!("{slice}/cgroup.subtree_control"), "memory pids")
        .put(&format!("{slice}/cgroup.procs",), "")
        .put(&format!("{slice}/term.scope/cgroup.subtree_control"), "")
        .put(&format!("{slice}/term.scope/cgroup.procs"), "");
    let host = tree.host(UNIFIED, "0::/app.slice/term.scope\n");
    assert!(unified(&host, Controller::Memory).is_ok());
    let procs = tree.at(&format!("{slice}/cgroup.procs"));
    std::fs::set_permissions(&procs, std::fs::Permissions::from_mode(0o444)).unwrap();
    let root = nix::unistd::getuid().is_root();
    // Root writes whatever the bits say; a user is held to them.
    assert_eq!(unified(&host, Controller::Memory).is_ok(), root);
    std::fs::set_permissions(&procs, std::fs::Permissions::from_mode(0o644)).unwrap();
    tree.put(&format!("{slice}/cgroup.subtree_control"), "cpu io");
    assert!(unified(&host, Controller::Memory).is_err());
    // The process is in a cgroup v2 the mount does not show.
    let host = tree.host(
        "1 2 0:3 /other /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n",
        "0::/app.slice/term.scope\n",
    );
    assert!(unified(&host, Controller::Memory)
        .unwrap_err()
        .contains("outside the mount"));
}

/// This machine (and CI, the same kind): root on a hybrid layout, so
/// memory and pids cgroups are v1 ones sluice makes under its own.
fn this_machine() -> &'static Found {
    let found = found();
    for (c, r) in [("memory", &found.memory), ("pids", &found.pids)] {
        if let Err(why) = r {
            panic!(
                "this test needs a {c} cgroup sluice can make (root on a cgroup v1 or hybrid machine, or a \
                 delegated cgroup v2): {why}"
            );
        }
    }
    found
}

fn read(dir: &Path, file: &str) -> String {
    std::fs::read_to_string(dir.join(file))
        .unwrap()
        .trim()
        .to_string()
}

#[test]
fn a_lease_writes_its_limits_counts_from_zero_and_goes_back_to_the_pool() {
    let found = this_machine();
    let mut l = ResourceLimits::default();
    l.set(Kind::MemoryMb, 64);
    l.set(Kind::Pids, 16);
    let mut partial = Vec::new();
    let lease = lease_in(found, &l, &mut partial).expect("a lease");
    assert!(partial.is_empty(), "{partial:?}");
    assert!(lease.mechanism(Kind::MemoryMb).is_some());
    assert!(lease.mechanism(Kind::Pids).is_some());
    assert_eq!(lease.mechanism(Kind::CpuSeconds), None);
    let dirs: Vec<PathBuf> = lease.members().iter().map(|m| m.dir.clone()).collect();
    let memory = lease
        .members()
        .iter()
        .find(|m| m.has(Controller::Memory))
        .unwrap();
    let pids = lease
        .members()
        .iter()
        .find(|m| m.has(Controller::Pids))
        .unwrap();
    let (mfile, pfile) = (
        Controller::Memory.limit_file(memory.version),
        Controller::Pids.limit_file(pids.version),
    );
    assert_eq!(read(&memory.dir, mfile), (64u64 << 20).to_string());
    assert_eq!(read(&pids.dir, pfile), "16");
    assert_eq!(lease.procs().count(), dirs.len());
    assert_eq!(lease.settle(), Counts::default());
    // Back in the pool, still there, its limits kept until the next lease.
    assert!(dirs.iter().all(|d| d.is_dir()));
    assert!(pool()
        .iter()
        .any(|s| s.members.iter().any(|m| dirs.contains(&m.dir))));
    tidy();
    assert!(dirs.iter().all(|d| !d.exists()), "tidy removes pooled sets");
}

#[test]
fn a_limit_left_out_is_written_as_none_when_a_pooled_set_is_reused() {
    let found = this_machine();
    let mut tight = ResourceLimits::default();
    tight.set(Kind::Pids, 9);
    let mut partial = Vec::new();
    let lease = lease_in(found, &tight, &mut partial).unwrap();
    assert_eq!(
        lease.mechanism(Kind::MemoryMb),
        None,
        "no memory limit asked"
    );
    let pids = lease
        .members()
        .iter()
        .find(|m| m.has(Controller::Pids))
        .unwrap();
    let dir = pids.dir.clone();
    assert_eq!(read(&dir, "pids.max"), "9");
    lease.settle();
    let mut none = ResourceLimits::default();
    none.set(Kind::MemoryMb, 128);
    // Another test's lease may take this set first; ours is then fresh.
    let lease = lease_in(found, &none, &mut partial).unwrap();
    let pids = lease
        .members()
        .iter()
        .find(|m| m.has(Controller::Pids))
        .unwrap();
    assert_eq!(read(&pids.dir, "pids.max"), "max");
    drop(lease);
    remove_all(&[dir], Duration::from_secs(2));
}

#[test]
fn a_dropped_lease_is_removed_and_a_dead_sluices_sets_are_swept() {
    let found = this_machine();
    let mut l = ResourceLimits::default();
    l.set(Kind::Pids, 20);
    let lease = lease_in(found, &l, &mut Vec::new()).unwrap();
    let dirs: Vec<PathBuf> = lease.members().iter().map(|m| m.dir.clone()).collect();
    drop(lease);
    let until = std::time::Instant::now() + Duration::from_secs(5);
    while dirs.iter().any(|d| d.exists()) && std::time::Instant::now() < until {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(dirs.iter().all(|d| !d.exists()), "{dirs:?}");
    // A pid no process has (beyond the kernel's pid_max).
    let parent = found.pids.as_ref().unwrap().dir.clone();
    let stale = parent.join("sluice-99999999-7");
    std::fs::create_dir(&stale).unwrap();
    sweep(&parent);
    assert!(!stale.exists());
}
