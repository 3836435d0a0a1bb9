//! ARCHITECTURE.md's worked example of a new flow, built and run here: one
//! file (`count.rs`) plus one registry line (`r.add::<count::Count>()`),
//! and the flow passes the whole door (`pipeline::tests` calls it).

pub(crate) mod count;
