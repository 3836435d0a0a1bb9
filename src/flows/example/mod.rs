//! ARCHITECTURE.md's worked example of a new flow, built and run here: one
//! file (`count.rs`) plus one registry line (`r.add::<count::Count>()`),
//! and the flow passes the whole door.

mod count;

#[cfg(test)]
mod tests {
    use super::count::Count;
    use crate::audit::session::Session;
    use crate::flows::{Context, Registry};
    use crate::kernel::approval::{Approver, Prompt};
    use crate::kernel::gate::Gate;
    use crate::kernel::pattern::Vars;
    use crate::kernel::policy::{shipped, Policy};
    use crate::kernel::Kernel;
    use crate::pipeline::Core;
    use crate::ErrorCode;
    use serde_json::json;

    /// A run's core under the default policy, with the example flow added.
    fn core(ws: &std::path::Path) -> Core {
        let mut registry = Registry::standard();
        registry.add::<Count>();
        let vars = Vars::new(ws.to_path_buf());
        let policy = Policy::load(shipped("default").unwrap(), vars.clone());
        let gate = Gate {
            kernel: Kernel::new(vec![policy], Vec::new(), vars),
            approver: Approver::new(Vec::new(), Prompt::Unattended),
        };
        let ctx = Context::new(ws.to_path_buf(), "example".into(), String::new());
        Core::new(registry, gate, ctx, Session::default())
    }

    fn block_on<F: std::future::Future>(f: F) -> F::Output {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
            .block_on(f)
    }

    #[test]
    fn a_new_flow_is_one_file_and_one_registry_line_and_passes_the_door() {
        let dir = tempfile::tempdir().unwrap();
        let ws = std::fs::canonicalize(dir.path()).unwrap();
        std::fs::write(ws.join("a.txt"), "one\ntwo\nthree").unwrap();
        std::fs::write(ws.join(".env"), "KEY=1\n").unwrap();
        let core = core(&ws);
        assert!(core.registry().specs().any(|s| s.name == "count"));
        let out = block_on(core.call("count", json!({"path": "a.txt"}))).unwrap();
        assert_eq!(out, json!({"lines": 3}));
        // The door decodes its input like any flow's...
        let e = block_on(core.call("count", json!({"path": "a.txt", "x": 1}))).unwrap_err();
        assert_eq!(e.code, ErrorCode::InvalidInput);
        assert_eq!(e.details["field"], "x");
        // ...and authorizes its envelope: the default policy denies .env.
        let e = block_on(core.call("count", json!({"path": ".env"}))).unwrap_err();
        assert_eq!(e.code, ErrorCode::PermissionDenied, "{}", e.message);
    }
}
