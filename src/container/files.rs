//! A container's files, moved through its transport: what the file flows
//! of a host sealed to a container (`SLUICE_BASH_CONTAINER`) act on.
//!
//! This backend only moves bytes and facts; every flow keeps its own
//! semantics (paging, anchors, globbing, grepping) on the host. Each
//! operation is one `ENGINE exec -i TARGET PROGRAM ...` of a program busybox
//! has (`cat`, `stat`, `find`, `readlink`, `mv`, `mkdir`, `chmod`, `sh -c`), with the
//! paths passed as arguments, never spliced into a script's text.

use super::engine::said;
use super::transport::Transport;
use crate::error::{ErrorCode, FlowError, FlowResult};
use std::sync::Arc;
use std::time::Duration;

/// How long one helper program may take inside the container.
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
    /// missing tail kept lexically).
    pub real: String,
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

/// The folders and regular files of a tree, absolute, as one `find` lists
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

/// Resolves `$1` inside the container: the longest existing prefix through
/// `readlink -f`, the rest kept; then prints `REAL\0KIND|SIZE|MODE` or
/// `REAL\0missing|NEAREST`.
const PROBE: &str = r#"p=$1; tail=
while :; do
  if r=$(readlink -f "$p" 2>/dev/null) && [ -n "$r" ]; then break; fi
  tail="/${p##*/}$tail"; p=${p%/*}; [ -n "$p" ] || { r=/; break; }
done
case "$r" in /) real=${tail:-/};; *) real=$r$tail;; esac
if [ -e "$real" ]; then
  printf '%s\0%s' "$real" "$(stat -L -c '%F|%s|%a' "$real")"
else
  d=$real
  while [ "$d" != / ] && [ ! -d "$d" ]; do d=${d%/*}; [ -n "$d" ] || d=/; done
  printf '%s\0missing|%s' "$real" "$d"
fi"#;

/// Writes stdin to `$1` atomically: a private staging file in the same
/// folder, the old file's mode and owner, then `mv` over it. Missing
/// folders are made first. A failure removes the staging file.
const WRITE: &str = r#"f=$1; d=${f%/*}; [ -n "$d" ] || d=/
mkdir -p "$d" || exit 1
t="$d/.sluice-${f##*/}.$$.tmp"
( umask 077; cat > "$t" ) || { rm -f "$t"; exit 1; }
if [ -e "$f" ]; then
  chown "$(stat -L -c %u:%g "$f")" "$t" && chmod "$(stat -L -c %a "$f")" "$t" || { rm -f "$t"; exit 1; }
else
  chmod "$(printf '%o' $(( 0666 & ~$(umask) )))" "$t" || { rm -f "$t"; exit 1; }
fi
mv -f "$t" "$f" || { rm -f "$t"; exit 1; }"#;

/// Lists `$1`'s tree (`$2` = max depth, empty for all), each kind ended by
/// a lone NUL: folders, regular files, links, then the rest.
const LIST: &str = r#"r=$1; if [ -n "$2" ]; then set -- -mindepth 1 -maxdepth "$2"; else set --; fi
find "$r" "$@" -type d -print0; printf '\0'
find "$r" "$@" -type f -print0; printf '\0'
find "$r" "$@" -type l -print0; printf '\0'
find "$r" "$@" ! -type d ! -type f ! -type l -print0"#;

/// Reads files `$3...` in order while their bytes fit in `$1` (one file at
/// least): for each, `ok SIZE\n` and exactly SIZE bytes (a file that shrank
/// meanwhile is padded with NULs, so it reads as binary; one that grew is
/// cut), `big SIZE\n` when it is over `$2` bytes, `gone\n` when it is no
/// longer a regular file (a link swapped in is not followed), `err WHY\n`;
/// then `more\n` where the budget ran out. The framing never depends on
/// what the files hold, so any byte (NUL included) passes.
const READ_MANY: &str = r#"b=$1; m=$2; shift 2; used=0
for f; do
  if [ -L "$f" ] || [ ! -f "$f" ]; then printf 'gone\n'; continue; fi
  s=$(stat -c %s "$f" 2>/dev/null) || { printf 'gone\n'; continue; }
  if [ "$s" -gt "$m" ]; then printf 'big %s\n' "$s"; continue; fi
  if [ "$used" -gt 0 ] && [ $((used + s)) -gt "$b" ]; then printf 'more\n'; exit 0; fi
  if [ ! -r "$f" ]; then printf 'err Permission denied\n'; continue; fi
  printf 'ok %s\n' "$s"
  { head -c "$s" "$f" 2>/dev/null; cat /dev/zero; } | head -c "$s"
  used=$((used + s))
