//! The parsers against real runners' output (fixtures/README.txt says how
//! each was made), and the detection rules against outputs made to fool
//! them.

use super::*;

/// A fixture's stdout and stderr.
macro_rules! fixture {
    ($name:literal) => {
        (
            include_str!(concat!("fixtures/", $name, ".stdout.txt")),
            include_str!(concat!("fixtures/", $name, ".stderr.txt")),
        )
    };
}

/// Every fixture, for the checks that hold for all of them.
const ALL: &[(&str, (&str, &str))] = &[
    ("pytest-fail", fixture!("pytest-fail")),
    ("pytest-fail-q", fixture!("pytest-fail-q")),
    ("pytest-fail-v", fixture!("pytest-fail-v")),
    ("pytest-fail-ra", fixture!("pytest-fail-ra")),
    ("pytest7-fail", fixture!("pytest7-fail")),
    ("pytest-pass", fixture!("pytest-pass")),
    ("pytest-pass-q", fixture!("pytest-pass-q")),
    ("pytest-missing-test", fixture!("pytest-missing-test")),
    ("pytest-missing-file", fixture!("pytest-missing-file")),
    ("pytest-missing-module", fixture!("pytest-missing-module")),
    ("pytest-no-tests", fixture!("pytest-no-tests")),
    ("unittest-fail", fixture!("unittest-fail")),
    ("unittest-fail-v", fixture!("unittest-fail-v")),
    (
        "unittest-missing-module",
        fixture!("unittest-missing-module"),
    ),
    ("unittest-pass", fixture!("unittest-pass")),
    ("libtest-fail", fixture!("libtest-fail")),
    ("libtest-fail-backtrace", fixture!("libtest-fail-backtrace")),
    ("libtest-pass", fixture!("libtest-pass")),
    ("nextest-fail", fixture!("nextest-fail")),
    ("nextest-pass", fixture!("nextest-pass")),
    ("go-fail", fixture!("go-fail")),
    ("go-fail-v", fixture!("go-fail-v")),
    ("go-pass", fixture!("go-pass")),
    ("go-pass-v", fixture!("go-pass-v")),
    ("tap-fail", fixture!("tap-fail")),
    ("tap-fail-v", fixture!("tap-fail-v")),
    ("tap-pass", fixture!("tap-pass")),
    ("tap-raw", fixture!("tap-raw")),
    ("node-fail", fixture!("node-fail")),
    ("node-fail-spec", fixture!("node-fail-spec")),
    ("node-pass", fixture!("node-pass")),
    ("jest-fail", fixture!("jest-fail")),
    ("jest-fail-verbose", fixture!("jest-fail-verbose")),
    ("jest-pass", fixture!("jest-pass")),
    ("vitest-fail", fixture!("vitest-fail")),
    ("vitest-pass", fixture!("vitest-pass")),
];

/// The report of `(stdout, stderr)`; panics unless one runner was found.
#[track_caller]
fn report((stdout, stderr): (&str, &str)) -> Report {
    match parse(stdout, stderr) {
        Parsed::Report(r) => r,
        other => panic!("no report: {other:?}"),
    }
}

/// Asserts the runner and the counts.
#[track_caller]
fn counts(r: &Report, runner: &str, passed: u64, failed: usize, skipped: u64) {
    assert_eq!(
        (r.runner, r.passed, r.failed.len(), r.skipped),
        (runner, passed, failed, skipped),
        "{r:#?}"
    );
}

/// Asserts a failure's name, file, line and the start of its message.
#[track_caller]
fn failure(f: &Failure, name: &str, file: Option<&str>, line: Option<u64>, says: &str) {
    assert_eq!(
        (f.name.as_str(), f.file.as_deref(), f.line),
        (name, file, line),
        "{f:#?}"
    );
    assert!(
        f.message.starts_with(says),
        "message {:?} does not start with {says:?}",
        f.message
    );
}

fn names(r: &Report) -> Vec<&str> {
    r.failed.iter().map(|f| f.name.as_str()).collect()
}

// pytest

