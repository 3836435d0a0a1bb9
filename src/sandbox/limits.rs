//! The resource limits a confined command runs under: the strictest value
//! the policies' `limits` give each, and which policy gave it (for the
//! notice that says where to raise a limit the command hit). The executor
//! enforces them ([`crate::exec::resources`]); this is what a profile and
//! a result carry.

use crate::exec::resources::{Kind, Report, ResourceLimits, Settled};

/// A command's limits and where each comes from.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Limits {
    pub values: ResourceLimits,
    /// The policy that set each limit's value (the first, when several
    /// set the same).
    set_by: Vec<(Kind, String)>,
}

impl Limits {
    /// The strictest of `policies`' limits, each with its policy's name.
    pub fn of(policies: &[(String, ResourceLimits)]) -> Limits {
        let mut out = Limits::default();
        for (name, limits) in policies {
            let before = out.values;
            out.values = out.values.strictest(*limits);
            for (kind, value) in out.values.iter() {
                if before.get(kind) != Some(value) {
                    out.set_by.retain(|(k, _)| *k != kind);
                    out.set_by.push((kind, name.clone()));
                }
            }
        }
        out
    }

    /// Whether no limit is set.
    pub fn is_empty(&self) -> bool {
        self.values.is_empty()
    }

    /// The policy that set `kind`.
    fn set_by(&self, kind: Kind) -> String {
        self.set_by
            .iter()
            .find(|(k, _)| *k == kind)
            .map_or_else(|| "the policy".to_string(), |(_, p)| format!("policy {p}"))
    }

    /// A result's `limits` for a command whose limits `settled` so, that
    /// ended with `status` having said `said`.
    pub fn report(&self, settled: &Settled, status: i32, said: &str) -> Report {
        settled.report(status, said, &|k| self.set_by(k))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits(pairs: &[(Kind, u64)]) -> ResourceLimits {
        let mut l = ResourceLimits::default();
        for &(k, v) in pairs {
            l.set(k, v);
        }
        l
    }

    #[test]
    fn the_strictest_value_of_each_limit_wins_and_names_its_policy() {
        let chosen = Limits::of(&[
            (
                "default".into(),
                limits(&[(Kind::MemoryMb, 8192), (Kind::Pids, 1024)]),
            ),
            (
                "tight.lua".into(),
                limits(&[(Kind::MemoryMb, 64), (Kind::Pids, 4096)]),
            ),
        ]);
        assert_eq!(chosen.values.get(Kind::MemoryMb), Some(64));
        assert_eq!(chosen.values.get(Kind::Pids), Some(1024));
        assert_eq!(chosen.values.get(Kind::CpuSeconds), None);
        assert_eq!(chosen.set_by(Kind::MemoryMb), "policy tight.lua");
        assert_eq!(chosen.set_by(Kind::Pids), "policy default");
    }
}
