//! What reading a large test run's report costs: the `test` flow parses
//! every run's output (`sluice::internals::test_reports::parse`), so a big
//! suite must not make the parse the slow part. Two reports, made in
//! memory, each of 10,000 tests of which 100 fail:
//!
//! - `test-reports/pytest-10k`: pytest `-v`, a result line per test, a
//!   FAILURES section per failure with a traceback of about 30 lines (a
//!   helper frame, a long `E` diff, captured stdout), the short test
//!   summary and the closing line; about 1 MB.
//! - `test-reports/libtest-10k`: cargo test, a `test NAME ... ok` line per
//!   test, a `---- NAME stdout ----` section per failure (captured output,
//!   the panic and its assertion), the failures list and the result line;
//!   about 0.5 MB.
//!
//! Target (issue): under 20 ms each. After criterion's groups the bench
//! prints one `target ...` line per report, from the median of `TURNS`
//! separate parses.

use criterion::{black_box, Criterion};
use sluice::internals::test_reports::{parse, Parsed};
use std::fmt::Write;
use std::time::{Duration, Instant};

const TESTS: usize = 10_000;
const FAILURES: usize = 100;
const TURNS: usize = 31;
const TARGET: Duration = Duration::from_millis(20);

/// Whether test `i` is one of the failing ones (spread through the run).
fn fails(i: usize) -> bool {
    i % (TESTS / FAILURES) == TESTS / FAILURES / 2
}

/// The node id of test `i`: 100 tests a module, parametrized every tenth.
fn pytest_id(i: usize) -> String {
    let (module, case) = (i / 100, i % 100);
    if case % 10 == 0 {
        format!(
            "tests/unit/test_module_{module:03}.py::TestFeature::test_case_{case}[input-{case}]"
        )
    } else {
        format!("tests/unit/test_module_{module:03}.py::test_case_{case}")
    }
}

/// One failure's section of pytest's FAILURES part.
fn pytest_section(out: &mut String, i: usize) {
    let id = pytest_id(i);
    let title = id.split_once("::").unwrap().1.replace("::", ".");
    let file = id.split("::").next().unwrap();
    let _ = writeln!(out, "{:_^80}", format!(" {title} "));
    out.push_str("\n    def test_case(value):\n        expected = build_expected(value)\n");
    out.push_str(">       assert compute(value) == expected\n\n");
    let _ = writeln!(out, "{file}:{}: ", 40 + i % 50);
    out.push_str(
        "_ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _\n\n",
    );
    out.push_str("value = {'id': 17, 'name': 'widget', 'tags': ['a', 'b', 'c']}\n\n");
    out.push_str("    def compute(value):\n        result = dict(value)\n>       result['total'] = sum(value['tags'])\n");
    out.push_str("E       AssertionError: assert {'id': 17, 'name': 'widget'} == {'id': 17, 'name': 'gadget'}\n");
    out.push_str("E         \nE         Omitting 1 identical items, use -vv to show\nE         Differing items:\n");
    out.push_str("E         {'name': 'widget'} != {'name': 'gadget'}\nE         Full diff:\n");
    for k in 0..8 {
        let _ = writeln!(out, "E           {{\nE         -     'name': 'gadget{k}',\nE         +     'name': 'widget{k}',");
    }
    let _ = writeln!(out, "\n{file}:{}: AssertionError", 40 + i % 50);
    out.push_str(
        "----------------------------- Captured stdout call -----------------------------\n",
    );
    out.push_str("computing totals for widget\nloaded 3 tags from cache\n");
}

/// pytest `-v` over `TESTS` tests.
fn pytest_report() -> String {
    let mut out = String::with_capacity(2 << 20);
    out.push_str(
        "============================= test session starts ==============================\n",
    );
    out.push_str(
        "platform linux -- Python 3.11.7, pytest-8.3.5, pluggy-1.7.0 -- /usr/bin/python3\n",
    );
    out.push_str("rootdir: /work/project\ncollecting ... collected 10000 items\n\n");
    for i in 0..TESTS {
        let verdict = if fails(i) { "FAILED" } else { "PASSED" };
        let _ = writeln!(
            out,
            "{:<72} [{:>3}%]",
            format!("{} {verdict}", pytest_id(i)),
            (i + 1) * 100 / TESTS
        );
    }
    out.push_str(
        "\n=================================== FAILURES ===================================\n",
    );
    (0..TESTS)
        .filter(|&i| fails(i))
        .for_each(|i| pytest_section(&mut out, i));
    out.push_str(
        "=========================== short test summary info ============================\n",
    );
    for i in (0..TESTS).filter(|&i| fails(i)) {
        let _ = writeln!(
            out,
            "FAILED {} - AssertionError: assert {{'id': 17, 'name': 'widget'}} == {{'id'...",
            pytest_id(i)
        );
    }
    let _ = writeln!(
        out,
        "{:=^80}",
        format!(" {FAILURES} failed, {} passed in 41.07s ", TESTS - FAILURES)
    );
    out
}

