//! `sluice.edit` driven through Lua by the real binary: the two anchor forms,
//! what a miss reports back, the refused anchor combinations, CRLF files,
//! modes, symlinks, the error codes for what is not an editable file, and the
//! read → edit loop the seed guide describes.

mod common;

use common::{mode_of, names_in, sluice_files, Files as Ws};

use serde_json::{json, Value};
use std::fs;
use std::os::unix::fs::{symlink, PermissionsExt};
use std::path::PathBuf;

/// The edit tests' own uses of a workspace.
impl Ws {
    /// Runs `body` with `emit` defined; one JSON value per emitted line.
    fn lua(&self, body: &str) -> Vec<Value> {
        common::lua_json(&self.root, body)
    }

    /// Calls `sluice.edit` from Lua with `input` (built as JSON in Rust and
    /// decoded into a Lua table) and returns `(out, err)`.
    fn edit(&self, input: Value) -> (Value, Value) {
        self.call("edit", input)
    }

    /// Names in folder `dir` that start like sluice's locks and staging files.
    fn leftovers(&self, dir: &str) -> Vec<String> {
        sluice_files(&self.path(dir))
    }
}

// ---------------------------------------------------------------------------
// Exact-text anchor
// ---------------------------------------------------------------------------

#[test]
fn exact_text_edit_replaces_the_one_occurrence_and_returns_the_hunk_with_two_lines_of_context() {
    let ws = Ws::new();
    ws.put("w.ts", b"l1\nl2\nl3\n  return value * 2\nl5\nl6\nl7\n");
    let (out, err) = ws.edit(json!({
        "path": "w.ts",
        "oldString": "  return value * 2",
        "newString": "  return value * 3",
    }));
    assert_eq!(err, false);
    assert_eq!(
        out,
        json!({
            "startLine": 2,
            "endLine": 6,
            "replacements": 1,
            "hunk": "l2\nl3\n  return value * 3\nl5\nl6",
        })
    );
    assert_eq!(
        ws.bytes("w.ts"),
        b"l1\nl2\nl3\n  return value * 3\nl5\nl6\nl7\n"
    );
    assert_eq!(ws.leftovers("."), Vec::<String>::new());
}

#[test]
fn exact_text_hunk_spans_every_line_of_a_multi_line_replacement() {
    let ws = Ws::new();
    ws.put("f.txt", b"a\nb\nc\nd\ne\nf\ng\nh\n");
    let (out, _) =
        ws.edit(json!({"path": "f.txt", "oldString": "d\ne", "newString": "D1\nD2\nE1\nE2"}));
    assert_eq!(
        out,
        json!({"startLine": 2, "endLine": 9, "replacements": 1, "hunk": "b\nc\nD1\nD2\nE1\nE2\nf\ng"})
    );
    assert_eq!(ws.bytes("f.txt"), b"a\nb\nc\nD1\nD2\nE1\nE2\nf\ng\nh\n");
}

#[test]
fn hunk_context_is_clipped_at_the_start_and_end_of_the_file() {
    let ws = Ws::new();
    ws.put("f.txt", b"first\nmiddle\nlast");
    let (out, _) = ws.edit(json!({"path": "f.txt", "oldString": "first", "newString": "FIRST"}));
    assert_eq!(
        out,
        json!({"startLine": 1, "endLine": 3, "replacements": 1, "hunk": "FIRST\nmiddle\nlast"})
    );
    let (out, _) = ws.edit(json!({"path": "f.txt", "oldString": "last", "newString": "LAST"}));
    assert_eq!(
        out,
        json!({"startLine": 1, "endLine": 3, "replacements": 1, "hunk": "FIRST\nmiddle\nLAST"})
    );
    assert_eq!(ws.bytes("f.txt"), b"FIRST\nmiddle\nLAST");
}

#[test]
fn exact_text_match_is_byte_exact_with_no_fuzzy_fallback() {
    let ws = Ws::new();
    let original = b"fn main() {\n    let a = 1;\n}\n";
    ws.put("m.rs", original);
    let shown = ws.shown("m.rs");
    // A tab for the four spaces: the trimmed line occurs, so the miss shows it.
    let (out, err) =
        ws.edit(json!({"path": "m.rs", "oldString": "\tlet a = 1;", "newString": "x"}));
    assert_eq!(out, false);
    assert_eq!(
        err,
        json!({
            "code": "no_match",
            "message": format!(
                "oldString does not occur in {shown}. Lines 2-2 actually hold this, raw:\n    let a = 1;\n\n\
                 Copy the lines you meant from that text, or anchor by startLine/endLine instead."
            ),
            "path": shown,
            "nearest": {"startLine": 2, "endLine": 2, "content": "    let a = 1;"},
        })
    );
    // Whitespace inside the line, trailing whitespace, and a changed case all miss.
    for anchor in [
        "    let a  = 1;",
        "    let a = 1; ",
        "    let A = 1;",
        "    let a = 1;\r",
    ] {
        let (out, err) = ws.edit(json!({"path": "m.rs", "oldString": anchor, "newString": "x"}));
        assert_eq!(out, false, "{anchor:?} must not match");
        assert_eq!(err["code"], "no_match", "{anchor:?}: {err}");
    }
    assert_eq!(ws.bytes("m.rs"), original);
    assert_eq!(ws.leftovers("."), Vec::<String>::new());
}