done"#;

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

    /// Runs `args` in the container, at most `limit`: its output when it
    /// succeeded; `provider_unavailable` when the engine could not run it
    /// at all, `command_failed` for `doing` on `path` in the container's
    /// words when it failed.
    async fn checked(
        &self,
        args: &[&str],
        stdin: Option<&[u8]>,
        limit: Duration,
        (doing, path): (&str, &str),
    ) -> FlowResult<std::process::Output> {
        let argv = self.transport.exec_args(args);
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
            return Err(self.failed(doing, path, &out));
        }
        Ok(out)
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

    /// Resolves and stats the absolute container path `path`.
    pub async fn probe(&self, path: &str) -> FlowResult<Probe> {
        let out = self
            .checked(
                &["sh", "-c", PROBE, "sh", path],
                None,
                LIMIT,
                ("resolve", path),
            )
            .await?;
        parse_probe(&out.stdout).ok_or_else(|| self.failed("resolve", path, &out))
    }

    /// The bytes of the file at `path` (`cat`).
    pub async fn read(&self, path: &str) -> FlowResult<Vec<u8>> {
        let out = self
            .checked(&["cat", path], None, LIMIT, ("read", path))
            .await?;
        Ok(out.stdout)
    }

    /// Replaces (or creates) the file at `path` with `bytes`, atomically.
    pub async fn write(&self, path: &str, bytes: &[u8]) -> FlowResult<()> {
        let args = ["sh", "-c", WRITE, "sh", path];
        self.checked(&args, Some(bytes), LIMIT, ("write", path))
            .await?;
        Ok(())
    }

    /// The tree under folder `root`, with one `find` per kind in one call;
    /// `depth` bounds it (`Some(1)`: what the folder holds).
    pub async fn list(&self, root: &str, depth: Option<u32>) -> FlowResult<Listing> {
        let depth = depth.map(|d| d.to_string()).unwrap_or_default();
        let args = ["sh", "-c", LIST, "sh", root, &depth];
        let out = self.checked(&args, None, LIMIT, ("list", root)).await?;
        Ok(parse_listing(&out.stdout))
    }

    /// Reads a prefix of `paths` in one exec (`cat`-like, see
    /// [`READ_MANY`]): as many as fit in `budget` bytes, one at least; files
    /// over `max` bytes are not read. One result per path read, in order;
    /// the caller asks again for the rest. `limit` bounds the exec.
    pub async fn read_many(
        &self,
        paths: &[String],
        budget: u64,
        max: u64,
        limit: Duration,
    ) -> FlowResult<Vec<Fetched>> {
        let (budget, max) = (budget.to_string(), max.to_string());
        let mut args = vec!["sh", "-c", READ_MANY, "sh", budget.as_str(), max.as_str()];
        args.extend(paths.iter().map(String::as_str));
        let first = paths.first().map(String::as_str).unwrap_or("/");
        let out = self.checked(&args, None, limit, ("read", first)).await?;
        parse_many(&out.stdout, paths.len()).ok_or_else(|| self.failed("read", first, &out))
    }

    /// Runs one busybox `tool` on `args` (paths as arguments, never in a
    /// script), failing with its words for `doing` on `args[0]`.
    async fn tool(&self, tool: &str, flags: &[&str], args: &[&str], doing: &str) -> FlowResult<()> {
        let mut argv = vec![tool];
        argv.extend(flags);
        argv.extend(args);
        let path = args.first().copied().unwrap_or("/");
        self.checked(&argv, None, LIMIT, (doing, path)).await?;
        Ok(())
    }

    /// Renames `from` to `to` (`mv`; a link is moved as itself).
    pub async fn rename(&self, from: &str, to: &str) -> FlowResult<()> {
        self.tool("mv", &["-f"], &[from, to], "move").await
    }

    /// Removes the file or link at `path` (`rm -f`).
    pub async fn remove(&self, path: &str) -> FlowResult<()> {
        self.tool("rm", &["-f"], &[path], "remove").await
    }

    /// Makes folder `path` and its missing parents (`mkdir -p`).
    pub async fn make_dirs(&self, path: &str) -> FlowResult<()> {
        self.tool("mkdir", &["-p"], &[path], "create the folder")
            .await
    }

    /// Removes the empty folder `path` (`rmdir`).
    pub async fn remove_dir(&self, path: &str) -> FlowResult<()> {
        self.tool("rmdir", &[], &[path], "remove the folder").await
    }
}