/// libtest's name of test `i`.
fn libtest_name(i: usize) -> String {
    format!("parser::module_{:03}::tests::case_{}", i / 100, i % 100)
}

/// cargo test over `TESTS` tests in one binary.
fn libtest_report() -> String {
    let mut out = String::with_capacity(1 << 20);
    let _ = write!(out, "\nrunning {TESTS} tests\n");
    for i in 0..TESTS {
        let verdict = if fails(i) { "FAILED" } else { "ok" };
        let _ = writeln!(out, "test {} ... {verdict}", libtest_name(i));
    }
    out.push_str("\nfailures:\n\n");
    for i in (0..TESTS).filter(|&i| fails(i)) {
        let name = libtest_name(i);
        let _ = writeln!(out, "---- {name} stdout ----");
        out.push_str("parsing input of 4096 bytes\nfirst pass done: 17 tokens\n\n");
        let _ = writeln!(
            out,
            "thread '{name}' ({}) panicked at src/parser/module_{:03}.rs:{}:9:",
            9000 + i,
            i / 100,
            100 + i % 100
        );
        out.push_str("assertion `left == right` failed: tokens differ\n");
        out.push_str(
            "  left: [Ident(\"a\"), Punct('+'), Ident(\"b\"), Punct(';'), Ident(\"c\")]\n",
        );
        out.push_str(
            " right: [Ident(\"a\"), Punct('-'), Ident(\"b\"), Punct(';'), Ident(\"c\")]\n",
        );
        out.push_str(
            "note: run with `RUST_BACKTRACE=1` environment variable to display a backtrace\n\n",
        );
    }
    out.push_str("\nfailures:\n");
    for i in (0..TESTS).filter(|&i| fails(i)) {
        let _ = writeln!(out, "    {}", libtest_name(i));
    }
    let _ = writeln!(
        out,
        "\ntest result: FAILED. {} passed; {FAILURES} failed; 0 ignored; 0 measured; 0 filtered out; finished in 3.21s\n",
        TESTS - FAILURES
    );
    out
}

/// Parses once and checks the counts, so the bench measures a full read.
fn check(name: &str, stdout: &str) {
    let Parsed::Report(r) = parse(stdout, "") else {
        panic!("{name}: not one runner's report");
    };
    assert_eq!(
        (r.passed as usize, r.failed.len()),
        (TESTS - FAILURES, FAILURES),
        "{name}"
    );
    assert!(
        r.failed
            .iter()
            .all(|f| f.line.is_some() && !f.message.is_empty()),
        "{name}"
    );
}

fn median_parse(stdout: &str) -> Duration {
    let mut times: Vec<Duration> = (0..TURNS)
        .map(|_| {
            let start = Instant::now();
            black_box(parse(black_box(stdout), ""));
            start.elapsed()
        })
        .collect();
    times.sort();
    times[TURNS / 2]
}

fn main() {
    let reports = [
        ("pytest-10k", pytest_report()),
        ("libtest-10k", libtest_report()),
    ];
    for (name, stdout) in &reports {
        check(name, stdout);
    }
    let mut c = Criterion::default().configure_from_args();
    let mut g = c.benchmark_group("test-reports");
    for (name, stdout) in &reports {
        g.bench_function(*name, |b| b.iter(|| parse(black_box(stdout), "")));
    }
    g.finish();
    c.final_summary();
    if std::env::args().any(|a| a == "--bench") {
        for (name, stdout) in &reports {
            let median = median_parse(stdout);
            println!(
                "target test-reports {name} ({:.2} MB) = {:.2} ms (target < {} ms): {}",
                stdout.len() as f64 / 1e6,
                median.as_secs_f64() * 1e3,
                TARGET.as_millis(),
                if median < TARGET { "met" } else { "MISSED" }
            );
        }
    }
}
