//! The permission kernel: what a call needs (capabilities) and whether it may
//! have it (authorize).
//!
//! Until Lua policies land, one fixed rule holds: `fs:read` and `fs:write` are
//! granted inside the workspace root and everything else is refused. It is a
//! real rule over canonical paths, so a symlink out of the workspace is
//! refused, not followed.

use crate::error::{ErrorCode, FlowError, FlowResult};
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
}

impl Action {
    pub fn as_str(self) -> &'static str {
        match self {
            Action::FsRead => "fs:read",
            Action::FsWrite => "fs:write",
            Action::NetGet => "net:get",
            Action::NetPost => "net:post",
            Action::NetPrivate => "net:private",
            Action::ProcSpawn => "proc:spawn",
            Action::ModelCall => "model:call",
        }
    }
}

/// `action:resource`, e.g. `fs:read:/w/src/a.rs`. fs resources are canonical
/// absolute paths.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Capability {
    pub action: Action,
    pub resource: String,
}

impl Capability {
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

/// Decides whether a run may use a capability.
#[derive(Debug, Clone)]
pub struct Kernel {
    workspace: PathBuf,
}

impl Kernel {
    /// `workspace` must already be canonical.
    pub fn new(workspace: PathBuf) -> Self {
        Kernel { workspace }
    }

    /// Grants fs:read and fs:write inside the workspace; refuses the rest with
    /// `permission_denied` naming the capability.
    pub fn authorize(&self, cap: &Capability) -> FlowResult<()> {
        let inside = Path::new(&cap.resource).starts_with(&self.workspace);
        match cap.action {
            Action::FsRead | Action::FsWrite if inside => Ok(()),
            Action::FsRead | Action::FsWrite => Err(denied(
                cap,
                format!(
                    "{cap} is outside the workspace {}; only paths inside it may be read or written. \
                     Run with --workspace set to a folder that holds it.",
                    self.workspace.display()
                ),
            )),
            _ => Err(denied(
                cap,
                format!("{cap} is not granted: this build grants only fs:read and fs:write inside the workspace."),
            )),
        }
    }
}

fn denied(cap: &Capability, message: String) -> FlowError {
    FlowError::new(ErrorCode::PermissionDenied, message).with("capability", cap.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grants_fs_inside_workspace_only() {
        let k = Kernel::new(PathBuf::from("/w"));
        assert!(k
            .authorize(&Capability::fs(Action::FsRead, Path::new("/w/a")))
            .is_ok());
        assert!(k
            .authorize(&Capability::fs(Action::FsWrite, Path::new("/w")))
            .is_ok());
        let e = k
            .authorize(&Capability::fs(Action::FsRead, Path::new("/wx/a")))
            .unwrap_err();
        assert_eq!(e.code, ErrorCode::PermissionDenied);
        assert_eq!(e.details["capability"], "fs:read:/wx/a");
        let net = Capability {
            action: Action::NetGet,
            resource: "example.org".into(),
        };
        let e = k.authorize(&net).unwrap_err();
        assert_eq!(e.details["capability"], "net:get:example.org");
    }
}