#[test]
fn repeated_anchor_is_invalid_input_naming_every_line_it_starts_on() {
    let ws = Ws::new();
    let original = b"x\nfoo\ny\nfoo\nfoo bar\nz\n";
    ws.put("r.txt", original);
    let (out, err) = ws.edit(json!({"path": "r.txt", "oldString": "foo", "newString": "quux"}));
    assert_eq!(out, false);
    assert_eq!(
        err,
        json!({
            "code": "invalid_input",
            "field": "oldString",
            "lines": [2, 4, 5],
            "message": format!(
                "oldString occurs 3 times in {}, starting on lines 2, 4, 5. Widen it with neighbouring lines \
                 until it occurs once, or pass replaceAll = true to change every occurrence.",
                ws.shown("r.txt")
            ),
        })
    );
    assert_eq!(ws.bytes("r.txt"), original);
}

#[test]
fn repeated_multi_line_anchor_names_the_line_each_occurrence_starts_on() {
    let ws = Ws::new();
    let original = b"a\nb\nc\na\nb\n";
    ws.put("r.txt", original);
    let (_, err) = ws.edit(json!({"path": "r.txt", "oldString": "a\nb", "newString": "x"}));
    assert_eq!(err["code"], "invalid_input");
    assert_eq!(err["lines"], json!([1, 4]));
    assert_eq!(ws.bytes("r.txt"), original);
    // Widening the anchor makes it unique.
    let (out, _) = ws.edit(json!({"path": "r.txt", "oldString": "c\na\nb", "newString": "C"}));
    assert_eq!(out["replacements"], 1);
    assert_eq!(ws.bytes("r.txt"), b"a\nb\nC\n");
}

#[test]
fn overlapping_occurrences_of_the_anchor_are_ambiguous_and_refused() {
    // "end\nend" occurs twice in "end\nend\nend\n": on line 1 and on line 2.
    // Which region the caller meant is unknowable, so the seed's rule holds:
    // more than one occurrence is invalid_input naming every line.
    let ws = Ws::new();
    let original = b"end\nend\nend\n";
    ws.put("o.txt", original);
    let (out, err) = ws.edit(json!({"path": "o.txt", "oldString": "end\nend", "newString": "X"}));
    assert_eq!(out, false, "an ambiguous anchor was applied: {out}");
    assert_eq!(err["code"], "invalid_input");
    assert_eq!(err["field"], "oldString");
    assert_eq!(err["lines"], json!([1, 2]));
    assert_eq!(ws.bytes("o.txt"), original);
}

#[test]
fn replace_all_changes_every_occurrence_and_reports_the_count() {
    let ws = Ws::new();
    ws.put("r.txt", b"x\nfoo\ny\nfoo\nfoo\n");
    let (out, err) = ws.edit(
        json!({"path": "r.txt", "oldString": "foo", "newString": "quux", "replaceAll": true}),
    );
    assert_eq!(err, false);
    assert_eq!(
        out,
        json!({"startLine": 1, "endLine": 5, "replacements": 3, "hunk": "x\nquux\ny\nquux\nquux"})
    );
    assert_eq!(ws.bytes("r.txt"), b"x\nquux\ny\nquux\nquux\n");
}

#[test]
fn replace_all_hunk_runs_from_the_first_to_the_last_replacement_when_they_grow() {
    let ws = Ws::new();
    ws.put(
        "r.txt",
        b"L1\nL2\nfoo\nL4\nL5\nfoo\nL7\nL8\nL9\nL10\nL11\nL12\n",
    );
    let (out, _) = ws.edit(
        json!({"path": "r.txt", "oldString": "foo", "newString": "A\nB\nC", "replaceAll": true}),
    );
    assert_eq!(
        out,
        json!({
            "startLine": 1,
            "endLine": 12,
            "replacements": 2,
            "hunk": "L1\nL2\nA\nB\nC\nL4\nL5\nA\nB\nC\nL7\nL8",
        })
    );
    assert_eq!(
        ws.bytes("r.txt"),
        b"L1\nL2\nA\nB\nC\nL4\nL5\nA\nB\nC\nL7\nL8\nL9\nL10\nL11\nL12\n"
    );
}

#[test]
fn replace_all_hunk_runs_from_the_first_to_the_last_replacement_when_they_shrink() {
    let ws = Ws::new();
    ws.put("r.txt", b"L1\nL2\nfoo\nL4\nL5\nfoo\nL7\nL8\nL9\nL10\n");
    let (out, _) = ws
        .edit(json!({"path": "r.txt", "oldString": "foo\n", "newString": "", "replaceAll": true}));
    assert_eq!(
        out,
        json!({"startLine": 1, "endLine": 6, "replacements": 2, "hunk": "L1\nL2\nL4\nL5\nL7\nL8"})
    );
    assert_eq!(ws.bytes("r.txt"), b"L1\nL2\nL4\nL5\nL7\nL8\nL9\nL10\n");
}

