use super::*;
use std::fs;
use std::io::Read;
use std::os::unix::fs::symlink;
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

/// A temporary folder, canonical: `inside/` holds `f` ("inside"),
/// `outside/` holds `f` ("outside"), `link` is a link to `outside`.
fn tree() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let root = fs::canonicalize(dir.path()).unwrap();
    fs::create_dir(root.join("inside")).unwrap();
    fs::write(root.join("inside/f"), "inside").unwrap();
    fs::create_dir(root.join("outside")).unwrap();
    fs::write(root.join("outside/f"), "outside").unwrap();
    symlink(root.join("outside"), root.join("link")).unwrap();
    (dir, root)
}

fn read_with(path: &Path, how: How) -> io::Result<String> {
    let fd = open_path(path, OFlag::O_RDONLY | OFlag::O_NONBLOCK, how)?;
    let mut s = String::new();
    File::from(fd).read_to_string(&mut s)?;
    Ok(s)
}

const BOTH: [How; 2] = [How::Openat2, How::Walk];

#[test]
fn a_path_without_links_opens_in_both_ways() {
    let (_d, root) = tree();
    for how in BOTH {
        assert_eq!(
            read_with(&root.join("inside/f"), how).unwrap(),
            "inside",
            "{how:?}"
        );
        let dir = open_path(
            &root.join("inside"),
            OFlag::O_PATH | OFlag::O_DIRECTORY,
            how,
        );
        assert!(dir.is_ok(), "{how:?}");
    }
}

#[test]
fn a_link_anywhere_on_the_path_is_changed_in_both_ways() {
    let (_d, root) = tree();
    symlink(root.join("outside/f"), root.join("inside/file-link")).unwrap();
    for how in BOTH {
        for p in ["link/f", "inside/file-link", "link"] {
            let e = read_with(&root.join(p), how).unwrap_err();
            assert!(changed(&e), "{how:?} {p}: {e}");
        }
        let e = open_path(&root.join("link"), OFlag::O_PATH, how).unwrap_err();
        assert!(
            changed(&e) || e.raw_os_error() == Some(nix::libc::ELOOP),
            "{how:?}: {e}"
        );
    }
    assert!(changed(&metadata(&root.join("link")).unwrap_err()));
    assert!(changed(&metadata(&root.join("link/f")).unwrap_err()));
}

#[test]
fn missing_and_not_a_folder_keep_their_own_errors_in_both_ways() {
    let (_d, root) = tree();
    for how in BOTH {
        let e = read_with(&root.join("inside/nope"), how).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::NotFound, "{how:?}");
        let e = read_with(&root.join("inside/f/x"), how).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::NotADirectory, "{how:?}");
    }
}

#[test]
fn the_entry_of_a_link_is_the_link_itself() {
    let (_d, root) = tree();
    let held = Held::default();
    assert!(held
        .entry(&root.join("link"))
        .unwrap()
        .unwrap()
        .is_symlink());
    assert!(held.entry(&root.join("inside/none")).unwrap().is_none());
    assert!(held.entry(&root.join("nowhere/none")).unwrap().is_none());
    assert!(changed(&held.entry(&root.join("link/f")).unwrap_err()));
    assert!(changed(&held.metadata(&root.join("link")).unwrap_err()));
}

#[test]
fn make_all_makes_the_missing_folders_but_never_through_a_link() {
    let (_d, root) = tree();
    Folder::make_all(&root.join("inside/a/b")).unwrap();
    assert!(root.join("inside/a/b").is_dir());
    let e = Folder::make_all(&root.join("link/new/deeper")).unwrap_err();
    assert!(changed(&e), "{e}");
    assert!(!root.join("outside/new").exists());
}