#[test]
fn pytest_names_failures_by_node_id_with_their_section_location() {
    let r = report(fixture!("pytest-fail"));
    counts(&r, "pytest", 3, 4, 1);
    failure(
        &r.failed[0],
        "tests/test_a.py::test_adds_wrong",
        Some("tests/test_a.py"),
        Some(13),
        "assert 3 == 4\n +  where 3 = add(1, 2)",
    );
    failure(
        &r.failed[1],
        "tests/test_a.py::TestMath::test_div",
        Some("tests/test_a.py"),
        Some(26),
        "ValueError: ok 1 - not TAP\n1..3",
    );
    failure(
        &r.failed[2],
        "tests/test_b.py::test_prints_tap",
        Some("tests/test_b.py"),
        Some(21),
        "AssertionError: printed TAP",
    );
}

#[test]
fn pytest_setup_error_is_a_failure_at_the_fixture() {
    let r = report(fixture!("pytest-fail"));
    failure(
        &r.failed[3],
        "tests/test_b.py::test_uses_broken",
        Some("tests/test_b.py"),
        Some(6),
        "RuntimeError: fixture broke",
    );
}

#[test]
fn pytest_quiet_verbose_and_ra_report_the_same_failures() {
    let default = report(fixture!("pytest-fail"));
    let sorted = |r: &Report| {
        let mut f = r.failed.clone();
        f.sort_by(|a, b| a.name.cmp(&b.name));
        f
    };
    for (name, output) in [
        ("-q", fixture!("pytest-fail-q")),
        ("-v", fixture!("pytest-fail-v")),
        ("-rA", fixture!("pytest-fail-ra")),
        ("pytest 7", fixture!("pytest7-fail")),
    ] {
        let r = report(output);
        assert_eq!((r.passed, r.skipped), (3, 1), "{name}");
        assert_eq!(sorted(&r), sorted(&default), "{name}");
    }
}

#[test]
fn pytest_passing_runs_count_passes_and_skips() {
    counts(&report(fixture!("pytest-pass")), "pytest", 2, 0, 1);
    counts(&report(fixture!("pytest-pass-q")), "pytest", 2, 0, 1);
}

#[test]
fn pytest_missing_test_is_a_failure_named_as_pytest_quoted_it() {
    let r = report(fixture!("pytest-missing-test"));
    counts(&r, "pytest", 0, 1, 0);
    failure(
        &r.failed[0],
        "/tmp/rp/py/tests/test_a.py::test_nope",
        None,
        None,
        "ERROR: not found: /tmp/rp/py/tests/test_a.py::test_nope",
    );
}

#[test]
fn pytest_missing_file_is_a_failure_named_by_the_path() {
    let r = report(fixture!("pytest-missing-file"));
    counts(&r, "pytest", 0, 1, 0);
    failure(
        &r.failed[0],
        "tests/test_nope.py",
        None,
        None,
        "ERROR: file or directory not found: tests/test_nope.py",
    );
}

#[test]
fn pytest_collection_error_is_a_failure_named_by_the_file() {
    let r = report(fixture!("pytest-missing-module"));
    counts(&r, "pytest", 0, 1, 0);
    failure(
        &r.failed[0],
        "tests/test_x.py",
        Some("tests/test_x.py"),
        Some(1),
        "ModuleNotFoundError: No module named 'nosuchmodule'",
    );
}

#[test]
fn pytest_no_tests_ran_still_parses() {
    counts(&report(fixture!("pytest-no-tests")), "pytest", 0, 0, 0);
}

#[test]
fn pytest_printing_a_whole_tap_stream_stays_pytest() {
    // test_prints_tap's captured stdout is `1..2`, `ok 1 - quoted`, `not ok
    // 2 - quoted` at the start of lines: a bare TAP stream yields to pytest.
    let (stdout, _) = fixture!("pytest-fail");
    assert!(stdout.contains("\n1..2\nok 1 - quoted\nnot ok 2 - quoted\n"));
    assert_eq!(report(fixture!("pytest-fail")).runner, "pytest");
}

