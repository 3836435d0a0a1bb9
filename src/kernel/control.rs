//! Repository control files: what makes git run code, or read another
//! configuration, in a later git command (the user's own, outside any
//! sandbox). Writing one is granted only by a rule that names it: a
//! wildcard allow such as `fs:write:${workspace}/**` does not, while
//! `fs:write:${workspace}/.git/hooks/**` or the file's own path does. The
//! sandbox keeps the same files read-only for commands; this list is the
//! one both use.
//!
//! The files are, inside any `.git` folder at any depth: `config`,
//! `config.worktree`, `hooks/`, `commondir`, `info/` (attributes name
//! filters), `modules/` and `worktrees/` (their own configs, hooks and
//! `gitdir` files); and any entry named `.git` itself, since a new `.git`
//! folder, or a `.git` file holding `gitdir: PATH`, makes git use another
//! repository there.

use std::path::{Component, Path};

/// The entries of a `.git` folder that make git run code or read another
/// configuration (each a file, or a folder and everything in it).
pub const GIT_CONTROL: &[&str] = &[
    "config",
    "config.worktree",
    "hooks",
    "commondir",
    "info",
    "modules",
    "worktrees",
];

/// The control part of `path`, as a rule must spell it: `.git/hooks` for
/// `/w/.git/hooks/pre-commit`, `.git/config` for `/w/a/.git/config`, `.git`
/// for `/w/sub/.git`; `None` for any other path (`/w/.git/objects/ab/cd`,
/// `/w/src/main.rs`).
pub fn control_part(path: &Path) -> Option<String> {
    let parts: Vec<&str> = path
        .components()
        .filter_map(|c| match c {
            Component::Normal(s) => s.to_str(),
            _ => None,
        })
        .collect();
    parts.iter().enumerate().find_map(|(i, part)| {
        if *part != ".git" {
            return None;
        }
        match parts.get(i + 1) {
            None => Some(".git".to_string()),
            Some(next) if GIT_CONTROL.contains(next) => Some(format!(".git/{next}")),
            Some(_) => None,
        }
    })
}

/// Whether a rule's text (as written, `fs:write:${workspace}/.git/hooks/**`)
/// spells `part` as whole path segments.
pub fn names(rule_text: &str, part: &str) -> bool {
    rule_text.match_indices(part).any(|(i, _)| {
        let before = &rule_text[..i];
        let after = &rule_text[i + part.len()..];
        (before.ends_with('/') || before.ends_with(':'))
            && (after.is_empty() || after.starts_with('/'))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_parts() {
        let part = |p: &str| control_part(Path::new(p));
        assert_eq!(part("/w/.git/config").as_deref(), Some(".git/config"));
        assert_eq!(
            part("/w/.git/config.worktree").as_deref(),
            Some(".git/config.worktree")
        );
        assert_eq!(
            part("/w/.git/hooks/pre-commit").as_deref(),
            Some(".git/hooks")
        );
        assert_eq!(part("/w/.git/hooks").as_deref(), Some(".git/hooks"));
        assert_eq!(
            part("/w/.git/info/attributes").as_deref(),
            Some(".git/info")
        );
        assert_eq!(
            part("/w/.git/modules/s/config").as_deref(),
            Some(".git/modules")
        );
        assert_eq!(
            part("/w/.git/worktrees/x/gitdir").as_deref(),
            Some(".git/worktrees")
        );
        assert_eq!(part("/w/.git/commondir").as_deref(), Some(".git/commondir"));
        assert_eq!(part("/w/deep/er/.git").as_deref(), Some(".git"));
        assert_eq!(part("/w/sub/.git/config").as_deref(), Some(".git/config"));
        assert_eq!(part("/w/.git/objects/ab/cd"), None);
        assert_eq!(part("/w/.git/HEAD"), None);
        assert_eq!(part("/w/.gitignore"), None);
        assert_eq!(part("/w/src/main.rs"), None);
    }

    #[test]
    fn rules_name_whole_segments() {
        assert!(names("fs:write:/w/.git/hooks/**", ".git/hooks"));
        assert!(names("fs:write:/w/.git/hooks", ".git/hooks"));
        assert!(names("fs:write:**/.git/hooks/**", ".git/hooks"));
        assert!(names("fs:write:/w/.git/config", ".git/config"));
        assert!(!names("fs:write:/w/**", ".git/config"));
        assert!(!names("fs:write:/w/.git/**", ".git/hooks"));
        assert!(!names("fs:write:/w/.git/hooksx/**", ".git/hooks"));
        assert!(!names("fs:write:/w/x.git/config", ".git/config"));
        assert!(names("fs:write:/w/a/.git", ".git"));
    }
}
