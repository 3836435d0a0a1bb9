//! A container's files, moved through its transport: what the file flows
//! of a host sealed to a container (`SLUICE_BASH_CONTAINER`) act on.
//!
//! This backend only moves bytes and facts; every flow keeps its own
//! semantics (paging, anchors, globbing, grepping) on the host. Each
//! operation is one `ENGINE exec -i TARGET sh -c SCRIPT sh ARGS...` of a
//! script busybox `sh` runs, with the paths passed as arguments, never
//! spliced into a script's text.
//!
//! Commands routed into the container can change its tree while a call
//! runs (a loop of `mv` swapping a folder for a symlink), so no operation
//! resolves a path in one exec and acts on it in another:
//!
//! - A read opens the file once (a descriptor of the script's) and reports
//!   the path of what it opened (`/proc/self/fd/3`) with its bytes; the
//!   caller authorizes that path before it hands a byte on ([`Opened`]).
//! - A write, rename, removal or new folder first enters the folder the
//!   caller checked (`cd -P`) and goes on only when its physical path
//!   (`$PWD`) is that folder itself; then it acts on names relative to it,
//!   never following a symlink in the final name (a write replaces a link
//!   with its file, never writes through it).
//! - A listing enters each folder the same way before it lists what it
//!   holds, so a folder swapped for a link mid-walk is never listed.
//!
//! A checked folder that no longer leads where it led fails the call as
//! `permission_denied` naming it: nothing is read or changed elsewhere.

use super::engine::said;
use super::transport::Transport;
use crate::error::{ErrorCode, FlowError, FlowResult};
use std::sync::Arc;
use std::time::Duration;

/// How long one helper script may take inside the container.
const LIMIT: Duration = Duration::from_secs(120);

/// What a path is, as the container's `stat -L` says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A regular file.
    File,
    /// A folder.
    Dir,
    /// A device, socket, pipe or dangling link.
    Other,
}

/// One path of the container, resolved there.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Probe {
    /// The path with every symlink resolved inside the container (a
    /// missing tail kept lexically); for an opened file, the path of what
    /// was opened.
    pub real: String,
    /// The directory entry itself: `real`, but for a name that is a
    /// symlink, the link (its folder resolved), which a delete removes.
    pub entry: String,
    /// What it is; `None` when nothing is there.
    pub found: Option<Found>,
    /// The closest existing folder at or above `real`, for `not_found`.
    pub nearest: String,
}

/// What `stat -L` told of an existing path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Found {
    pub kind: Kind,
    pub size: u64,
    /// Permission bits, as `stat -c %a` gives them.
    pub mode: u32,
}

/// A file opened once inside the container: what was opened, and its
/// bytes when it is a regular file of at most the size asked for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Opened {
    /// `real` is the path of what was opened (links followed), which the
    /// caller must authorize before it uses `bytes`.
    pub probe: Probe,
    /// At most one byte over the size asked for (a file that grew after
    /// it was looked at), so the caller can tell.
    pub bytes: Option<Vec<u8>>,
}

/// The folders and regular files of a tree, absolute, as one walk lists
/// them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Listing {
    pub dirs: Vec<String>,
    pub files: Vec<String>,
    /// Symbolic links: named, never followed.
    pub links: Vec<String>,
    /// Anything else (devices, sockets, pipes).
    pub other: Vec<String>,
}

/// The files of one container, reached through its transport.
#[derive(Debug, Clone)]
pub struct ContainerFiles {
    transport: Arc<Transport>,
}

/// The exit status of a script whose checked path no longer leads where
/// it led (a folder swapped for a link): `permission_denied`.
const MOVED: i32 = 3;
/// The exit status of a script whose checked path is gone: `not_found`.
const GONE: i32 = 4;
/// The exit status of a script that met a file where a folder was to be.
const NOT_FOLDER: i32 = 5;