#[test]
fn pytest_message_quoting_tap_lines_stays_pytest() {
    let stdout = "\
=================================== FAILURES ===================================
___________________________________ test_x ____________________________________

    def test_x():
>       assert out == \"ok 1\"
E       AssertionError: assert 'not ok 1 - x\\n1..1' == 'ok 1'
E       ok 1 - quoted
E       1..1

tests/test_t.py:4: AssertionError
=========================== short test summary info ============================
FAILED tests/test_t.py::test_x - AssertionError: assert 'not ok 1 - x\\n1..1' == 'ok 1'
============================== 1 failed in 0.01s ===============================
";
    let r = report((stdout, ""));
    counts(&r, "pytest", 0, 1, 0);
    failure(
        &r.failed[0],
        "tests/test_t.py::test_x",
        Some("tests/test_t.py"),
        Some(4),
        "AssertionError: assert",
    );
}

#[test]
fn pytest_quiet_summary_right_after_a_section_counts() {
    // `-q -rN`: no short summary, so the count line follows the last section.
    let stdout = "\
.F                                                                       [100%]
=================================== FAILURES ===================================
___________________________________ test_x ____________________________________

    def test_x():
>       assert 1 == 2
E       assert 1 == 2

tests/test_t.py:2: AssertionError
1 failed, 1 passed in 0.01s
";
    let r = report((stdout, ""));
    counts(&r, "pytest", 1, 1, 0);
    failure(
        &r.failed[0],
        "test_x",
        Some("tests/test_t.py"),
        Some(2),
        "assert 1 == 2",
    );
}

#[test]
fn pytest_summary_quoted_in_captured_output_is_not_counted() {
    let stdout = "\
=================================== FAILURES ===================================
________________________________ test_inner_run ________________________________

    def test_inner_run():
>       assert False
E       assert False

tests/test_t.py:9: AssertionError
----------------------------- Captured stdout call -----------------------------
============================== 7 passed in 0.01s ===============================
=========================== short test summary info ============================
FAILED tests/test_t.py::test_inner_run - assert False
============================== 1 failed in 0.02s ===============================
";
    counts(&report((stdout, "")), "pytest", 0, 1, 0);
}

#[test]
fn pytest_counted_failure_named_nowhere_is_still_reported() {
    let r = report(("2 failed in 0.01s\n", ""));
    counts(&r, "pytest", 0, 2, 0);
    assert_eq!(names(&r), ["(unnamed failure 1)", "(unnamed failure 2)"]);
}

#[test]
fn pytest_parametrized_id_keeps_its_dashes() {
    let stdout = "\
=========================== short test summary info ============================
FAILED tests/t.py::test_p[a - b] - assert 1 == 2
============================== 1 failed in 0.01s ===============================
";
    let r = report((stdout, ""));
    failure(
        &r.failed[0],
        "tests/t.py::test_p[a - b]",
        Some("tests/t.py"),
        None,
        "assert 1 == 2",
    );
}

#[test]
fn pytest_two_sessions_in_one_output_are_summed() {
    let (stdout, _) = fixture!("pytest-pass");
    counts(
        &report((&format!("{stdout}{stdout}"), "")),
        "pytest",
        4,
        0,
        2,
    );
}

// unittest

#[test]
fn unittest_names_failures_and_errors_by_dotted_path() {
    for output in [fixture!("unittest-fail"), fixture!("unittest-fail-v")] {
        let r = report(output);
        counts(&r, "unittest", 2, 2, 1);
        failure(
            &r.failed[0],
            "pkg.test_calc.CalcTest.test_raises",
            Some("/tmp/rp/ut/pkg/test_calc.py"),
            Some(16),
            "KeyError: 'missing'",
        );
        failure(
            &r.failed[1],
            "pkg.test_calc.CalcTest.test_adds_wrong",
            Some("/tmp/rp/ut/pkg/test_calc.py"),
            Some(9),
            "AssertionError: 3 != 4",
        );
    }
}

#[test]
fn unittest_missing_module_is_an_error_with_the_import_message() {
    let r = report(fixture!("unittest-missing-module"));
    counts(&r, "unittest", 0, 1, 0);
    let f = &r.failed[0];
    assert_eq!(f.name, "unittest.loader._FailedTest.test_nope");
    assert_eq!(
        f.message,
        "ImportError: Failed to import test module: test_nope\nModuleNotFoundError: No module named 'pkg.test_nope'"
    );
}