#[test]
fn replace_all_with_a_single_occurrence_reports_one() {
    let ws = Ws::new();
    ws.put("r.txt", b"a\nfoo\nb\n");
    let (out, _) = ws
        .edit(json!({"path": "r.txt", "oldString": "foo", "newString": "bar", "replaceAll": true}));
    assert_eq!(
        out,
        json!({"startLine": 1, "endLine": 3, "replacements": 1, "hunk": "a\nbar\nb"})
    );
    assert_eq!(ws.bytes("r.txt"), b"a\nbar\nb\n");
}

#[test]
fn missed_anchor_is_no_match_carrying_the_real_bytes_of_the_nearest_lines() {
    let ws = Ws::new();
    let original = b"export function widen(value: number): number {\n  return value * 2\n}\n";
    ws.put("src/widen.ts", original);
    let shown = ws.shown("src/widen.ts");
    let (out, err) = ws.edit(json!({
        "path": "src/widen.ts",
        "oldString": "export function widen(value: number): number {\n  return value * 2;\n}",
        "newString": "x",
    }));
    assert_eq!(out, false);
    assert_eq!(
        err["message"],
        format!(
            "oldString does not occur in {shown}. Lines 1-3 actually hold this, raw:\n\
             export function widen(value: number): number {{\n  return value * 2\n}}\n\n\
             Copy the lines you meant from that text, or anchor by startLine/endLine instead."
        )
    );
    assert_eq!(
        err,
        json!({
            "code": "no_match",
            "message": err["message"],
            "path": shown,
            "nearest": {
                "startLine": 1,
                "endLine": 3,
                "content": "export function widen(value: number): number {\n  return value * 2\n}",
            },
        })
    );
    assert_eq!(ws.bytes("src/widen.ts"), original);
}

#[test]
fn missed_anchor_points_at_the_region_where_most_of_its_lines_sit() {
    let ws = Ws::new();
    ws.put("f.txt", b"a\nb\nc\nd\nalpha\nbeta\ngamma\ne\n");
    let (_, err) =
        ws.edit(json!({"path": "f.txt", "oldString": "alpha\nbeta!\ngamma", "newString": "x"}));
    assert_eq!(err["code"], "no_match");
    assert_eq!(
        err["nearest"],
        json!({"startLine": 5, "endLine": 7, "content": "alpha\nbeta\ngamma"})
    );
}

#[test]
fn missed_anchor_with_no_line_in_the_file_says_so_and_has_no_nearest() {
    let ws = Ws::new();
    let original = b"alpha\nbeta\n";
    ws.put("f.txt", original);
    let shown = ws.shown("f.txt");
    let (out, err) =
        ws.edit(json!({"path": "f.txt", "oldString": "gamma\ndelta", "newString": "x"}));
    assert_eq!(out, false);
    assert_eq!(
        err,
        json!({
            "code": "no_match",
            "message": format!(
                "oldString does not occur in {shown}, and not one of its lines occurs there either: \
                 this is the wrong file, or the region is not what you remember. Re-read the file, \
                 or grep for the text, before editing again."
            ),
            "path": shown,
        })
    );
    assert_eq!(ws.bytes("f.txt"), original);
}

// ---------------------------------------------------------------------------
// Refused anchor combinations
// ---------------------------------------------------------------------------

#[test]
fn every_mixed_or_missing_anchor_is_invalid_input_naming_the_field() {
    let ws = Ws::new();
    let original = b"one\ntwo\nthree\n";
    ws.put("f.txt", original);
    let out = ws.lua(
        r#"local cases = {
          {path = "f.txt", oldString = "two", startLine = 2, newString = "x"},
          {path = "f.txt", oldString = "two", endLine = 2, newString = "x"},
          {path = "f.txt", oldString = "two", startLine = 2, endLine = 2, newString = "x"},
          {path = "f.txt", newString = "x"},
          {path = "f.txt", oldString = "", newString = "x"},
          {path = "f.txt", oldString = "two", expect = "two", newString = "x"},
          {path = "f.txt", startLine = 1, endLine = 2, replaceAll = true, newString = "x"},
          {path = "f.txt", startLine = 3, endLine = 2, newString = "x"},
          {path = "f.txt", startLine = 2, newString = "x"},
          {path = "f.txt", endLine = 2, newString = "x"},
          {path = "f.txt", startLine = 0, endLine = 2, newString = "x"},
        }
        for _, input in ipairs(cases) do
          local out, err = sluice.edit(input)
          emit({out = out or false, code = err.code, field = err.field, message = err.message,
                text = tostring(err)})
        end"#,
    );
    let both =
        "give oldString or startLine/endLine, not both: they are two ways to anchor one edit.";
    let expected = [
        ("oldString", both),
        ("oldString", both),
        ("oldString", both),
        (
            "oldString",
            "edit needs an anchor: oldString, or startLine and endLine. Use write to create a file.",
        ),
        (
            "oldString",
            "oldString is empty, so it anchors nothing. Use write to create or replace a whole file.",
        ),
        (
            "expect",
            "expect checks a line range; with oldString the anchor already is the expected text. Drop expect.",
        ),
        (
            "replaceAll",
            "replaceAll goes with oldString; a line range already names one region.",
        ),
        (
            "endLine",
            "endLine 2 is before startLine 3; the range is inclusive, so give endLine >= startLine.",
        ),
        ("endLine", "startLine needs endLine (inclusive)."),
        ("startLine", "endLine needs startLine (1-based)."),
        ("startLine", "startLine is 1-based: give 1 or more."),
    ];
    assert_eq!(out.len(), expected.len(), "{out:#?}");
    for (got, (field, message)) in out.iter().zip(expected) {
        assert_eq!(
            got,
            &json!({
                "out": false,
                "code": "invalid_input",
                "field": field,
                "message": message,
                "text": format!("invalid_input: {message}"),
            })
        );
    }
    assert_eq!(ws.bytes("f.txt"), original);
    assert_eq!(ws.leftovers("."), Vec::<String>::new());
}

