//! The record on both stores, through the real binary: a run recorded in
//! SQLite and in PostgreSQL lists, shows, exports and verifies alike.

mod common;

use common::stores::{exec, one};
use common::*;
use sluice::internals::audit::db::Val;

both_stores! {
    fn a_run_is_recorded_listed_shown_and_verified(store) {
        let ws = workspace();
        run_lua(ws.path(), "sluice.write{path = 'a', content = 'x'}\nsluice.read{path = 'a'}\n", &[]).ok();
        let db = store.db(ws.path());
        assert_eq!(one::<i64>(&*db, "SELECT count(*) FROM calls", &[]), 2);
        let list = sluice_in(ws.path(), &["audit", "list"]);
        assert_eq!(list.code, 0, "{}", list.stderr);
        let show = sluice_in(ws.path(), &["audit", "show", "last"]);
        assert_eq!(show.code, 0, "{}", show.stderr);
        assert!(show.stdout.contains("write"), "{}", show.stdout);
        let verify = sluice_in(ws.path(), &["audit", "verify"]);
        assert_eq!(verify.code, 0, "{}{}", verify.stdout, verify.stderr);
        exec(&*db, "UPDATE calls SET input = ?1 WHERE n = 1", &[Val::from("{\"path\":\"b\"}")]);
        let verify = sluice_in(ws.path(), &["audit", "verify"]);
        assert_eq!(verify.code, 1, "{}{}", verify.stdout, verify.stderr);
    }
}