#[test]
fn a_folder_held_stays_that_folder_when_its_path_is_swapped() {
    let (_d, root) = tree();
    let held = Folder::open(&root.join("inside")).unwrap();
    fs::rename(root.join("inside"), root.join("moved")).unwrap();
    symlink(root.join("outside"), root.join("inside")).unwrap();
    let mut f = held.create_new(OsStr::new("new"), 0o644).unwrap();
    std::io::Write::write_all(&mut f, b"x").unwrap();
    held.rename(OsStr::new("new"), &held, OsStr::new("g"))
        .unwrap();
    assert!(root.join("moved/g").exists());
    assert!(!root.join("outside/g").exists());
    let names: Vec<_> = held
        .entries()
        .unwrap()
        .into_iter()
        .map(|e| e.name)
        .collect();
    assert!(names.contains(&OsString::from("g")) && names.contains(&OsString::from("f")));
}

#[test]
fn listing_says_what_each_entry_is_without_following_links() {
    let (_d, root) = tree();
    let mut got: Vec<(String, Kind)> = Folder::open(&root)
        .unwrap()
        .entries()
        .unwrap()
        .into_iter()
        .map(|e| (e.name.to_string_lossy().into_owned(), e.kind))
        .collect();
    got.sort_by(|a, b| a.0.cmp(&b.0));
    assert_eq!(
        got,
        vec![
            ("inside".into(), Kind::Dir),
            ("link".into(), Kind::Symlink),
            ("outside".into(), Kind::Dir),
        ]
    );
}

/// The race of the issue: a folder on the checked path is swapped with a
/// link to another folder, over and over (`renameat2(RENAME_EXCHANGE)`),
/// while the path is opened. Every open reads the checked folder's file
/// or fails as changed; none reads the other one. Both ways of opening.
#[test]
fn a_folder_swapped_with_a_link_in_a_loop_is_never_followed() {
    for how in BOTH {
        let (_d, root) = tree();
        let stop = Arc::new(AtomicBool::new(false));
        let swapper = {
            let (stop, root) = (stop.clone(), root.clone());
            std::thread::spawn(move || {
                let mut swaps = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    let swapped = fcntl::renameat2(
                        None,
                        &root.join("inside"),
                        None,
                        &root.join("link"),
                        fcntl::RenameFlags::RENAME_EXCHANGE,
                    );
                    if swapped.is_err() {
                        break;
                    }
                    swaps += 1;
                }
                swaps
            })
        };
        let (mut inside, mut refused, mut followed) = (0, 0, 0);
        let until = Instant::now() + Duration::from_millis(700);
        while Instant::now() < until {
            // What the code before this module did: it reads the other
            // folder's file, so the race is real.
            if fs::read_to_string(root.join("inside/f")).is_ok_and(|s| s == "outside") {
                followed += 1;
            }
            match read_with(&root.join("inside/f"), how) {
                Ok(s) => {
                    assert_eq!(s, "inside", "{how:?} read through the link");
                    inside += 1;
                }
                Err(e) if changed(&e) => refused += 1,
                Err(e) => panic!("{how:?}: {e}"),
            }
        }
        stop.store(true, Ordering::Relaxed);
        let swaps = swapper.join().unwrap();
        assert!(swaps > 100, "{how:?}: the swapper ran {swaps} times");
        assert!(
            inside > 0 && refused > 0,
            "{how:?}: {inside} read, {refused} refused"
        );
        assert!(
            followed > 0,
            "{how:?}: a plain open never followed the link"
        );
    }
}

/// A call holds each folder it opened: after its path is swapped for a
/// link, its later steps (a rename, a file put back) still act there, so
/// a multi-step change cannot fail halfway or land elsewhere.
#[test]
fn a_call_s_later_steps_act_in_the_folder_it_held_first() {
    let (_d, root) = tree();
    let held = Held::default();
    let f = root.join("inside/f");
    assert!(held.metadata(&f).unwrap().unwrap().is_file());
    fs::rename(root.join("inside"), root.join("moved")).unwrap();
    symlink(root.join("outside"), root.join("inside")).unwrap();
    held.rename(&f, &root.join("inside/g")).unwrap();
    assert!(root.join("moved/g").exists());
    assert!(!root.join("outside/g").exists());
    // A folder first opened now is refused: its path leads through a link.
    let fresh = Held::default();
    assert!(changed(&fresh.metadata(&f).unwrap_err()));
}
