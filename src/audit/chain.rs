//! Tamper evidence: how the hashes of a run's record are computed, by the
//! writer and by `sluice audit verify` alike.
//!
//! - `head`: SHA-256 of the run's fixed fields; the chain starts there.
//!   Since schema 2 it also covers the run's link to the run before it
//!   ([`RunLink`]): its place `n` among the database's runs and `prior`, the
//!   predecessor's seal (or, while that run was still live or when it was
//!   killed unsealed, the hash of its last row written by then, or its
//!   head), so deleting, replacing or editing a whole earlier run breaks the
//!   run after it;
//! - each call row: `hash` = SHA-256(`prev` + its intent fields), where
//!   `prev` is the previous row's `hash` (by `n`) or the run's `head`, so an
//!   edited, deleted or reordered row breaks every link after it. Since
//!   schema 3 a row whose input's list items are kept by content also covers
//!   its `parts` column, the items' SHA-256 keys (each body must hash to its
//!   key), so an edited, removed or reordered message shows; a row without
//!   it hashes as it always did. Since schema 4 a call that came from
//!   outside the script (an MCP client) also covers its `client` column,
//!   after `parts`, so who made the call cannot be rewritten; a row without
//!   one hashes as it did before;
//! - its outcome, once known: `outcome_hash` = SHA-256(`hash` + outcome
//!   fields (the output by its own SHA-256), with the list of what was
//!   redacted, which only the outcome completes), so an outcome cannot be
//!   swapped between calls;
//! - the `seal`, when the run ends: SHA-256 of the head, every row's hashes,
//!   every clock reading, every module the script required (since schema
//!   7: its name, file and SHA-256, after the readings; a run that required
//!   none seals as before) and the final status, so dropping the last rows
//!   or an outcome, swapping a module's text, or rewriting the status,
//!   shows too.
//!
//! - `joined`, for a run `sluice audit copy` brought in from another store:
//!   its head keeps covering the link it was recorded with there (kept in
//!   `origin`), and this hash covers the run's head, its tip (seal, else
//!   last row, else head) and row count, and its link in this store, so
//!   the run after it commits to it in place of its seal, and the run
//!   cannot move, or lose rows, inside this store unseen;
//!
//! - the `anchor`, for keeping outside the database: SHA-256 of the number
//!   of runs and the newest run's seal (or last row, or head), so a record
//!   rolled back to an older copy, or whose newest run was deleted, no longer
//!   holds it.
//!
//! Fields are hashed as stored (the JSON text, not a re-encoding), each with
//! its length in front so no two field lists hash alike; an absent field
//! differs from an empty one.

use crate::digest::{hex, sha256_hex};
use sha2::{Digest, Sha256};

/// Tells the hashes of this format from any other use of SHA-256.
const DOMAIN: &[u8] = b"sluice-audit-v1";

/// A run's fixed fields: what the chain starts from.
#[derive(Debug, Clone, Copy)]
pub struct RunHead<'a> {
    pub id: &'a str,
    pub script: &'a str,
    pub script_sha256: Option<&'a str>,
    pub policies: &'a str,
    pub args: &'a str,
    pub workspace: &'a str,
    pub started_ms: i64,
    pub version: &'a str,
    pub random_seed: i64,
    pub resumed_from: Option<&'a str>,
    /// JSON list of the run's ceiling patterns.
    pub ceiling: &'a str,
    /// The process that made the run, which the sweep judges alive or not.
    pub pid: i64,
    pub pid_start: i64,
    /// Its link to the run before it; `None` for a run recorded before runs
    /// were chained (schema 1), whose head is computed as it was then.
    pub link: Option<RunLink<'a>>,
}

/// Where a run stands in its database's chain of runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RunLink<'a> {
    /// Its place among the database's runs, from 1, in the order they
    /// started (taken under the write lock).
    pub n: i64,
    /// The hash of the run before it this run commits to; `None` for the
    /// first run of a database.
    pub prior: Option<&'a str>,
    /// Which hash `prior` is: `None` for the predecessor's seal; `Some(k)`
    /// for the hash of its row #k (`Some(0)`: its head), when it had no seal
    /// yet because it was still live or had been killed.
    pub prior_rows: Option<i64>,
}

/// A call row's fields known before the call runs.
#[derive(Debug, Clone, Copy)]
pub struct CallIntent<'a> {
    pub task: &'a str,
    pub seq: i64,
    pub n: i64,
    pub flow: &'a str,
    pub tier: &'a str,
    pub input: &'a str,
    pub capabilities: &'a str,
    pub decisions: &'a str,
    pub route: Option<&'a str>,
    pub replayed_from: Option<&'a str>,
    pub started_ms: i64,
    /// The `parts` column, `{FIELD: [sha256]}`, when the input's list field
    /// FIELD is kept by content (`input` is then the input without it);
    /// `None` for an input stored whole.
    pub parts: Option<&'a str>,
    /// The `client` column: who made the call when it came from outside
    /// the script (an MCP client's name and version); `None` for the
    /// script's own calls.
    pub client: Option<&'a str>,
}

