//! What a run's file flows wrote is recorded with each write (the SHA-256
//! of the bytes each file now holds, or that it was removed), never shown
//! to the script; `sluice resume --check-workspace` refuses to continue a
//! run on a workspace that no longer holds it, naming the files.

mod common;

use common::sluice_in as sluice;
use common::*;

/// The script of a run that writes, edits, patches (adding one file,
/// deleting another), then does `end_with`.
fn script(end_with: &str) -> String {
    format!(
        "local w = assert(sluice.write{{path = 'a.txt', content = 'one\\n'}})\n\
         local keys = {{}}\nfor k in pairs(w) do keys[#keys + 1] = k end\ntable.sort(keys)\n\
         print(table.concat(keys, ','))\n\
         assert(sluice.edit{{path = 'a.txt', oldString = 'one', newString = 'two'}})\n\
         assert(sluice.apply_patch{{input = '*** Begin Patch\\n*** Add File: b.txt\\n+bee\\n*** Delete File: gone.txt\\n*** End Patch'}})\n\
         {end_with}\n"
    )
}

/// That run, failing at its end so it can be resumed; what it printed.
fn failed_run(ws: &Workspace) -> Run {
    std::fs::write(ws.file("gone.txt"), "old\n").unwrap();
    let path = script_file(ws.path(), &script("error('stop here')"));
    sluice(ws.path(), &["run", path.to_str().unwrap()])
}

/// `sluice resume last` of the script fixed to go on, with `flags`.
fn resume_fixed(ws: &Workspace, flags: &[&str]) -> Run {
    let fixed = script_file(ws.path(), &script("print('went on')"));
    let mut args = vec!["resume", "last", "--script", fixed.to_str().unwrap()];
    args.extend(flags);
    sluice(ws.path(), &args)
}

#[test]
fn resume_check_workspace_refuses_a_tree_that_no_longer_holds_what_the_run_wrote_naming_the_files()
{
    let ws = workspace();
    let first = failed_run(&ws);
    assert_eq!(first.code, 1, "{}", first.stderr);
    // The script saw the write's output as it always was.
    assert_eq!(first.stdout, "bytesWritten,created\n");
    assert_eq!(std::fs::read_to_string(ws.file("a.txt")).unwrap(), "two\n");

    // Each file changed another way: the edited one, the added one, and
    // the deleted one back.
    std::fs::write(ws.file("a.txt"), "tampered\n").unwrap();
    std::fs::remove_file(ws.file("b.txt")).unwrap();
    std::fs::write(ws.file("gone.txt"), "back\n").unwrap();
    let refused = resume_fixed(&ws, &["--check-workspace"]);
    assert_eq!(refused.code, 2, "{}", refused.stderr);
    for said in [
        "a.txt holds other bytes",
        "b.txt is missing",
        "gone.txt exists again",
        "so the run is not continued",
    ] {
        assert!(refused.stderr.contains(said), "{said}: {}", refused.stderr);
    }
    assert!(!refused.stdout.contains("went on"));

    // Put back as the run left them: it resumes, and a replayed write
    // shows the script the same output as live.
    std::fs::write(ws.file("a.txt"), "two\n").unwrap();
    std::fs::write(ws.file("b.txt"), "bee\n").unwrap();
    std::fs::remove_file(ws.file("gone.txt")).unwrap();
    let resumed = resume_fixed(&ws, &["--check-workspace"]);
    assert_eq!(resumed.code, 0, "{}", resumed.stderr);
    assert_eq!(resumed.stdout, "bytesWritten,created\nwent on\n");
}

#[test]
fn without_check_workspace_a_resume_goes_on_whatever_the_tree_holds() {
    let ws = workspace();
    assert_eq!(failed_run(&ws).code, 1);
    std::fs::write(ws.file("a.txt"), "tampered\n").unwrap();
    let resumed = resume_fixed(&ws, &[]);
    assert_eq!(resumed.code, 0, "{}", resumed.stderr);
}