#[test]
fn anchor_combinations_are_refused_before_the_file_is_looked_at() {
    // invalid_input wins over not_found: the input is wrong whatever the disk holds.
    let ws = Ws::new();
    let (_, err) = ws.edit(json!({"path": "missing.txt", "oldString": "a", "startLine": 1, "endLine": 1, "newString": "x"}));
    assert_eq!(
        (&err["code"], &err["field"]),
        (&json!("invalid_input"), &json!("oldString"))
    );
}

#[test]
fn unknown_and_mistyped_fields_are_invalid_input_naming_the_field() {
    let ws = Ws::new();
    ws.put("f.txt", b"a\n");
    let out = ws.lua(
        r#"for _, input in ipairs({
          {path = "f.txt", oldstring = "a", newString = "b"},
          {path = "f.txt", startLine = "1", endLine = 1, newString = "b"},
          {path = "f.txt", startLine = -1, endLine = 1, newString = "b"},
          {path = "f.txt", oldString = "a"},
        }) do
          local _, err = sluice.edit(input)
          emit({code = err.code, field = err.field})
        end"#,
    );
    assert_eq!(
        out,
        vec![
            json!({"code": "invalid_input", "field": "oldstring"}),
            json!({"code": "invalid_input", "field": "startLine"}),
            json!({"code": "invalid_input", "field": "startLine"}),
            json!({"code": "invalid_input", "field": "newString"}),
        ]
    );
    assert_eq!(ws.bytes("f.txt"), b"a\n");
}