/// The results of [`READ_MANY`]'s output, at most `n`; `None` when it is
/// not in its framing.
fn parse_many(mut out: &[u8], n: usize) -> Option<Vec<Fetched>> {
    let mut got = Vec::new();
    while !out.is_empty() && got.len() < n {
        let end = out.iter().position(|&b| b == b'\n')?;
        let head = std::str::from_utf8(&out[..end]).ok()?;
        out = &out[end + 1..];
        let (word, rest) = head.split_once(' ').unwrap_or((head, ""));
        got.push(match word {
            "ok" => {
                let size: usize = rest.parse().ok()?;
                let bytes = out.get(..size)?.to_vec();
                out = &out[size..];
                Fetched::Bytes(bytes)
            }
            "big" => Fetched::TooLarge(rest.parse().ok()?),
            "gone" => Fetched::Gone,
            "err" => Fetched::Failed(rest.to_string()),
            "more" => break,
            _ => return None,
        });
    }
    (!got.is_empty() || n == 0).then_some(got)
}

fn parse_probe(stdout: &[u8]) -> Option<Probe> {
    let text = std::str::from_utf8(stdout).ok()?;
    let (real, info) = text.split_once('\0')?;
    let info = info.trim_end_matches('\n');
    if let Some(nearest) = info.strip_prefix("missing|") {
        return Some(Probe {
            real: real.to_string(),
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
        found: Some(Found { kind, size, mode }),
        nearest,
    })
}

fn parse_listing(stdout: &[u8]) -> Listing {
    let mut listing = Listing::default();
    let mut part = 0;
    for item in stdout.split(|&b| b == 0) {
        if item.is_empty() {
            part += 1;
            continue;
        }
        let name = String::from_utf8_lossy(item).into_owned();
        match part {
            0 => listing.dirs.push(name),
            1 => listing.files.push(name),
            2 => listing.links.push(name),
            _ => listing.other.push(name),
        }
    }
    listing
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
    }

    #[test]
    fn probes_parse_found_and_missing() {
        let p = parse_probe(b"/srv/a.py\0regular file|12|644").unwrap();
        assert_eq!(
            p.found,
            Some(Found {
                kind: Kind::File,
                size: 12,
                mode: 0o644
            })
        );
        assert_eq!(p.nearest, "/srv");
        let p = parse_probe(b"/srv/x/y\0missing|/srv").unwrap();
        assert_eq!(
            (p.real.as_str(), p.found, p.nearest.as_str()),
            ("/srv/x/y", None, "/srv")
        );
        let p = parse_probe(b"/srv\0directory|4096|755").unwrap();
        assert_eq!(p.found.unwrap().kind, Kind::Dir);
        assert!(parse_probe(b"garbage").is_none());
    }

    #[test]
    fn batched_reads_frame_any_bytes() {
        let out = b"ok 3\na\0\nbig 99\ngone\nerr Permission denied\nok 0\nmore\n";
        assert_eq!(
            parse_many(out, 9).unwrap(),
            vec![
                Fetched::Bytes(b"a\0\n".to_vec()),
                Fetched::TooLarge(99),
                Fetched::Gone,
                Fetched::Failed("Permission denied".into()),
                Fetched::Bytes(vec![]),
            ]
        );
        assert!(parse_many(b"ok 5\nab", 1).is_none());
        assert!(parse_many(b"", 2).is_none());
    }

    #[test]
    fn listings_split_on_the_lone_nuls() {
        let l = parse_listing(b"/srv\0/srv/d\0\0/srv/a\0/srv/d/b\0\0/srv/l\0\0/srv/p\0");
        assert_eq!(l.dirs, ["/srv", "/srv/d"]);
        assert_eq!(l.files, ["/srv/a", "/srv/d/b"]);
        assert_eq!(l.links, ["/srv/l"]);
        assert_eq!(l.other, ["/srv/p"]);
        let l = parse_listing(b"/srv\0\0\0\0");
        assert_eq!(l.dirs, ["/srv"]);
        assert!(l.files.is_empty() && l.links.is_empty() && l.other.is_empty());
    }
}