/// The functions every acting script starts with. `enter_in NAME WANT`
/// makes NAME the shell's folder (`cd -P`, links followed), then refuses
/// unless its physical path is WANT itself: exit [`MOVED`] (or [`GONE`],
/// [`NOT_FOLDER`]) with `sluice-WHY:PATH` on stderr. `reach DIR` enters
/// DIR, making its missing folders one at a time, each entered and
/// checked, so none is made through a link. `left DIR` exits as `enter`
/// would when the shell's folder is no longer DIR: a rename onto a folder
/// removes it while the shell stands in it, and nothing can be made there.
macro_rules! common {
    () => {
        r#"unset CDPATH
moved() { printf 'sluice-moved:%s' "$1" >&2; exit 3; }
enter_in() {
  if cd -P -- "$1" 2>/dev/null; then [ "$PWD" = "$2" ] || moved "$2"; return 0; fi
  if [ -e "$1" ] && [ ! -d "$1" ] && [ ! -L "$1" ]; then printf 'sluice-notdir:%s' "$2" >&2; exit 5; fi
  if [ -e "$1" ] || [ -L "$1" ]; then moved "$2"; fi
  printf 'sluice-gone:%s' "$2" >&2; exit 4
}
enter() { enter_in "$1" "$1"; }
left() {
  [ -e "$1" ] || { printf 'sluice-gone:%s' "$1" >&2; exit 4; }
  [ . -ef "$1" ] || moved "$1"
}
reach() {
  top=$1
  while [ "$top" != / ] && [ ! -e "$top" ] && [ ! -L "$top" ]; do top=${top%/*}; [ -n "$top" ] || top=/; done
  enter "$top"
  rest=${1#"$top"}
  while [ -n "$rest" ]; do
    rest=${rest#/}; c=${rest%%/*}; rest=${rest#"$c"}
    [ -e "./$c" ] || [ -L "./$c" ] || mkdir -- "./$c" 2>/dev/null || [ -d "./$c" ] || { left "$PWD"; printf 'cannot create folder %s\n' "${PWD%/}/$c" >&2; exit 1; }
    enter_in "./$c" "${PWD%/}/$c"
  done
}
"#
    };
}

/// What `$1` is when it cannot be opened: `REAL\0ENTRY\0missing|NEAREST`,
/// resolving the longest existing prefix through `readlink -f`, the rest
/// kept; or, when something is there, `REAL\0ENTRY\0KIND|SIZE|MODE`. What
/// goes away while it is looked at is missing.
macro_rules! probe {
    () => {
        r#"p=$1; tail=
while :; do
  if r=$(readlink -f -- "$p" 2>/dev/null) && [ -n "$r" ]; then break; fi
  tail="/${p##*/}$tail"; p=${p%/*}; [ -n "$p" ] || { r=/; break; }
done
case "$r" in /) real=${tail:-/};; *) real=$r$tail;; esac
entry=$real
if [ -L "$1" ]; then d=${1%/*}; d=$(readlink -f -- "${d:-/}") && entry=${d%/}/${1##*/}; fi
if info=$(stat -L -c '%F|%s|%a' -- "$real" 2>/dev/null); then
  printf '%s\0%s\0%s' "$real" "$entry" "$info"
else
  d=$real
  while [ "$d" != / ] && [ ! -d "$d" ]; do d=${d%/*}; [ -n "$d" ] || d=/; done
  printf '%s\0%s\0missing|%s' "$real" "$entry" "$d"
fi"#
    };
}

/// Resolves `$1` inside the container; see [`probe!`].
const PROBE: &str = probe!();

/// Opens `$1` once (`$2` = the most bytes to read). Opened: `REAL\0REAL\0
/// KIND|SIZE|MODE\n`, REAL the path of what was opened, then, for a
/// regular file of at most `$2` bytes, up to `$2 + 1` of its bytes read
/// from that descriptor. A pipe is not opened (that would wait for a
/// writer). Missing: what [`PROBE`] prints. A file removed while it was
/// opened is [`GONE`], and so is one that could not be opened but can be
/// now (a folder on its way was swapped for that instant): the call met
/// a move, not a failure of its own.
const OPEN: &str = concat!(
    r#"f=$1; max=$2
if [ -p "$f" ]; then r=$(readlink -f -- "$f"); printf '%s\0%s\0fifo|0|0\n' "$r" "$r"; exit 0; fi
if { command exec 3<"$f"; } 2>/dev/null; then
  real=$(readlink /proc/self/fd/3; echo x); real=${real%?x}
  case $real in *" (deleted)"|"") printf 'sluice-gone:%s' "$f" >&2; exit 4;; esac
  info=$(stat -L -c '%F|%s|%a' /proc/self/fd/3) || exit 1
  printf '%s\0%s\0%s\n' "$real" "$real" "$info"
  case $info in "regular file|"*) s=${info#*|}; s=${s%|*}; [ "$s" -gt "$max" ] || head -c $((max + 1)) <&3;; esac
  exit 0
fi
if [ -e "$f" ]; then head -c 0 -- "$f" || exit 1; printf 'sluice-gone:%s' "$f" >&2; exit 4; fi
"#,
    probe!()
);

/// Replaces (or creates) the file `$2` in folder `$1` with stdin,
/// atomically: the folder reached and checked ([`common!`]), a staging
/// file of an unguessable name created there exclusively (never through a
/// link) and written through its descriptor, given the old file's mode and
/// owner (when the name held a regular file) through that descriptor, then
/// renamed over the name (`mv -T`: a link there is replaced, never
/// followed). A failure removes the staging file. A staging file that
/// cannot be made because the folder was replaced meanwhile (a rename onto
/// it removes it while the shell stands in it) is [`GONE`] or [`MOVED`],
/// as if the swap had come a moment earlier.
const WRITE: &str = concat!(
    common!(),
    r#"reach "$1"
n=./$2
if [ -d "$n" ] && [ ! -L "$n" ]; then printf '%s is a directory\n' "${1%/}/$2" >&2; exit 1; fi
old=$(umask)
t=./.sluice-$(head -c 6 /dev/urandom | od -An -tx1 | tr -d ' \n').tmp
umask 077; set -C
if ! { command exec 4>"$t"; } 2>/dev/null; then
  set +C; left "$1"
  printf 'cannot create a staging file in %s\n' "$1" >&2; exit 1
fi
set +C; umask "$old"
cat >&4 || { rm -f "$t"; exit 1; }
info=$(stat -c '%F|%u:%g|%a' -- "$n" 2>/dev/null)
case $info in
  "regular file|"*) own=${info#*|}; own=${own%|*}; chown "$own" /proc/self/fd/4 && chmod "${info##*|}" /proc/self/fd/4;;
  *) chmod "$(printf '%o' $(( 0666 & ~old )))" /proc/self/fd/4;;
esac || { rm -f "$t"; exit 1; }
exec 4>&-
mv -f -T "$t" "$n" || { rm -f "$t"; exit 1; }"#
);

/// Lists the tree of folder `$1` (`$2` = max depth, empty for all; the
/// folder itself first when empty; a file given as `$1` is listed alone): one NUL-ended record per entry, its
/// kind's letter then its absolute path (`d` folder, `f` regular file, `l`
/// link, `o` the rest). Each folder is entered and checked before it is
/// listed; one that no longer leads to its own path is not listed but
/// recorded as `x` (a link swapped in), and one that cannot be entered is
/// skipped. Only the shell's builtins run per entry, and one subshell per
/// folder.
const LIST: &str = concat!(
    common!(),
    r#"if [ -f "$1" ] && [ ! -L "$1" ]; then [ -n "$2" ] || printf 'f%s\0' "$1"; exit 0; fi
enter "$1"
walk() {
  for f in * .*; do
    case $f in .|..) continue;; esac
    [ -e "$f" ] || [ -L "$f" ] || continue
    p=${1%/}/$f
    if [ -L "$f" ]; then printf 'l%s\0' "$p"
    elif [ -d "$f" ]; then
      printf 'd%s\0' "$p"
      if [ "$2" != 1 ]; then
        ( if cd -P -- "./$f" 2>/dev/null; then
            if [ "$PWD" = "$p" ]; then walk "$p" "${2:+$(($2 - 1))}"; else printf 'x%s\0' "$p"; fi
          fi )
      fi
    elif [ -f "$f" ]; then printf 'f%s\0' "$p"
    else printf 'o%s\0' "$p"; fi
  done
}
[ -n "$2" ] || printf 'd%s\0' "$1"
walk "$1" "$2""#
);

/// Reads files `$3...` in order while their bytes fit in `$1` (one file at
/// least): for each, `ok SIZE\n` and exactly SIZE bytes (a file that shrank
/// meanwhile is padded with NULs, so it reads as binary; one that grew is
/// cut), `big SIZE\n` when it is over `$2` bytes, `gone\n` when it is no
/// longer a regular file (a link swapped in is not followed) or was
/// removed, `err WHY\n`; `moved\n` (and nothing after it) when the file
/// opened is not the one named (a folder on its way swapped for a link);
/// then `more\n` where the budget ran out. Each file is opened once and
/// read from that descriptor. The framing never depends on what the files
/// hold, so any byte (NUL included) passes.
const READ_MANY: &str = r#"b=$1; m=$2; shift 2; used=0
for f; do
  if [ -L "$f" ] || [ ! -f "$f" ]; then printf 'gone\n'; continue; fi
  if ! { command exec 3<"$f"; } 2>/dev/null; then printf 'err Permission denied\n'; continue; fi
  real=$(readlink /proc/self/fd/3; echo x); real=${real%?x}
  case $real in *" (deleted)") exec 3<&-; printf 'gone\n'; continue;; esac
  if [ "$real" != "$f" ]; then printf 'moved\n'; exit 0; fi
  info=$(stat -L -c '%F|%s' /proc/self/fd/3 2>/dev/null)
  case $info in "regular file|"*) s=${info#*|};; *) exec 3<&-; printf 'gone\n'; continue;; esac
  if [ "$s" -gt "$m" ]; then exec 3<&-; printf 'big %s\n' "$s"; continue; fi
  if [ "$used" -gt 0 ] && [ $((used + s)) -gt "$b" ]; then printf 'more\n'; exit 0; fi
  printf 'ok %s\n' "$s"
  { head -c "$s" <&3 2>/dev/null; cat /dev/zero; } | head -c "$s"
  exec 3<&-
  used=$((used + s))
done"#;

/// Renames `$2` in folder `$1` to `$4` in folder `$3`, both entered and
/// checked: the destination's folder is held open (fd 5) and named
/// through it, so neither is reached by its path again. `mv -T`: the
/// source moves as itself (a link stays a link), a link at the
/// destination is replaced.
const RENAME: &str = concat!(
    common!(),
    r#"enter "$3"
{ command exec 5<.; } 2>/dev/null || exit 1
enter "$1"
mv -f -T "./$2" "/proc/self/fd/5/$4""#
);

/// Removes the entry `$2` (a file or link, never followed) of folder `$1`,
/// entered and checked.
const REMOVE: &str = concat!(common!(), r#"enter "$1"; rm -f -- "./$2""#);

/// Makes folder `$1` and its missing parents, each entered and checked.
const MAKE_DIRS: &str = concat!(common!(), r#"reach "$1""#);

/// Removes the empty folder `$2` of folder `$1`, entered and checked.
const REMOVE_DIR: &str = concat!(common!(), r#"enter "$1"; rmdir -- "./$2""#);

/// One file as [`ContainerFiles::read_many`] read it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fetched {
    Bytes(Vec<u8>),
    /// Over the size asked for: its size.
    TooLarge(u64),
    /// No longer a regular file (removed, or replaced by a link).
    Gone,
    /// Could not be read, in the container's words.
    Failed(String),
}

impl ContainerFiles {
    /// The files behind `transport`.
    pub fn new(transport: Arc<Transport>) -> ContainerFiles {
        ContainerFiles { transport }
    }

    /// Runs `script` with `args` in the container, at most `limit`: its
    /// output when it succeeded; `provider_unavailable` when the engine
    /// could not run it at all; a checked path that moved or went is
    /// `permission_denied` or `not_found` naming it; any other failure
    /// `command_failed` for `doing` on `path`, in the container's words.
    async fn script(
        &self,
        script: &str,
        args: &[&str],
        stdin: Option<&[u8]>,
        limit: Duration,
        (doing, path): (&str, &str),
    ) -> FlowResult<std::process::Output> {
        let mut argv = vec!["sh", "-c", script, "sh"];
        argv.extend(args);
        let argv = self.transport.exec_args(&argv);
        let out = self
            .transport
            .engine
            .output(&argv, Vec::new(), stdin, limit)
            .await
            .map_err(|why| {
                FlowError::new(
                    ErrorCode::ProviderUnavailable,
                    format!(
                        "cannot reach container {}'s files: {why}",
                        self.transport.name
                    ),
                )
                .with("container", self.transport.name.clone())
            })?;
        if !out.status.success() {
            return Err(self.refused(doing, path, &out));
        }
        Ok(out)
    }

    /// Why a script failed: the checked path it names moved, went or is a
    /// file; else `command_failed` in the container's words.
    fn refused(&self, doing: &str, path: &str, out: &std::process::Output) -> FlowError {
        let stderr = String::from_utf8_lossy(&out.stderr);
        let named = |marker: &str| {
            stderr
                .find(marker)
                .map(|i| stderr[i + marker.len()..].to_string())
        };
        match out.status.code() {
            Some(MOVED) => self.moved(&named("sluice-moved:").unwrap_or_else(|| path.into())),
            Some(GONE) => self.gone(&named("sluice-gone:").unwrap_or_else(|| path.into())),
            Some(NOT_FOLDER) => {
                let file = named("sluice-notdir:").unwrap_or_else(|| path.into());
                FlowError::new(
                    ErrorCode::NotADirectory,
                    format!(
                        "cannot {doing} {path} in container {}: {file} is a file, not a folder",
                        self.transport.name
                    ),
                )
                .with("path", path)
                .with("container", self.transport.name.clone())
            }
            _ => self.failed(doing, path, out),
        }
    }

    /// `permission_denied` for a checked `path` that no longer leads where
    /// it did.
    fn moved(&self, path: &str) -> FlowError {
        FlowError::new(
            ErrorCode::PermissionDenied,
            format!(
                "{path} in container {} no longer leads where it did when the policy checked it: something in the container moved it or put a symlink in its place while the call ran, so nothing was read or changed there. Look at it with ls before you try again.",
                self.transport.name
            ),
        )
        .with("path", path)
        .with("container", self.transport.name.clone())
    }

    /// `not_found` for a checked `path` that went away while the call ran.
    fn gone(&self, path: &str) -> FlowError {
        FlowError::new(
            ErrorCode::NotFound,
            format!(
                "{path} went away in container {} while the call ran, so nothing was done there; look at it with ls before you try again.",
                self.transport.name
            ),
        )
        .with("path", path)
        .with("container", self.transport.name.clone())
    }

    /// `command_failed` for `doing` on `path`, in the container's words.
    fn failed(&self, doing: &str, path: &str, out: &std::process::Output) -> FlowError {
        FlowError::new(
            ErrorCode::CommandFailed,
            format!(
                "cannot {doing} {path} in container {}: {}",
                self.transport.name,
                said(out)
            ),
        )
        .with("path", path)
        .with("container", self.transport.name.clone())
    }

    /// Resolves and stats the absolute container path `path`: for what a
    /// call may be granted and for its messages, never for where it acts
    /// (every acting method checks again as it acts).
    pub async fn probe(&self, path: &str) -> FlowResult<Probe> {
        let out = self
            .script(PROBE, &[path], None, LIMIT, ("resolve", path))
            .await?;
        parse_probe(&out.stdout).ok_or_else(|| self.failed("resolve", path, &out))
    }

    /// Opens `path` once and reads it when it is a regular file of at most
    /// `max` bytes; see [`Opened`] and [`OPEN`].
    pub async fn open(&self, path: &str, max: u64) -> FlowResult<Opened> {
        let max_text = max.to_string();
        let out = self
            .script(OPEN, &[path, &max_text], None, LIMIT, ("read", path))
            .await?;
        match parse_opened(&out.stdout, max) {
            Some((opened, true)) => Ok(opened),
            // Not there when it was opened, there when it was looked at.
            Some((opened, false)) if opened.probe.found.is_some() => Err(self.gone(path)),
            Some((opened, false)) => Ok(opened),
            None => Err(self.failed("read", path, &out)),
        }
    }

    /// The bytes of the regular file at `path`, which must be the file
    /// opened (no link on its way): a path that now leads elsewhere is
    /// `permission_denied`.
    pub async fn read(&self, path: &str) -> FlowResult<Vec<u8>> {
        let opened = self.open(path, crate::fsops::MAX_FILE_BYTES).await?;
        if opened.probe.found.is_none() {
            return Err(FlowError::new(
                ErrorCode::NotFound,
                format!("{path} does not exist in container {}", self.transport.name),
            )
            .with("path", path));
        }
        if opened.probe.real != path {
            return Err(self.moved(path));
        }
        opened.bytes.ok_or_else(|| {
            FlowError::new(
                ErrorCode::CommandFailed,
                format!(
                    "cannot read {path} in container {}: not a regular file of at most {} bytes",
                    self.transport.name,
                    crate::fsops::MAX_FILE_BYTES
                ),
            )
            .with("path", path)
        })
    }

    /// Replaces (or creates) the file at `path` with `bytes`, atomically,
    /// in `path`'s folder as checked ([`WRITE`]), making missing folders.
    pub async fn write(&self, path: &str, bytes: &[u8]) -> FlowResult<()> {
        let (dir, name) = split(path);
        self.script(WRITE, &[&dir, name], Some(bytes), LIMIT, ("write", path))
            .await?;
        Ok(())
    }

    /// The tree under folder `root` (its real path, as checked) in one
    /// walk; `depth` bounds it (`Some(1)`: what the folder holds). A folder
    /// swapped for a link on the way is `permission_denied` naming it.
    pub async fn list(&self, root: &str, depth: Option<u32>) -> FlowResult<Listing> {
        let depth = depth.map(|d| d.to_string()).unwrap_or_default();
        let out = self
            .script(LIST, &[root, &depth], None, LIMIT, ("list", root))
            .await?;
        parse_listing(&out.stdout).map_err(|moved| self.moved(&moved))
    }

    /// Reads a prefix of `paths` in one exec (see [`READ_MANY`]): as many
    /// as fit in `budget` bytes, one at least; files over `max` bytes are
    /// not read. One result per path read, in order; the caller asks again
    /// for the rest. `limit` bounds the exec. A path that led to another
    /// file when it was opened is `permission_denied` naming it.
    pub async fn read_many(
        &self,
        paths: &[String],
        budget: u64,
        max: u64,
        limit: Duration,
    ) -> FlowResult<Vec<Fetched>> {
        let (budget, max) = (budget.to_string(), max.to_string());
        let mut args = vec![budget.as_str(), max.as_str()];
        args.extend(paths.iter().map(String::as_str));
        let first = paths.first().map(String::as_str).unwrap_or("/");
        let out = self
            .script(READ_MANY, &args, None, limit, ("read", first))
            .await?;
        match parse_many(&out.stdout, paths.len()) {
            Some(Ok(got)) => Ok(got),
            Some(Err(at)) => Err(self.moved(&paths[at])),
            None => Err(self.failed("read", first, &out)),
        }
    }

    /// Renames `from` to `to` (`mv -T`; a link is moved as itself), in
    /// their folders as checked.
    pub async fn rename(&self, from: &str, to: &str) -> FlowResult<()> {
        let (from_dir, from_name) = split(from);
        let (to_dir, to_name) = split(to);
        let args = [from_dir.as_str(), from_name, to_dir.as_str(), to_name];
        self.script(RENAME, &args, None, LIMIT, ("move", from))
            .await?;
        Ok(())
    }

    /// Removes the file or link at `path` (`rm -f`), in its folder as
    /// checked.
    pub async fn remove(&self, path: &str) -> FlowResult<()> {
        let (dir, name) = split(path);
        self.script(REMOVE, &[&dir, name], None, LIMIT, ("remove", path))
            .await?;
        Ok(())
    }

    /// Makes folder `path` and its missing parents, each checked.
    pub async fn make_dirs(&self, path: &str) -> FlowResult<()> {
        self.script(MAKE_DIRS, &[path], None, LIMIT, ("create the folder", path))
            .await?;
        Ok(())
    }

    /// Removes the empty folder `path`, in its folder as checked.
    pub async fn remove_dir(&self, path: &str) -> FlowResult<()> {
        let (dir, name) = split(path);
        let doing = ("remove the folder", path);
        self.script(REMOVE_DIR, &[&dir, name], None, LIMIT, doing)
            .await?;
        Ok(())
    }
}

/// The folder of absolute `path` and the name in it.
fn split(path: &str) -> (String, &str) {
    let name = path.rsplit('/').next().unwrap_or(path);
    (parent_of(path), name)
}

/// One line of [`READ_MANY`]'s output.
enum Read {
    Got(Fetched),
    /// The file opened was not the one named.
    Moved,
}

/// The results of [`READ_MANY`]'s output, at most `n`, or the index of
/// the path that was `moved`; `None` when it is not in its framing.
fn parse_many(mut out: &[u8], n: usize) -> Option<Result<Vec<Fetched>, usize>> {
    let mut got = Vec::new();
    while !out.is_empty() && got.len() < n {
        let end = out.iter().position(|&b| b == b'\n')?;
        let head = std::str::from_utf8(&out[..end]).ok()?;
        out = &out[end + 1..];
        let (word, rest) = head.split_once(' ').unwrap_or((head, ""));
        let read = match word {
            "ok" => {
                let size: usize = rest.parse().ok()?;
                let bytes = out.get(..size)?.to_vec();
                out = &out[size..];
                Read::Got(Fetched::Bytes(bytes))
            }
            "big" => Read::Got(Fetched::TooLarge(rest.parse().ok()?)),
            "gone" => Read::Got(Fetched::Gone),
            "err" => Read::Got(Fetched::Failed(rest.to_string())),
            "moved" => Read::Moved,
            "more" => break,
            _ => return None,
        };
        match read {
            Read::Got(f) => got.push(f),
            Read::Moved => return Some(Err(got.len())),
        }
    }
    (!got.is_empty() || n == 0).then_some(Ok(got))
}

/// [`PROBE`]'s output: `REAL\0ENTRY\0INFO`.
fn parse_probe(stdout: &[u8]) -> Option<Probe> {
    let text = std::str::from_utf8(stdout).ok()?;
    let mut parts = text.splitn(3, '\0');
    let (real, entry, info) = (parts.next()?, parts.next()?, parts.next()?);
    let info = info.trim_end_matches('\n');
    if let Some(nearest) = info.strip_prefix("missing|") {
        return Some(Probe {
            real: real.to_string(),
            entry: entry.to_string(),
            found: None,
            nearest: nearest.to_string(),
        });
    }
    let mut parts = info.rsplitn(3, '|');
    let mode = u32::from_str_radix(parts.next()?, 8).ok()?;
    let size = parts.next()?.parse().ok()?;
    let kind = match parts.next()? {
        k if k.starts_with("regular") => Kind::File,
        "directory" => Kind::Dir,
        _ => Kind::Other,
    };
    let nearest = if kind == Kind::Dir {
        real.to_string()
    } else {
        parent_of(real)
    };
    Some(Probe {
        real: real.to_string(),
        entry: entry.to_string(),
        found: Some(Found { kind, size, mode }),
        nearest,
    })
}

/// [`OPEN`]'s output: a probe's head, ended by `\n` when a file was
/// opened, then its bytes when it is a regular file of at most `max`
/// bytes; whether it was opened.
fn parse_opened(stdout: &[u8], max: u64) -> Option<(Opened, bool)> {
    let second = stdout.iter().enumerate().filter(|(_, &b)| b == 0).nth(1)?.0;
    let end = stdout[second..]
        .iter()
        .position(|&b| b == b'\n')
        .map(|i| second + i);
    let (head, rest) = match end {
        Some(end) => (&stdout[..end], &stdout[end + 1..]),
        None => (stdout, &[][..]),
    };
    let probe = parse_probe(head)?;
    let read = probe
        .found
        .is_some_and(|f| f.kind == Kind::File && f.size <= max);
    let bytes = (end.is_some() && read).then(|| rest.to_vec());
    Some((Opened { probe, bytes }, end.is_some()))
}

/// [`LIST`]'s records; `Err` with the folder that moved, if one did.
fn parse_listing(stdout: &[u8]) -> Result<Listing, String> {
    let mut listing = Listing::default();
    for item in stdout.split(|&b| b == 0) {
        let Some((&kind, path)) = item.split_first() else {
            continue;
        };
        let path = String::from_utf8_lossy(path).into_owned();
        match kind {
            b'd' => listing.dirs.push(path),
            b'f' => listing.files.push(path),
            b'l' => listing.links.push(path),
            b'x' => return Err(path),
            _ => listing.other.push(path),
        }
    }
    Ok(listing)
}

/// The folder holding absolute `path` (`/` for `/x`).
pub fn parent_of(path: &str) -> String {
    match path.rfind('/') {
        Some(0) | None => "/".to_string(),
        Some(i) => path[..i].to_string(),
    }
}

/// `given` made absolute under `base` (a container folder) and normalised
/// lexically: `.` dropped, `..` removing the segment before it, `//` and a
/// trailing `/` dropped. Nothing is resolved; the container does that.
pub fn lexical(base: &str, given: &str) -> String {
    let joined = if given.starts_with('/') {
        given.to_string()
    } else {
        format!("{base}/{given}")
    };
    let mut segments: Vec<&str> = Vec::new();
    for seg in joined.split('/') {
        match seg {
            "" | "." => {}
            ".." => {
                segments.pop();
            }
            s => segments.push(s),
        }
    }
    format!("/{}", segments.join("/"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_normalise_lexically_under_the_folder() {
        assert_eq!(lexical("/srv", "a.py"), "/srv/a.py");
        assert_eq!(lexical("/srv/", "./a/../b//c/"), "/srv/b/c");
        assert_eq!(lexical("/srv", "/etc/../x"), "/x");
        assert_eq!(lexical("/srv", "../../.."), "/");
        assert_eq!(lexical("/", "."), "/");
        assert_eq!(split("/srv/a.py"), ("/srv".to_string(), "a.py"));
        assert_eq!(split("/a"), ("/".to_string(), "a"));
    }

    #[test]
    fn probes_parse_found_and_missing() {
        let p = parse_probe(b"/srv/a.py\0/srv/l\0regular file|12|644").unwrap();
        assert_eq!(
            p.found,
            Some(Found {
                kind: Kind::File,
                size: 12,
                mode: 0o644
            })
        );
        assert_eq!((p.nearest.as_str(), p.entry.as_str()), ("/srv", "/srv/l"));
        let p = parse_probe(b"/srv/x/y\0/srv/x/y\0missing|/srv").unwrap();
        assert_eq!(
            (p.real.as_str(), p.found, p.nearest.as_str()),
            ("/srv/x/y", None, "/srv")
        );
        let p = parse_probe(b"/srv\0/srv\0directory|4096|755").unwrap();
        assert_eq!(p.found.unwrap().kind, Kind::Dir);
        assert!(parse_probe(b"garbage").is_none());
        assert!(parse_probe(b"/srv\0directory|4096|755").is_none());
    }

    #[test]
    fn an_opened_file_brings_its_bytes_after_its_head() {
        let open = |out: &[u8]| parse_opened(out, 10).unwrap();
        let (o, opened) = open(b"/srv/a\0/srv/a\0regular file|3|644\na\nb");
        assert_eq!((o.probe.real.as_str(), opened), ("/srv/a", true));
        assert_eq!(o.bytes.as_deref(), Some(&b"a\nb"[..]));
        // An empty file has its (empty) bytes; a folder none.
        let (o, _) = open(b"/srv/e\0/srv/e\0regular file|0|644\n");
        assert_eq!(o.bytes.as_deref(), Some(&b""[..]));
        let (o, _) = open(b"/srv\0/srv\0directory|4096|755\n");
        assert_eq!(o.bytes, None);
        // Missing: the probe's own form, no newline, no bytes.
        let (o, opened) = open(b"/srv/x\0/srv/x\0missing|/srv");
        assert_eq!((o.probe.found, o.bytes, opened), (None, None, false));
        // Over the limit: the head alone.
        let (o, _) = open(b"/b\0/b\0regular file|11|644\n");
        assert_eq!(o.bytes, None);
        assert!(parse_opened(b"/b\0regular file|1|644\nx", 10).is_none());
    }

    #[test]
    fn batched_reads_frame_any_bytes_and_stop_at_a_moved_file() {
        let out = b"ok 3\na\0\nbig 99\ngone\nerr Permission denied\nok 0\nmore\n";
        assert_eq!(
            parse_many(out, 9).unwrap().unwrap(),
            vec![
                Fetched::Bytes(b"a\0\n".to_vec()),
                Fetched::TooLarge(99),
                Fetched::Gone,
                Fetched::Failed("Permission denied".into()),
                Fetched::Bytes(vec![]),
            ]
        );
        assert_eq!(parse_many(b"ok 1\nagone\nmoved\n", 5).unwrap(), Err(2));
        assert!(parse_many(b"ok 5\nab", 1).is_none());
        assert!(parse_many(b"", 2).is_none());
    }

    /// Runs [`WRITE`] on the host's `sh` into `dir`/`name`, with an `od`
    /// on PATH that first runs `meanwhile` in the script's folder: the
    /// instant between the folder's check and the staging file.
    fn write_while(dir: &std::path::Path, meanwhile: &str) -> std::process::Output {
        let bin = dir.parent().unwrap().join("bin");
        std::fs::create_dir_all(&bin).unwrap();
        let od = bin.join("od");
        let real = String::from_utf8(
            std::process::Command::new("sh")
                .args(["-c", "command -v od"])
                .output()
                .unwrap()
                .stdout,
        )
        .unwrap();
        std::fs::write(
            &od,
            format!("#!/bin/sh\n{meanwhile}\nexec {} \"$@\"\n", real.trim()),
        )
        .unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&od, std::fs::Permissions::from_mode(0o755)).unwrap();
        let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap());
        let dir = dir.to_str().unwrap();
        std::process::Command::new("sh")
            .args(["-c", WRITE, "sh", dir, "f.txt"])
            .env("PATH", path)
            .stdin(std::process::Stdio::null())
            .output()
            .unwrap()
    }

    #[test]
    fn a_folder_replaced_before_the_staging_file_is_gone_or_moved_not_a_failure() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("d");
        // Control: nothing happens meanwhile; the file is written.
        std::fs::create_dir(&dir).unwrap();
        let out = write_while(&dir, ":");
        assert!(out.status.success(), "{out:?}");
        assert!(dir.join("f.txt").exists());
        std::fs::remove_file(dir.join("f.txt")).unwrap();
        // The folder removed while the script stands in it: gone.
        let out = write_while(&dir, r#"rmdir "$PWD""#);
        assert_eq!(out.status.code(), Some(GONE), "{out:?}");
        assert!(String::from_utf8_lossy(&out.stderr).starts_with("sluice-gone:"));
        // Removed and another folder made at its name (a rename onto it
        // does both at once): moved, and nothing lands in the new one.
        std::fs::create_dir(&dir).unwrap();
        let out = write_while(&dir, r#"rmdir "$PWD" && mkdir "$PWD""#);
        assert_eq!(out.status.code(), Some(MOVED), "{out:?}");
        assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 0);
    }

    #[test]
    fn listings_are_records_of_a_kind_and_a_path() {
        let l = parse_listing(b"d/srv\0d/srv/d\0f/srv/a\0f/srv/d/b\0l/srv/l\0o/srv/p\0").unwrap();
        assert_eq!(l.dirs, ["/srv", "/srv/d"]);
        assert_eq!(l.files, ["/srv/a", "/srv/d/b"]);
        assert_eq!(l.links, ["/srv/l"]);
        assert_eq!(l.other, ["/srv/p"]);
        let l = parse_listing(b"d/srv\0").unwrap();
        assert_eq!(l.dirs, ["/srv"]);
        assert!(l.files.is_empty() && l.links.is_empty() && l.other.is_empty());
        assert_eq!(
            parse_listing(b"d/srv\0d/srv/d\0x/srv/d\0f/srv/a\0"),
            Err("/srv/d".to_string())
        );
    }
}