#[test]
fn edit_called_with_a_non_table_raises_a_lua_error() {
    let ws = Ws::new();
    ws.put("f.txt", b"a\n");
    let run = common::run_lua(&ws.root, r#"sluice.edit("f.txt")"#, &[]);
    assert_eq!(
        run.code, 1,
        "stdout:\n{}\nstderr:\n{}",
        run.stdout, run.stderr
    );
    assert!(
        run.stderr
            .contains("sluice.edit: expected a table of named fields, got string; call it as sluice.edit{path = \"...\"}"),
        "{}",
        run.stderr
    );
    assert_eq!(ws.bytes("f.txt"), b"a\n");
}

// ---------------------------------------------------------------------------
// Line-range anchor
// ---------------------------------------------------------------------------

#[test]
fn line_range_edit_replaces_the_inclusive_range_and_keeps_the_final_newline_outside_it() {
    let ws = Ws::new();
    ws.put("f.txt", b"one\ntwo\nthree\nfour\nfive\n");
    let (out, err) = ws.edit(
        json!({"path": "f.txt", "startLine": 2, "endLine": 3, "newString": "TWO\nTHREE\nEXTRA"}),
    );
    assert_eq!(err, false);
    assert_eq!(
        out,
        json!({
            "startLine": 1,
            "endLine": 6,
            "replacements": 1,
            "hunk": "one\nTWO\nTHREE\nEXTRA\nfour\nfive",
        })
    );
    assert_eq!(ws.bytes("f.txt"), b"one\nTWO\nTHREE\nEXTRA\nfour\nfive\n");
}

#[test]
fn line_range_edit_of_the_last_line_keeps_whether_the_file_ends_in_a_newline() {
    let ws = Ws::new();
    ws.put("with.txt", b"a\nb\n");
    ws.put("without.txt", b"a\nb");
    let (out, _) =
        ws.edit(json!({"path": "with.txt", "startLine": 2, "endLine": 2, "newString": "B"}));
    assert_eq!(
        out,
        json!({"startLine": 1, "endLine": 2, "replacements": 1, "hunk": "a\nB"})
    );
    let (out, _) =
        ws.edit(json!({"path": "without.txt", "startLine": 2, "endLine": 2, "newString": "B"}));
    assert_eq!(
        out,
        json!({"startLine": 1, "endLine": 2, "replacements": 1, "hunk": "a\nB"})
    );
    assert_eq!(ws.bytes("with.txt"), b"a\nB\n");
    assert_eq!(ws.bytes("without.txt"), b"a\nB");
}

#[test]
fn line_range_edit_with_an_empty_new_string_empties_the_lines_but_keeps_their_newline() {
    let ws = Ws::new();
    ws.put("f.txt", b"a\nb\nc\nd\n");
    let (out, _) = ws.edit(json!({"path": "f.txt", "startLine": 2, "endLine": 3, "newString": ""}));
    assert_eq!(
        out,
        json!({"startLine": 1, "endLine": 3, "replacements": 1, "hunk": "a\n\nd"})
    );
    assert_eq!(ws.bytes("f.txt"), b"a\n\nd\n");
}

#[test]
fn expect_that_matches_the_lines_applies_the_edit() {
    let ws = Ws::new();
    ws.put(
        "w.ts",
        b"export function widen(value: number): number {\n  return value * 2\n}\n",
    );
    let (out, err) = ws.edit(json!({
        "path": "w.ts",
        "startLine": 2,
        "endLine": 2,
        "expect": "  return value * 2",
        "newString": "  return value * 3",
    }));
    assert_eq!(err, false);
    assert_eq!(
        out,
        json!({
            "startLine": 1,
            "endLine": 3,
            "replacements": 1,
            "hunk": "export function widen(value: number): number {\n  return value * 3\n}",
        })
    );
    assert_eq!(
        ws.bytes("w.ts"),
        b"export function widen(value: number): number {\n  return value * 3\n}\n"
    );
}

#[test]
fn expect_that_does_not_match_is_no_match_carrying_what_the_lines_hold() {
    let ws = Ws::new();
    let original = b"one\ntwo\nthree\nfour\n";
    ws.put("f.txt", original);
    let shown = ws.shown("f.txt");
    let (out, err) = ws.edit(json!({
        "path": "f.txt",
        "startLine": 2,
        "endLine": 3,
        "expect": "two\nTHREE",
        "newString": "x",
    }));
    assert_eq!(out, false);
    assert_eq!(
        err,
        json!({
            "code": "no_match",
            "message": format!(
                "lines 2-3 of {shown} do not hold what expect says. They actually hold this, raw:\ntwo\nthree\n\n\
                 The file may have moved under your line numbers: copy the lines you meant from that text, or re-read it."
            ),
            "actual": {"startLine": 2, "endLine": 3, "content": "two\nthree"},
        })
    );
    // expect is the lines without their final newline; with it, it is a miss too.
    let (_, err) = ws.edit(json!({"path": "f.txt", "startLine": 2, "endLine": 3, "expect": "two\nthree\n", "newString": "x"}));
    assert_eq!(err["code"], "no_match");
    assert_eq!(ws.bytes("f.txt"), original);
    assert_eq!(ws.leftovers("."), Vec::<String>::new());
}

#[test]
fn line_range_past_the_end_is_offset_out_of_range() {
    let ws = Ws::new();
    let original = b"one\ntwo\nthree\n";
    ws.put("f.txt", original);
    ws.put("one.txt", b"only");
    let shown = ws.shown("f.txt");
    let (out, err) =
        ws.edit(json!({"path": "f.txt", "startLine": 3, "endLine": 4, "newString": "x"}));
    assert_eq!(out, false);
    assert_eq!(
        err,
        json!({
            "code": "offset_out_of_range",
            "message": format!("lines 3-4 run past the end of {shown}, which has 3 lines."),
            "startLine": 3,
            "endLine": 4,
            "totalLines": 3,
        })
    );
    let (_, err) =
        ws.edit(json!({"path": "f.txt", "startLine": 9, "endLine": 9, "newString": "x"}));
    assert_eq!(err["code"], "offset_out_of_range");
    let (_, err) =
        ws.edit(json!({"path": "one.txt", "startLine": 2, "endLine": 2, "newString": "x"}));
    assert_eq!(
        err["message"],
        format!(
            "lines 2-2 run past the end of {}, which has 1 line.",
            ws.shown("one.txt")
        )
    );
    assert_eq!(ws.bytes("f.txt"), original);
    assert_eq!(ws.bytes("one.txt"), b"only");
}

#[test]
fn line_range_in_an_empty_file_is_offset_out_of_range() {
    let ws = Ws::new();
    ws.put("empty.txt", b"");
    let (_, err) =
        ws.edit(json!({"path": "empty.txt", "startLine": 1, "endLine": 1, "newString": "x"}));
    assert_eq!(err["code"], "offset_out_of_range");
    assert_eq!(err["totalLines"], 0);
    assert_eq!(ws.bytes("empty.txt"), b"");
}

// ---------------------------------------------------------------------------
// CRLF files
// ---------------------------------------------------------------------------

#[test]
fn crlf_line_range_edit_keeping_the_cr_keeps_crlf_endings_byte_for_byte() {
    let ws = Ws::new();
    ws.put("c.txt", b"one\r\ntwo\r\nthree\r\nfour\r\n");
    let (out, err) = ws.edit(json!({
        "path": "c.txt",
        "startLine": 2,
        "endLine": 2,
        "expect": "two\r",
        "newString": "TWO\r",
    }));
    assert_eq!(err, false);
    assert_eq!(
        out,
        json!({"startLine": 1, "endLine": 4, "replacements": 1, "hunk": "one\r\nTWO\r\nthree\r\nfour\r"})
    );
    assert_eq!(ws.bytes("c.txt"), b"one\r\nTWO\r\nthree\r\nfour\r\n");
    // Several lines, the last one's \r kept by the caller.
    let (_, err) = ws.edit(json!({
        "path": "c.txt",
        "startLine": 3,
        "endLine": 4,
        "expect": "three\r\nfour\r",
        "newString": "3\r\n4\r\n5\r",
    }));
    assert_eq!(err, false);
    assert_eq!(ws.bytes("c.txt"), b"one\r\nTWO\r\n3\r\n4\r\n5\r\n");
}

#[test]
fn crlf_replacement_text_is_literal_so_a_dropped_cr_stays_dropped() {
    let ws = Ws::new();
    ws.put("c.txt", b"one\r\ntwo\r\nthree\r\n");
    let (_, err) =
        ws.edit(json!({"path": "c.txt", "startLine": 2, "endLine": 2, "newString": "TWO"}));
    assert_eq!(err, false);
    assert_eq!(ws.bytes("c.txt"), b"one\r\nTWO\nthree\r\n");
}

#[test]
fn crlf_exact_text_edit_with_an_anchor_copied_from_a_read_page_lands() {
    let ws = Ws::new();
    ws.put("c.txt", b"one\r\ntwo\r\nthree\r\nfour\r\n");
    let out = ws.lua(
        r#"local page = assert(sluice.read{path = "c.txt", offset = 2, limit = 2})
        emit(page.content)
        local out, err = sluice.edit{path = "c.txt", oldString = page.content, newString = "2\r\n3\r"}
        emit(out or err)"#,
    );
    assert_eq!(out[0], json!("two\r\nthree\r"));
    assert_eq!(
        out[1],
        json!({"startLine": 1, "endLine": 4, "replacements": 1, "hunk": "one\r\n2\r\n3\r\nfour\r"})
    );
    assert_eq!(ws.bytes("c.txt"), b"one\r\n2\r\n3\r\nfour\r\n");
}

#[test]
fn crlf_miss_with_an_lf_anchor_says_to_keep_the_carriage_returns() {
    let ws = Ws::new();
    let original = b"one\r\ntwo\r\nthree\r\n";
    ws.put("c.txt", original);
    let shown = ws.shown("c.txt");
    let (_, err) = ws.edit(json!({"path": "c.txt", "oldString": "one\ntwo", "newString": "x"}));
    assert_eq!(
        err,
        json!({
            "code": "no_match",
            "message": format!(
                "oldString does not occur in {shown}. The file has CRLF line endings: keep the \\r before each \\n in oldString. \
                 Lines 1-2 actually hold this, raw:\none\r\ntwo\r\n\n\
                 Copy the lines you meant from that text, or anchor by startLine/endLine instead."
            ),
            "path": shown,
            "nearest": {"startLine": 1, "endLine": 2, "content": "one\r\ntwo\r"},
        })
    );
    assert_eq!(ws.bytes("c.txt"), original);
}

// ---------------------------------------------------------------------------
// Modes, symlinks, leftovers
// ---------------------------------------------------------------------------

#[test]
fn edit_of_a_read_only_file_succeeds_by_rename_and_keeps_mode_0o444() {
    let ws = Ws::new();
    let p = ws.put("ro.txt", b"keep\nold\n");
    fs::set_permissions(&p, fs::Permissions::from_mode(0o444)).unwrap();
    let (out, err) = ws.edit(json!({"path": "ro.txt", "oldString": "old", "newString": "new"}));
    assert_eq!(err, false);
    assert_eq!(out["replacements"], 1);
    assert_eq!(ws.bytes("ro.txt"), b"keep\nnew\n");
    assert_eq!(mode_of(&p), 0o444);
    assert_eq!(names_in(&ws.root), vec!["ro.txt".to_string()]);
}

#[test]
fn edit_keeps_mode_0o751() {
    let ws = Ws::new();
    let p = ws.put("run.sh", b"#!/bin/sh\necho old\n");
    fs::set_permissions(&p, fs::Permissions::from_mode(0o751)).unwrap();
    let (_, err) =
        ws.edit(json!({"path": "run.sh", "startLine": 2, "endLine": 2, "newString": "echo new"}));
    assert_eq!(err, false);
    assert_eq!(ws.bytes("run.sh"), b"#!/bin/sh\necho new\n");
    assert_eq!(mode_of(&p), 0o751);
}

#[test]
fn edit_through_a_symlink_changes_the_target_and_keeps_the_link() {
    let ws = Ws::new();
    let target = ws.put("data/real.txt", b"a\nb\nc\n");
    fs::create_dir(ws.path("links")).unwrap();
    let link = ws.path("links/alias.txt");
    symlink("../data/real.txt", &link).unwrap();
    let (out, err) =
        ws.edit(json!({"path": "links/alias.txt", "oldString": "b", "newString": "B"}));
    assert_eq!(err, false);
    assert_eq!(
        out,
        json!({"startLine": 1, "endLine": 3, "replacements": 1, "hunk": "a\nB\nc"})
    );
    assert!(fs::symlink_metadata(&link)
        .unwrap()
        .file_type()
        .is_symlink());
    assert_eq!(
        fs::read_link(&link).unwrap(),
        PathBuf::from("../data/real.txt")
    );
    assert_eq!(fs::read(&target).unwrap(), b"a\nB\nc\n");
    assert!(fs::symlink_metadata(&target).unwrap().file_type().is_file());
    assert_eq!(names_in(&ws.path("links")), vec!["alias.txt".to_string()]);
    assert_eq!(names_in(&ws.path("data")), vec!["real.txt".to_string()]);
}

#[test]
fn edit_messages_through_a_symlink_show_the_path_as_given() {
    let ws = Ws::new();
    ws.put("real.txt", b"a\n");
    symlink("real.txt", ws.path("alias.txt")).unwrap();
    let (_, err) = ws.edit(json!({"path": "alias.txt", "oldString": "zzz", "newString": "x"}));
    assert_eq!(err["path"], ws.shown("alias.txt"));
}

#[test]
fn edit_through_a_symlink_leading_out_of_the_workspace_needs_approval() {
    let ws = Ws::new();
    let outside = common::workspace();
    let secret = fs::canonicalize(outside.path()).unwrap().join("secret.txt");
    fs::write(&secret, b"secret\n").unwrap();
    symlink(&secret, ws.path("escape.txt")).unwrap();
    let (out, err) =
        ws.edit(json!({"path": "escape.txt", "oldString": "secret", "newString": "pwned"}));
    assert_eq!(out, false);
    assert_eq!(err["code"], "permission_required");
    assert_eq!(fs::read(&secret).unwrap(), b"secret\n");
    assert_eq!(sluice_files(secret.parent().unwrap()), Vec::<String>::new());
}

#[test]
fn no_sluice_files_are_left_beside_the_file_after_edits_and_misses() {
    let ws = Ws::new();
    ws.put("sub/f.txt", b"a\nb\nb\nc\n");
    let out = ws.lua(
        r#"local results = {}
        local function go(input)
          local out, err = sluice.edit(input)
          results[#results + 1] = out and "ok" or err.code
        end
        go{path = "sub/f.txt", oldString = "a", newString = "A"}
        go{path = "sub/f.txt", oldString = "b", newString = "B", replaceAll = true}
        go{path = "sub/f.txt", startLine = 4, endLine = 4, newString = "C"}
        go{path = "sub/f.txt", oldString = "zzz", newString = "x"}
        go{path = "sub/f.txt", oldString = "B", newString = "x"}
        go{path = "sub/f.txt", startLine = 1, endLine = 1, expect = "nope", newString = "x"}
        go{path = "sub/f.txt", startLine = 7, endLine = 7, newString = "x"}
        emit(results)"#,
    );
    assert_eq!(
        out[0],
        json!([
            "ok",
            "ok",
            "ok",
            "no_match",
            "invalid_input",
            "no_match",
            "offset_out_of_range"
        ])
    );
    assert_eq!(ws.bytes("sub/f.txt"), b"A\nB\nB\nC\n");
    assert_eq!(names_in(&ws.path("sub")), vec!["f.txt".to_string()]);
}

// ---------------------------------------------------------------------------
// What is not an editable file
// ---------------------------------------------------------------------------

#[test]
fn editing_a_missing_file_is_not_found_naming_the_nearest_folder() {
    let ws = Ws::new();
    let (out, err) =
        ws.edit(json!({"path": "nope/deeper/missing.txt", "oldString": "a", "newString": "b"}));
    assert_eq!(out, false);
    let shown = ws.shown("nope/deeper/missing.txt");
    let nearest = ws.root.display().to_string();
    assert_eq!(
        err,
        json!({
            "code": "not_found",
            "message": format!(
                "{shown} does not exist. The nearest existing folder is {nearest}; list it with ls to see what it holds."
            ),
            "path": shown,
            "nearest": nearest,
        })
    );
    let (_, err) =
        ws.edit(json!({"path": "missing.txt", "startLine": 1, "endLine": 1, "newString": "b"}));
    assert_eq!(err["code"], "not_found");
    assert_eq!(
        names_in(&ws.root),
        Vec::<String>::new(),
        "an edit creates nothing"
    );
}

#[test]
fn editing_a_directory_is_is_directory() {
    let ws = Ws::new();
    fs::create_dir(ws.path("dir")).unwrap();
    let shown = ws.shown("dir");
    let (out, err) = ws.edit(json!({"path": "dir", "oldString": "a", "newString": "b"}));
    assert_eq!(out, false);
    assert_eq!(
        err,
        json!({
            "code": "is_directory",
            "message": format!("{shown} is a directory; list it with ls, or name a file inside it."),
            "path": shown,
        })
    );
    assert_eq!(names_in(&ws.root), vec!["dir".to_string()]);
}

#[test]
fn editing_a_binary_file_is_binary_file_and_leaves_it_and_no_lock() {
    let ws = Ws::new();
    ws.put("nul.bin", b"ab\0cd\n");
    ws.put("latin1.txt", b"caf\xe9\n");
    let (out, err) = ws.edit(json!({"path": "nul.bin", "oldString": "ab", "newString": "x"}));
    assert_eq!(out, false);
    assert_eq!(
        err,
        json!({
            "code": "binary_file",
            "message": format!(
                "{} holds a NUL byte at byte 2: it is a binary file, and text flows only handle UTF-8 text.",
                ws.shown("nul.bin")
            ),
            "path": ws.shown("nul.bin"),
            "offset": 2,
        })
    );
    let (_, err) =
        ws.edit(json!({"path": "latin1.txt", "startLine": 1, "endLine": 1, "newString": "x"}));
    assert_eq!(err["code"], "binary_file");
    assert_eq!(err["offset"], 3);
    assert_eq!(ws.bytes("nul.bin"), b"ab\0cd\n");
    assert_eq!(ws.bytes("latin1.txt"), b"caf\xe9\n");
    assert_eq!(
        names_in(&ws.root),
        vec!["latin1.txt".to_string(), "nul.bin".to_string()]
    );
}

#[test]
fn editing_below_a_file_is_not_a_directory() {
    let ws = Ws::new();
    ws.put("f.txt", b"a\n");
    let (_, err) = ws.edit(json!({"path": "f.txt/inner.txt", "oldString": "a", "newString": "b"}));
    assert_eq!(err["code"], "not_a_directory");
    assert_eq!(ws.bytes("f.txt"), b"a\n");
}

// ---------------------------------------------------------------------------
// The read → edit loop
// ---------------------------------------------------------------------------

#[test]
fn read_page_then_line_range_edit_with_expect_then_read_back() {
    let ws = Ws::new();
    let original: String = (1..=3000).map(|i| format!("line {i}\n")).collect();
    ws.put("big.txt", original.as_bytes());
    let out = ws.lua(
        r#"local page = assert(sluice.read{path = "big.txt", offset = 1500, limit = 3})
        emit(page)
        local applied, err = sluice.edit{
          path = "big.txt",
          startLine = page.startLine,
          endLine = page.endLine,
          expect = page.content,
          newString = "changed 1500\nchanged 1501",
        }
        emit(applied or err)
        emit(assert(sluice.read{path = "big.txt", offset = applied.startLine, limit = applied.endLine - applied.startLine + 1}))
        -- The same page again is stale now: the lines moved under it.
        local again, stale = sluice.edit{
          path = "big.txt", startLine = page.startLine, endLine = page.endLine,
          expect = page.content, newString = "never",
        }
        emit({again = again or false, code = stale.code, actual = stale.actual})"#,
    );
    assert_eq!(
        out[0],
        json!({
            "content": "line 1500\nline 1501\nline 1502",
            "startLine": 1500,
            "endLine": 1502,
            "totalLines": 3000,
            "truncated": true,
            "notice": "Showing lines 1500-1502 of 3000. Continue with offset = 1503.",
        })
    );
    assert_eq!(
        out[1],
        json!({
            "startLine": 1498,
            "endLine": 1503,
            "replacements": 1,
            "hunk": "line 1498\nline 1499\nchanged 1500\nchanged 1501\nline 1503\nline 1504",
        })
    );
    assert_eq!(out[2]["content"], out[1]["hunk"]);
    assert_eq!(out[2]["startLine"], 1498);
    assert_eq!(out[2]["endLine"], 1503);
    assert_eq!(out[2]["totalLines"], 2999);
    assert_eq!(
        out[3],
        json!({
            "again": false,
            "code": "no_match",
            "actual": {"startLine": 1500, "endLine": 1502, "content": "changed 1500\nchanged 1501\nline 1503"},
        })
    );
    let expected: String = (1..=3000)
        .filter_map(|i| match i {
            1500 => Some("changed 1500\n".to_string()),
            1501 => Some("changed 1501\n".to_string()),
            1502 => None,
            _ => Some(format!("line {i}\n")),
        })
        .collect();
    assert_eq!(String::from_utf8(ws.bytes("big.txt")).unwrap(), expected);
    assert_eq!(names_in(&ws.root), vec!["big.txt".to_string()]);
}

#[test]
fn edit_replaces_by_rename_so_a_hard_link_keeps_the_old_contents() {
    let ws = Ws::new();
    ws.put("a.txt", b"old\n");
    fs::hard_link(ws.path("a.txt"), ws.path("b.txt")).unwrap();
    let (_, err) = ws.edit(json!({"path": "a.txt", "oldString": "old", "newString": "new"}));
    assert_eq!(err, false);
    assert_eq!(ws.bytes("a.txt"), b"new\n");
    assert_eq!(ws.bytes("b.txt"), b"old\n");
}

#[test]
fn edit_of_a_file_with_a_250_byte_name_works_and_leaves_nothing_beside_it() {
    let ws = Ws::new();
    let name = format!("{}.txt", "n".repeat(246));
    assert_eq!(name.len(), 250);
    ws.put(&name, b"a\nb\n");
    let (out, err) = ws.edit(json!({"path": name, "oldString": "b", "newString": "B"}));
    assert_eq!(err, false);
    assert_eq!(out["replacements"], 1);
    assert_eq!(ws.bytes(&name), b"a\nB\n");
    assert_eq!(names_in(&ws.root), vec![name]);
}

#[test]
fn edit_keeps_the_owner_group_and_set_id_bits_of_a_file_owned_by_someone_else() {
    use std::os::unix::fs::MetadataExt;
    assert!(
        nix::unistd::geteuid().is_root(),
        "this test changes a file's owner and needs root: run scripts/test as root (CI does)"
    );
    let ws = Ws::new();
    let p = ws.put("owned.sh", b"#!/bin/sh\necho old\n");
    std::os::unix::fs::chown(&p, Some(4321), Some(4322)).unwrap();
    fs::set_permissions(&p, fs::Permissions::from_mode(0o4755)).unwrap();
    let (_, err) = ws.edit(json!({"path": "owned.sh", "oldString": "old", "newString": "new"}));
    assert_eq!(err, false);
    let meta = fs::metadata(&p).unwrap();
    assert_eq!((meta.uid(), meta.gid()), (4321, 4322));
    assert_eq!(meta.mode() & 0o7777, 0o4755);
    assert_eq!(ws.bytes("owned.sh"), b"#!/bin/sh\necho new\n");
}