/// A call row's outcome fields.
#[derive(Debug, Clone, Copy)]
pub struct CallOutcome<'a> {
    pub status: &'a str,
    pub output: Option<&'a str>,
    pub error: Option<&'a str>,
    pub capped: bool,
    pub duration_us: i64,
    /// JSON list of decisions made while the call ran.
    pub late_decisions: &'a str,
    /// JSON list of what was redacted from the input, output and error
    /// (known whole only when the outcome is).
    pub redacted: &'a str,
}

/// A clock reading the script saw.
#[derive(Debug, Clone, Copy)]
pub struct Reading<'a> {
    pub task: &'a str,
    pub seq: i64,
    pub kind: &'a str,
    pub value: f64,
}

/// A module the script required, as the seal covers it: its text by its
/// SHA-256 (the text itself is kept by content, and must hash to it).
#[derive(Debug, Clone, Copy)]
pub struct Module<'a> {
    /// Its place in the order the run loaded modules, from 1.
    pub k: i64,
    /// The name `require` was given.
    pub name: &'a str,
    /// The file it was loaded from.
    pub path: &'a str,
    pub sha256: &'a str,
}

/// The run's last state, covered by the seal.
#[derive(Debug, Clone, Copy)]
pub struct RunEnd<'a> {
    pub status: &'a str,
    pub error: Option<&'a str>,
    pub ended_ms: i64,
}

#[derive(Clone)]
struct Hasher(Sha256);

impl Hasher {
    fn new(kind: &str) -> Hasher {
        let mut h = Hasher(Sha256::new());
        h.field(Some(DOMAIN));
        h.text(kind);
        h
    }

    fn field(&mut self, bytes: Option<&[u8]>) {
        match bytes {
            Some(b) => {
                self.0.update((b.len() as u64).to_le_bytes());
                self.0.update(b);
            }
            None => self.0.update(u64::MAX.to_le_bytes()),
        }
    }

    fn text(&mut self, s: &str) {
        self.field(Some(s.as_bytes()));
    }

    fn opt(&mut self, s: Option<&str>) {
        self.field(s.map(str::as_bytes));
    }

    fn int(&mut self, i: i64) {
        self.text(&i.to_string());
    }

    fn finish(self) -> String {
        hex(&self.0.finalize())
    }
}

pub fn head(run: &RunHead) -> String {
    let mut h = Hasher::new("run");
    h.text(run.id);
    h.text(run.script);
    h.opt(run.script_sha256);
    h.text(run.policies);
    h.text(run.args);
    h.text(run.workspace);
    h.int(run.started_ms);
    h.text(run.version);
    h.int(run.random_seed);
    h.opt(run.resumed_from);
    h.text(run.ceiling);
    h.int(run.pid);
    h.int(run.pid_start);
    // Appended, so a schema 1 head hashes as it always did.
    if let Some(link) = run.link {
        h.text("link");
        h.int(link.n);
        h.opt(link.prior);
        h.opt(link.prior_rows.map(|k| k.to_string()).as_deref());
    }
    h.finish()
}

/// The anchor of a record holding `runs` runs whose newest one's seal (or
/// last row's hash, or head) is `tip`.
pub fn anchor(runs: i64, tip: &str) -> String {
    let mut h = Hasher::new("anchor");
    h.int(runs);
    h.text(tip);
    h.finish()
}

/// The hash of a copied run's place in the store it was copied into: its
/// `head`, `tip` (its seal, else its last row's hash, else its head) and
/// `rows` (how many it holds), and `link`, its place and predecessor there.
pub fn joined(head: &str, tip: &str, rows: i64, link: &RunLink) -> String {
    let mut h = Hasher::new("joined");
    h.text(head);
    h.text(tip);
    h.int(rows);
    h.int(link.n);
    h.opt(link.prior);
    h.opt(link.prior_rows.map(|k| k.to_string()).as_deref());
    h.finish()
}

pub fn call(prev: &str, c: &CallIntent) -> String {
    let mut h = Hasher::new("call");
    h.text(prev);
    h.text(c.task);
    h.int(c.seq);
    h.int(c.n);
    h.text(c.flow);
    h.text(c.tier);
    h.text(c.input);
    h.text(c.capabilities);
    h.text(c.decisions);
    h.opt(c.route);
    h.opt(c.replayed_from);
    h.int(c.started_ms);
    // Appended, so a row without parts hashes as it did before schema 3.
    if let Some(parts) = c.parts {
        h.text("parts");
        h.text(parts);
    }
    // Appended after parts for the same reason: a row without a client
    // hashes as it did before schema 4. Its own tag keeps a client from
    // passing for parts.
    if let Some(client) = c.client {
        h.text("client");
        h.text(client);
    }
    h.finish()
}