#[test]
fn unittest_passing_run() {
    counts(&report(fixture!("unittest-pass")), "unittest", 2, 0, 0);
}

#[test]
fn unittest_before_python_311_titles_name_the_class_only() {
    let stderr = "\
F
======================================================================
FAIL: test_x (pkg.mod.C)
----------------------------------------------------------------------
Traceback (most recent call last):
  File \"pkg/mod.py\", line 5, in test_x
    self.fail(\"no\")
AssertionError: no

----------------------------------------------------------------------
Ran 1 test in 0.000s

FAILED (failures=1)
";
    let r = report(("", stderr));
    counts(&r, "unittest", 0, 1, 0);
    failure(
        &r.failed[0],
        "pkg.mod.C.test_x",
        Some("pkg/mod.py"),
        Some(5),
        "AssertionError: no",
    );
}

// libtest

#[test]
fn libtest_sums_binaries_and_reads_panics() {
    let r = report(fixture!("libtest-fail"));
    counts(&r, "libtest", 2, 3, 1);
    failure(
        &r.failed[0],
        "tests::adds_wrong",
        Some("src/lib.rs"),
        Some(16),
        "assertion `left == right` failed\n  left: 3\n right: 4",
    );
    assert_eq!(r.failed[1].message, "boom\nsecond line");
    failure(
        &r.failed[1],
        "tests::panics_with_message",
        Some("src/lib.rs"),
        Some(26),
        "boom",
    );
    failure(
        &r.failed[2],
        "api_fails",
        Some("tests/api.rs"),
        Some(8),
        "add is off",
    );
}

#[test]
fn libtest_message_stops_before_the_backtrace() {
    let r = report(fixture!("libtest-fail-backtrace"));
    counts(&r, "libtest", 1, 2, 1);
    assert_eq!(
        r.failed[0].message,
        "assertion `left == right` failed\n  left: 3\n right: 4"
    );
}

#[test]
fn libtest_passing_run() {
    counts(&report(fixture!("libtest-pass")), "libtest", 2, 0, 1);
}

#[test]
fn libtest_old_panic_format_gives_message_and_location() {
    let stdout = "
running 1 test
test tests::adds ... FAILED

failures:

---- tests::adds stdout ----
thread 'tests::adds' panicked at 'assertion failed: `(left == right)`
  left: `3`,
 right: `4`', src/lib.rs:10:5
note: run with `RUST_BACKTRACE=1` environment variable to display a backtrace


failures:
    tests::adds

test result: FAILED. 0 passed; 1 failed; 0 ignored; 0 measured; 0 filtered out; finished in 0.00s
";
    let r = report((stdout, ""));
    counts(&r, "libtest", 0, 1, 0);
    failure(
        &r.failed[0],
        "tests::adds",
        Some("src/lib.rs"),
        Some(10),
        "assertion failed: `(left == right)`\n  left: `3`,\n right: `4`",
    );
}

#[test]
fn libtest_failure_without_captured_output_is_named_from_the_list() {
    // --nocapture: no sections, the names only in the list.
    let stdout = "
running 2 tests
test a ... FAILED
test b ... ok

failures:

failures:
    a

test result: FAILED. 1 passed; 1 failed; 0 ignored; 0 measured; 0 filtered out; finished in 0.00s
";
    let r = report((stdout, ""));
    counts(&r, "libtest", 1, 1, 0);
    failure(&r.failed[0], "a", None, None, "");
}

// nextest

#[test]
fn nextest_is_not_read_as_the_libtest_it_quotes() {
    let (_, stderr) = fixture!("nextest-fail");
    assert!(stderr.contains("test result: FAILED."));
    let r = report(fixture!("nextest-fail"));
    counts(&r, "nextest", 2, 3, 1);
    failure(
        &r.failed[0],
        "tests::adds_wrong",
        Some("src/lib.rs"),
        Some(16),
        "assertion `left == right` failed",
    );
    failure(
        &r.failed[1],
        "tests::panics_with_message",
        Some("src/lib.rs"),
        Some(26),
        "boom\nsecond line",
    );
    failure(
        &r.failed[2],
        "api_fails",
        Some("tests/api.rs"),
        Some(8),
        "add is off",
    );
}

#[test]
fn nextest_passing_run() {
    counts(&report(fixture!("nextest-pass")), "nextest", 2, 0, 4);
}

#[test]
fn nextest_retried_test_that_passed_is_not_a_failure() {
    let stderr = "\
    Starting 2 tests across 1 binary
   TRY 1 FAIL [   0.005s] calc tests::flaky
   TRY 2 PASS [   0.004s] calc tests::flaky
        FAIL [   0.004s] calc tests::broken
------------
     Summary [   0.020s] 2 tests run: 1 passed (1 flaky), 1 failed, 0 skipped
";
    let r = report(("", stderr));
    counts(&r, "nextest", 1, 1, 0);
    assert_eq!(names(&r), ["tests::broken"]);
}

#[test]
fn nextest_indented_output_of_newer_versions_is_read() {
    // The layout of nextest 0.9.9x+, from its documented output: the
    // counter, captured output indented under `stdout ───`/`stderr ───`.
    let stderr = "\
    Starting 2 tests across 1 binary
        PASS [   0.004s] (1/2) calc tests::adds
        FAIL [   0.004s] (2/2) calc tests::adds_wrong
  stdout \u{2500}\u{2500}\u{2500}

    running 1 test
    test tests::adds_wrong ... FAILED

    test result: FAILED. 0 passed; 1 failed; 0 ignored; 0 measured; 3 filtered out; finished in 0.00s

  stderr \u{2500}\u{2500}\u{2500}

    thread 'tests::adds_wrong' (11354) panicked at src/lib.rs:16:9:
    assertion `left == right` failed
      left: 3
     right: 4
    note: run with `RUST_BACKTRACE=1` environment variable to display a backtrace

\u{2500}\u{2500}\u{2500}\u{2500}\u{2500}\u{2500}\u{2500}\u{2500}\u{2500}\u{2500}\u{2500}\u{2500}
     Summary [   0.007s] 2 tests run: 1 passed, 1 failed, 0 skipped
        FAIL [   0.004s] (2/2) calc tests::adds_wrong
error: test run failed
";
    let r = report(("", stderr));
    counts(&r, "nextest", 1, 1, 0);
    failure(
        &r.failed[0],
        "tests::adds_wrong",
        Some("src/lib.rs"),
        Some(16),
        "assertion `left == right` failed\n  left: 3\n right: 4",
    );
}

// go

#[test]
fn go_without_v_counts_no_passes_and_names_leaf_failures() {
    let r = report(fixture!("go-fail"));
    counts(&r, "go", 0, 4, 0);
    assert_eq!(
        names(&r),
        [
            "TestIndex",
            "TestAddWrong",
            "TestTable/off",
            "example.com/calc/bad"
        ]
    );
    failure(
        &r.failed[1],
        "TestAddWrong",
        Some("add_test.go"),
        Some(13),
        "got 3, want 4",
    );
    assert_eq!(r.failed[2].message, "Add(2, 2) = 4, want 5\nsecond line");
}

#[test]
fn go_with_v_counts_leaf_passes_and_skips() {
    let r = report(fixture!("go-fail-v"));
    // TestAdd, TestTable/small, TestUpperSame; TestTable itself is a parent.
    counts(&r, "go", 3, 4, 1);
    assert_eq!(
        names(&r),
        [
            "TestIndex",
            "TestAddWrong",
            "TestTable/off",
            "example.com/calc/bad"
        ]
    );
    failure(
        &r.failed[2],
        "TestTable/off",
        Some("add_test.go"),
        Some(26),
        "Add(2, 2) = 4, want 5\nsecond line",
    );
}

#[test]
fn go_panic_points_at_the_test_frame() {
    for output in [fixture!("go-fail"), fixture!("go-fail-v")] {
        let r = report(output);
        failure(
            &r.failed[0],
            "TestIndex",
            Some("/tmp/rp/go/boom/boom_test.go"),
            Some(7),
            "panic: runtime error: index out of range [3] with length 0",
        );
    }
}

#[test]
fn go_build_failure_is_a_failure_named_by_the_package() {
    let r = report(fixture!("go-fail"));
    failure(
        &r.failed[3],
        "example.com/calc/bad",
        Some("bad/bad_test.go"),
        Some(6),
        "bad/bad_test.go:6:2: undefined: Missing",
    );
}

#[test]
fn go_passing_runs() {
    counts(&report(fixture!("go-pass")), "go", 0, 0, 0);
    counts(&report(fixture!("go-pass-v")), "go", 1, 0, 0);
}

#[test]
fn go_package_failing_without_a_test_named_is_reported() {
    let stdout = "panic: test timed out after 1s\nrunning tests:\n\tTestSlow (1s)\n\ngoroutine 1 [running]:\nFAIL\texample.com/slow\t1.012s\nFAIL\n";
    let r = report((stdout, ""));
    counts(&r, "go", 0, 1, 0);
    failure(
        &r.failed[0],
        "example.com/slow",
        None,
        None,
        "panic: test timed out after 1s",
    );
}

// TAP

#[test]
fn prove_names_failures_from_test_more_diagnostics() {
    let r = report(fixture!("tap-fail"));
    counts(&r, "tap", 3, 2, 1);
    failure(
        &r.failed[0],
        "adds wrong",
        Some("t/math.t"),
        Some(7),
        "got: '3'\nexpected: '4'",
    );
    failure(
        &r.failed[1],
        "greets",
        Some("t/strings.t"),
        Some(7),
        "'hello'\ndoesn't match '(?^:bye)'",
    );
}

#[test]
fn prove_verbose_reads_the_same() {
    assert_eq!(report(fixture!("tap-fail-v")), report(fixture!("tap-fail")));
}

#[test]
fn prove_passing_run() {
    counts(&report(fixture!("tap-pass")), "tap", 2, 0, 0);
}

#[test]
fn bare_tap_stream_counts_its_points() {
    let r = report(fixture!("tap-raw"));
    counts(&r, "tap", 2, 1, 1);
    failure(
        &r.failed[0],
        "adds wrong",
        Some("t/math.t"),
        Some(7),
        "got: '3'",
    );
}

#[test]
fn bare_tap_stream_reports_a_short_run_and_a_bail_out() {
    let r = report((
        "1..3\nok 1 - a\nnot ok 2 - b # TODO later\nBail out! no database\n",
        "",
    ));
    counts(&r, "tap", 1, 2, 1);
    failure(&r.failed[0], "Bail out!", None, None, "no database");
    failure(
        &r.failed[1],
        "(missing tests)",
        None,
        None,
        "planned 3 tests but ran 2",
    );
}

#[test]
fn prove_file_that_died_is_a_failure_named_by_the_file() {
    let stdout = "\
t/dies.t .. Dubious, test returned 255 (wstat 65280, 0xff00)
No subtests run 

Test Summary Report
-------------------
t/dies.t (Wstat: 65280 (exited 255) Tests: 0 Failed: 0)
  Non-zero exit status: 255
  Parse errors: No plan found in TAP output
Files=1, Tests=0,  0 wallclock secs ( 0.00 usr +  0.00 sys =  0.00 CPU)
Result: FAIL
";
    let r = report((stdout, ""));
    counts(&r, "tap", 0, 1, 0);
    failure(
        &r.failed[0],
        "t/dies.t",
        None,
        None,
        "Non-zero exit status: 255\nParse errors: No plan found",
    );
}

#[test]
fn bare_tap_failure_takes_its_yaml_block_as_message() {
    let stdout = "TAP version 13\n1..2\nok 1 - a\nnot ok 2 - b\n  ---\n  message: 'b broke'\n  severity: fail\n  ...\n";
    let r = report((stdout, ""));
    counts(&r, "tap", 1, 1, 0);
    failure(
        &r.failed[0],
        "b",
        None,
        None,
        "message: 'b broke'\nseverity: fail",
    );
}

// node

#[test]
fn node_tap_is_node_not_tap() {
    let (stdout, _) = fixture!("node-fail");
    assert!(stdout.starts_with("TAP version 13\n"));
    let r = report(fixture!("node-fail"));
    // The suite `strings` failed only because `throws` did: not listed.
    counts(&r, "node", 2, 3, 1);
    assert_eq!(
        names(&r),
        ["/tmp/rp/node/test/broken.test.js", "adds wrong", "throws"]
    );
    failure(
        &r.failed[1],
        "adds wrong",
        Some("/tmp/rp/node/test/math.test.js"),
        Some(10),
        "Expected values to be strictly equal:\n3 !== 4",
    );
    failure(
        &r.failed[2],
        "throws",
        Some("/tmp/rp/node/test/math.test.js"),
        Some(20),
        "boom\nsecond line",
    );
}

#[test]
fn node_file_that_could_not_load_says_why() {
    let r = report(fixture!("node-fail"));
    failure(
        &r.failed[0],
        "/tmp/rp/node/test/broken.test.js",
        Some("/tmp/rp/node/test/broken.test.js"),
        Some(1),
        "test failed\nError: Cannot find module './nope'",
    );
}

#[test]
fn node_spec_form_reads_the_failing_tests_part() {
    let r = report(fixture!("node-fail-spec"));
    counts(&r, "node", 2, 3, 1);
    assert_eq!(
        names(&r),
        ["/tmp/rp/node/test/broken.test.js", "adds wrong", "throws"]
    );
    failure(
        &r.failed[1],
        "adds wrong",
        Some("test/math.test.js"),
        Some(10),
        "AssertionError [ERR_ASSERTION]: Expected values to be strictly equal:\n3 !== 4",
    );
    failure(
        &r.failed[2],
        "throws",
        Some("test/math.test.js"),
        Some(20),
        "Error: boom\nsecond line",
    );
}

#[test]
fn node_passing_run() {
    counts(&report(fixture!("node-pass")), "node", 1, 0, 1);
}

// jest and vitest

#[test]
fn jest_joins_title_paths_and_names_a_file_that_failed_to_run() {
    for output in [fixture!("jest-fail"), fixture!("jest-fail-verbose")] {
        let r = report(output);
        counts(&r, "jest", 3, 3, 1);
        failure(
            &r.failed[0],
            "adds wrong",
            Some("tests/math.test.js"),
            Some(10),
            "expect(received).toBe(expected) // Object.is equality\nExpected: 4\nReceived: 3",
        );
        failure(
            &r.failed[1],
            "strings > upper > throws",
            Some("tests/math.test.js"),
            Some(21),
            "boom\nsecond line",
        );
        failure(
            &r.failed[2],
            "tests/broken.test.js",
            Some("tests/broken.test.js"),
            Some(1),
            "Cannot find module './nope' from 'tests/broken.test.js'",
        );
    }
}

#[test]
fn jest_passing_run_counts_todo_as_skipped() {
    counts(&report(fixture!("jest-pass")), "jest", 1, 0, 1);
}

#[test]
fn vitest_joins_title_paths_and_names_a_file_that_failed_to_load() {
    let r = report(fixture!("vitest-fail"));
    counts(&r, "vitest", 3, 3, 1);
    failure(
        &r.failed[0],
        "tests/broken.test.js",
        Some("tests/broken.test.js"),
        None,
        "Error: Failed to load url ./nope.js",
    );
    failure(
        &r.failed[1],
        "adds wrong",
        Some("tests/math.test.js"),
        Some(12),
        "AssertionError: expected 3 to be 4 // Object.is equality\n- Expected",
    );
    failure(
        &r.failed[2],
        "strings > upper > throws",
        Some("tests/math.test.js"),
        Some(23),
        "Error: boom\nsecond line",
    );
}

#[test]
fn vitest_passing_run_counts_todo_as_skipped() {
    counts(&report(fixture!("vitest-pass")), "vitest", 1, 0, 1);
}

#[test]
fn jest_summary_of_all_failing_tests_is_not_counted_twice() {
    let stderr = "\
FAIL tests/a.test.js
  ● adds

    expect(received).toBe(expected)

      at Object.toBe (tests/a.test.js:2:17)

Summary of all failing tests
FAIL tests/a.test.js
  ● adds

    expect(received).toBe(expected)

      at Object.toBe (tests/a.test.js:2:17)

Test Suites: 1 failed, 1 total
Tests:       1 failed, 1 total
";
    let r = report(("", stderr));
    counts(&r, "jest", 0, 1, 0);
    failure(
        &r.failed[0],
        "adds",
        Some("tests/a.test.js"),
        Some(2),
        "expect(received).toBe(expected)",
    );
}

#[test]
fn vitest_tests_failing_the_same_way_share_the_error() {
    let stderr = "\
 FAIL  tests/a.test.js > one
 FAIL  tests/a.test.js > two
Error: same
 ❯ tests/a.test.js:3:9

⎯⎯⎯⎯⎯⎯⎯⎯⎯⎯⎯⎯[1/2]⎯
";
    let stdout = " Test Files  1 failed (1)\n      Tests  2 failed (2)\n";
    let r = report((stdout, stderr));
    counts(&r, "vitest", 0, 2, 0);
    failure(
        &r.failed[0],
        "one",
        Some("tests/a.test.js"),
        Some(3),
        "Error: same",
    );
    failure(
        &r.failed[1],
        "two",
        Some("tests/a.test.js"),
        Some(3),
        "Error: same",
    );
}

// Detection

#[test]
fn every_fixture_is_one_runner_and_reads_the_same_merged() {
    for (name, (stdout, stderr)) in ALL {
        let apart = parse(stdout, stderr);
        assert!(matches!(apart, Parsed::Report(_)), "{name}: {apart:?}");
        assert_eq!(
            parse(&format!("{stdout}{stderr}"), ""),
            apart,
            "{name} merged"
        );
    }
}

#[test]
fn two_runners_in_one_output_are_ambiguous() {
    let (py, _) = fixture!("pytest-pass");
    let (rs, _) = fixture!("libtest-pass");
    assert_eq!(
        parse(&format!("{py}{rs}"), ""),
        Parsed::Ambiguous(vec!["pytest", "libtest"])
    );
    let (go, _) = fixture!("go-pass");
    let (_, jest) = fixture!("jest-pass");
    assert_eq!(parse(go, jest), Parsed::Ambiguous(vec!["go", "jest"]));
}

#[test]
fn prove_beside_another_runner_is_ambiguous() {
    let (prove, _) = fixture!("tap-pass");
    let (py, _) = fixture!("pytest-pass");
    assert_eq!(parse(prove, py), Parsed::Ambiguous(vec!["pytest", "tap"]));
}

#[test]
fn output_of_no_known_runner_is_unknown() {
    assert_eq!(parse("", ""), Parsed::Unknown);
    assert_eq!(
        parse("hello\nok\n", "error: could not compile `calc`\n"),
        Parsed::Unknown
    );
    // Near misses: the words without the runner's exact format.
    let near = "test result: fine\n3 passed and 1 failed in 2 hours\nTests: many\nok 1 thing\nRan some tests\n--- FAIL: soon\n";
    assert_eq!(parse(near, ""), Parsed::Unknown);
}

#[test]
fn coloured_output_parses_like_plain() {
    let coloured = "\x1b[31m\x1b[1m=================== 1 failed, 2 passed in 0.01s ===================\x1b[0m\n";
    counts(&report((coloured, "")), "pytest", 2, 1, 0);
}

#[test]
fn messages_keep_ten_lines_of_three_hundred_chars() {
    let long = "x".repeat(400);
    let lines: Vec<&str> = std::iter::repeat_n(long.as_str(), 15).collect();
    let said = message(lines);
    assert_eq!(said.lines().count(), MESSAGE_LINES);
    assert!(said.lines().all(|l| l.chars().count() == MESSAGE_WIDTH));
    assert_eq!(cut("héllo", 2), "hé");
}
