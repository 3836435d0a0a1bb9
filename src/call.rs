//! The call vocabulary every layer shares: what a call may do
//! ([`Capability`], [`Action`]), how far its effects can be undone
//! ([`Tier`]) and what it declares it will touch ([`Envelope`]). It sits
//! below the audit record, the kernel and the flows, which all speak it.

use serde::Serialize;
use std::fmt;
use std::path::{Path, PathBuf};

/// What a capability lets a call do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
pub enum Action {
    #[serde(rename = "fs:read")]
    FsRead,
    #[serde(rename = "fs:write")]
    FsWrite,
    #[serde(rename = "net:get")]
    NetGet,
    #[serde(rename = "net:post")]
    NetPost,
    #[serde(rename = "net:private")]
    NetPrivate,
    #[serde(rename = "proc:spawn")]
    ProcSpawn,
    #[serde(rename = "model:call")]
    ModelCall,
    /// Sending a named credential's secret somewhere: `cred:use:NAME@ORIGIN`
    /// for a request's header, `cred:use:NAME@command` for a command's
    /// environment.
    #[serde(rename = "cred:use")]
    CredUse,
}

impl Action {
    pub const ALL: [Action; 8] = [
        Action::FsRead,
        Action::FsWrite,
        Action::NetGet,
        Action::NetPost,
        Action::NetPrivate,
        Action::ProcSpawn,
        Action::ModelCall,
        Action::CredUse,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Action::FsRead => "fs:read",
            Action::FsWrite => "fs:write",
            Action::NetGet => "net:get",
            Action::NetPost => "net:post",
            Action::NetPrivate => "net:private",
            Action::ProcSpawn => "proc:spawn",
            Action::ModelCall => "model:call",
            Action::CredUse => "cred:use",
        }
    }

    /// Whether every call of a flow whose spec names this kind asks for
    /// it: a private address (`net:private`) and a credential (`cred:use`)
    /// are asked for only by the calls that reach or send one.
    pub fn always_asked(self) -> bool {
        !matches!(self, Action::NetPrivate | Action::CredUse)
    }
}

/// `action:resource`, e.g. `fs:read:/w/src/a.rs`. fs resources are canonical
/// absolute paths.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Capability {
    /// What the call may do to the resource.
    pub action: Action,
    /// What it may do it to: a canonical absolute path for `fs:*`, a
    /// command line for `proc:spawn`, an origin or host for `net:*`.
    pub resource: String,
}

impl Capability {
    /// Parses `action:resource`, e.g. `fs:read:/w/a.rs` or `net:get:example.org`.
    pub fn parse(text: &str) -> Result<Capability, String> {
        let action = Action::ALL
            .into_iter()
            .find(|a| text.starts_with(a.as_str()) && text[a.as_str().len()..].starts_with(':'));
        match action {
            Some(action) => Ok(Capability {
                action,
                resource: text[action.as_str().len() + 1..].to_string(),
            }),
            None => Err(format!(
                "{text:?} is not a capability; write action:resource with an action of {}",
                Action::ALL.map(Action::as_str).join(", ")
            )),
        }
    }

    pub fn fs(action: Action, path: &Path) -> Self {
        Capability {
            action,
            resource: path.to_string_lossy().into_owned(),
        }
    }
}

impl fmt::Display for Capability {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.action.as_str(), self.resource)
    }
}

/// How far a call's effects can be undone, which decides how carefully it is
/// authorized and recorded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Tier {
    /// Changes nothing outside the run (a read).
    Sealed,
    /// Changes files the run can restore (write, edit).
    Compensable,
    /// Changes the world in ways nobody can take back (a POST, a command).
    Irreversible,
}

impl Tier {
    /// The tier's lowercase name (`"sealed"`, `"compensable"`,
    /// `"irreversible"`), as the manifest, the audit record and policy
    /// scripts spell it.
    pub fn as_str(self) -> &'static str {
        match self {
            Tier::Sealed => "sealed",
            Tier::Compensable => "compensable",
            Tier::Irreversible => "irreversible",
        }
    }
}

/// What one call may touch, narrowed from its input as far as it allows.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Envelope {
    pub tier: Tier,
    /// Canonical paths the call reads.
    pub reads: Vec<PathBuf>,
    /// Canonical paths the call writes.
    pub writes: Vec<PathBuf>,
    /// Command lines the call spawns (`proc:spawn`), each judged per simple
    /// command by the kernel.
    pub commands: Vec<String>,
    /// Where the call sends requests first (`net:get`, `net:post`); hops
    /// found later (redirects, private addresses) are judged as they come.
    /// Also the named credentials the call sends, each bound to where it
    /// goes (`cred:use:NAME@ORIGIN`, `cred:use:NAME@command`), after the
    /// destinations: a secret is put in only once they are authorized.
    #[serde(serialize_with = "as_text")]
    pub network: Vec<Capability>,
    /// The canonical folder the call's commands run in (bash's `cwd`,
    /// shell_command's `workdir`, resolved by their plan); `None` for a
    /// call that runs none. The kernel resolves a command's relative
    /// redirections and PATH entries against it, so it must be where the
    /// command really runs, and the flow is what knows that, not the names
    /// of its input fields.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cwd: Option<PathBuf>,
    /// The container the caller asked its commands to run in (bash's
    /// `container`): a request the policy's `route` may refuse or rewrite.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub container: Option<String>,
    /// Whether the call may read and write paths its `reads` and `writes`
    /// do not name: a command nobody declared the files of (an unhermetic
    /// `bash`, `shell_command`). The scheduler orders such a call against
    /// every call that touches a path, where it would order a declared one
    /// only against the calls whose paths overlap its own.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub anywhere: bool,
}

fn as_text<S: serde::Serializer>(caps: &[Capability], s: S) -> Result<S::Ok, S::Error> {
    s.collect_seq(caps.iter().map(|c| c.to_string()))
}

impl Envelope {
    /// An envelope of `tier` that touches nothing yet: a flow's `plan`
    /// fills in what its input names.
    pub fn new(tier: Tier) -> Envelope {
        Envelope {
            tier,
            reads: Vec::new(),
            writes: Vec::new(),
            commands: Vec::new(),
            network: Vec::new(),
            cwd: None,
            container: None,
            anywhere: false,
        }
    }

    /// The capabilities the envelope needs: one per command spawned, per
    /// first destination and credential sent, and per path read or
    /// written.
    pub fn capabilities(&self) -> Vec<Capability> {
        let commands = self.commands.iter().map(|c| Capability {
            action: Action::ProcSpawn,
            resource: c.clone(),
        });
        let reads = self.reads.iter().map(|p| Capability::fs(Action::FsRead, p));
        let writes = self
            .writes
            .iter()
            .map(|p| Capability::fs(Action::FsWrite, p));
        let network = self.network.iter().cloned();
        commands.chain(network).chain(reads).chain(writes).collect()
    }
}

/// The task of the calls a running call (step `seq` of `task`) makes
/// through the door: `TASK.cSEQ`. Lua tasks are numbered (`0.3`), so the
/// `c` keeps these apart, and a replay that answers the parent from the
/// record knows not to expect them.
pub fn inner_task(task: &str, seq: u64) -> String {
    format!("{task}.c{seq}")
}

/// Whether `task` is (or descends from) one of [`inner_task`]'s.
pub fn is_inner(task: &str) -> bool {
    task.split('.').any(|part| part.starts_with('c'))
}