#[cfg_attr(not(test), allow(dead_code))]
pub fn outcome(call_hash: &str, o: &CallOutcome) -> String {
    let digest = o.output.map(|text| sha256_hex(text.as_bytes()));
    outcome_of(call_hash, o, digest.as_deref())
}

/// [`outcome`] with the output given by its SHA-256 (`o.output` unused):
/// the writer has the digest already, as the key of an output kept by
/// content, and need not hash the text twice.
pub fn outcome_of(call_hash: &str, o: &CallOutcome, output_sha256: Option<&str>) -> String {
    let mut h = Hasher::new("outcome");
    h.text(call_hash);
    h.text(o.status);
    h.opt(output_sha256);
    h.opt(o.error);
    h.text(if o.capped { "1" } else { "0" });
    h.int(o.duration_us);
    h.text(o.late_decisions);
    h.text(o.redacted);
    h.finish()
}

/// Builds a seal from the run's parts, in chain order. A clone is the seal
/// so far, to finish without ending the original.
#[derive(Clone)]
pub struct Seal(Hasher);

impl Seal {
    pub fn new(head: &str) -> Seal {
        let mut h = Hasher::new("seal");
        h.text(head);
        Seal(h)
    }

    pub fn row(&mut self, hash: &str, outcome_hash: Option<&str>) {
        self.0.text(hash);
        self.0.opt(outcome_hash);
    }

    pub fn reading(&mut self, r: &Reading) {
        self.0.text(r.task);
        self.0.int(r.seq);
        self.0.text(r.kind);
        self.0.text(&format!("{:?}", r.value));
    }

    /// A module the script required; after every reading. Its own tag
    /// keeps it from passing for a reading.
    pub fn module(&mut self, m: &Module) {
        self.0.text("module");
        self.0.int(m.k);
        self.0.text(m.name);
        self.0.text(m.path);
        self.0.text(m.sha256);
    }

    pub fn finish(mut self, end: &RunEnd) -> String {
        self.0.text("end");
        self.0.text(end.status);
        self.0.opt(end.error);
        self.0.int(end.ended_ms);
        self.0.finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn intent<'a>(input: &'a str, route: Option<&'a str>) -> CallIntent<'a> {
        CallIntent {
            task: "0",
            seq: 1,
            n: 1,
            flow: "read",
            tier: "sealed",
            input,
            capabilities: "[]",
            decisions: "[]",
            route,
            replayed_from: None,
            started_ms: 5,
            parts: None,
            client: None,
        }
    }

    #[test]
    fn sha256_of_abc_is_the_standard_vector() {
        assert_eq!(
            sha256_hex(b"abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }

    #[test]
    fn a_changed_field_or_link_changes_the_hash() {
        let base = call("p", &intent("{}", None));
        assert_eq!(base, call("p", &intent("{}", None)));
        assert_ne!(base, call("q", &intent("{}", None)));
        assert_ne!(base, call("p", &intent("{ }", None)));
        // An absent route is not an empty one.
        assert_ne!(base, call("p", &intent("{}", Some(""))));
    }

    fn run_head(link: Option<RunLink<'_>>) -> String {
        head(&RunHead {
            id: "r",
            script: "s.lua",
            script_sha256: None,
            policies: "[]",
            args: "[]",
            workspace: "/w",
            started_ms: 1,
            version: "0.1.0",
            random_seed: 7,
            resumed_from: None,
            ceiling: "[]",
            pid: 2,
            pid_start: 3,
            link,
        })
    }

    #[test]
    fn a_head_covers_the_link_and_a_schema_1_head_is_unchanged() {
        // The head of these fields as schema 1 computed it (recomputed by
        // hand from the format in the module doc).
        assert_eq!(
            run_head(None),
            "4c53b893330e25a5a0c0f0f72a49d5820bdf374e67ad9c9e09bbebc2548a2749"
        );
        let link = |n, prior, prior_rows| RunLink {
            n,
            prior,
            prior_rows,
        };
        let first = run_head(Some(link(1, None, None)));
        assert_ne!(first, run_head(None));
        assert_ne!(first, run_head(Some(link(2, None, None))));
        let sealed = run_head(Some(link(2, Some("a"), None)));
        assert_ne!(sealed, run_head(Some(link(2, Some("b"), None))));
        assert_ne!(sealed, run_head(Some(link(2, Some("a"), Some(0)))));
        assert_ne!(
            run_head(Some(link(2, Some("a"), Some(1)))),
            run_head(Some(link(2, Some("a"), Some(0))))
        );
    }

    #[test]
    fn a_copy_link_covers_the_tip_the_rows_and_the_place() {
        let link = |n, prior| RunLink {
            n,
            prior,
            prior_rows: None,
        };
        let base = joined("h", "t", 3, &link(4, Some("p")));
        assert_eq!(base, joined("h", "t", 3, &link(4, Some("p"))));
        assert_ne!(base, joined("g", "t", 3, &link(4, Some("p"))));
        assert_ne!(base, joined("h", "u", 3, &link(4, Some("p"))));
        assert_ne!(base, joined("h", "t", 2, &link(4, Some("p"))));
        assert_ne!(base, joined("h", "t", 3, &link(5, Some("p"))));
        assert_ne!(base, joined("h", "t", 3, &link(4, Some("q"))));
        assert_ne!(base, joined("h", "t", 3, &link(4, None)));
    }

    #[test]
    fn an_anchor_covers_the_run_count_and_the_tip() {
        assert_ne!(anchor(3, "t"), anchor(4, "t"));
        assert_ne!(anchor(3, "t"), anchor(3, "u"));
        assert_eq!(anchor(3, "t").len(), 64);
    }

    #[test]
    fn a_row_without_parts_hashes_as_before_and_parts_are_covered() {
        // The hash of this intent before schema 3 (recomputed by hand from
        // the format in the module doc).
        let base = call("p", &intent("{}", None));
        assert_eq!(
            base,
            "0bb1fd317d5a6016643b57b038a6dfefefaba53eba6f86a832d4de7abc6d53f7"
        );
        let mut with = intent("{}", None);
        with.parts = Some(r#"{"messages":["a"]}"#);
        assert_ne!(call("p", &with), base);
        let mut other = intent("{}", None);
        other.parts = Some(r#"{"messages":["b"]}"#);
        assert_ne!(call("p", &with), call("p", &other));
    }

    #[test]
    fn a_row_without_client_hashes_as_before_and_the_client_is_covered() {
        // Rows of schema 3, with and without parts, hash as they did then
        // (recomputed by hand from the format in the module doc), so
        // records written before schema 4 still verify.
        let parts = r#"{"messages":["a"]}"#;
        let mut with_parts = intent("{}", None);
        with_parts.parts = Some(parts);
        assert_eq!(
            call("p", &with_parts),
            "a220798bac014851df457eef3e6aa4430f99ca320df08afce18c4b8a04749c08"
        );
        let mut client = intent("{}", None);
        client.client = Some("claude-code 1.2.3");
        assert_eq!(
            call("p", &client),
            "01c0c4a7f44cbdc6b2fdbb90fc54dbcdeddec87c3bea05f7004f77c292cf671b"
        );
        let mut both = with_parts;
        both.client = Some("claude-code 1.2.3");
        assert_eq!(
            call("p", &both),
            "0f2282803e3f980f495657a3a97aca2454ad200ee0d6975e0e587cafa200e53d"
        );
        // Another client, or an empty one, is another hash.
        let mut other = client;
        other.client = Some("claude-code 1.2.4");
        assert_ne!(call("p", &other), call("p", &client));
        other.client = Some("");
        assert_ne!(call("p", &other), call("p", &intent("{}", None)));
        // A client is not parts that say the same.
        let mut posing = intent("{}", None);
        posing.parts = Some("claude-code 1.2.3");
        assert_ne!(call("p", &posing), call("p", &client));
    }

    #[test]
    fn a_seal_without_modules_is_unchanged_and_each_modules_field_is_covered() {
        let end = RunEnd {
            status: "ok",
            error: None,
            ended_ms: 9,
        };
        // The seal of a run with no module, as every schema before 7 made
        // it (recomputed by hand from the format in the module doc).
        let mut plain = Seal::new("h");
        plain.row("r1", Some("o1"));
        assert_eq!(
            plain.clone().finish(&end),
            "b29fd6c4dc60751af2f5d2ae1d8c2ab968568c16fb4b069c97ea793bdf46cb50"
        );
        let m = Module {
            k: 1,
            name: "util",
            path: "/w/util.lua",
            sha256: "aa",
        };
        let sealed = |m: &Module| {
            let mut s = plain.clone();
            s.module(m);
            s.finish(&end)
        };
        let base = sealed(&m);
        assert_ne!(base, plain.clone().finish(&end));
        assert_ne!(base, sealed(&Module { k: 2, ..m }));
        assert_ne!(base, sealed(&Module { name: "utils", ..m }));
        assert_ne!(
            base,
            sealed(&Module {
                path: "/w/u.lua",
                ..m
            })
        );
        assert_ne!(base, sealed(&Module { sha256: "ab", ..m }));
    }

    #[test]
    fn field_boundaries_are_part_of_the_hash() {
        let mut a = intent("ab", None);
        a.capabilities = "c";
        let mut b = intent("a", None);
        b.capabilities = "bc";
        assert_ne!(call("p", &a), call("p", &b));
    }
}
