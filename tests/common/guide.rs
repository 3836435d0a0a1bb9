//! The guide's pages (`docs/*.md`) and their fenced blocks, for the tests
//! that run what the pages show. A block a test runs carries `file=NAME`
//! in its info string (```` ```lua file=first.lua ````), and the test finds
//! it by that name.

use std::path::Path;

/// The guide's pages, `docs/*.md`, by name, with their text.
pub fn guide_pages() -> Vec<(String, String)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("docs");
    let mut pages: Vec<(String, String)> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "md"))
        .map(|p| {
            let name = format!("docs/{}", p.file_name().unwrap().to_string_lossy());
            (name, std::fs::read_to_string(&p).unwrap())
        })
        .collect();
    pages.sort();
    pages
}

/// The text of `docs/NAME`.
pub fn guide_page(name: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("docs")
        .join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// A fenced block of a Markdown page: its info string and its text.
pub struct Block {
    /// The info string after the opening fence, trimmed.
    pub info: String,
    /// The block's lines, each ended by a newline.
    pub text: String,
}

/// The fenced blocks of a Markdown page, in order.
pub fn fenced_blocks(page: &str) -> Vec<Block> {
    let mut blocks = Vec::new();
    let mut open: Option<Block> = None;
    for line in page.lines() {
        match open.as_mut() {
            None => {
                if let Some(info) = line.strip_prefix("```") {
                    open = Some(Block {
                        info: info.trim().to_string(),
                        text: String::new(),
                    });
                }
            }
            Some(block) if line.starts_with("```") => {
                let _ = block;
                blocks.push(open.take().expect("open block"));
            }
            Some(block) => {
                block.text.push_str(line);
                block.text.push('\n');
            }
        }
    }
    assert!(open.is_none(), "a page has an unclosed code block");
    blocks
}

/// The `file=NAME` of a block's info string.
pub fn file_name(info: &str) -> Option<&str> {
    info.split_whitespace()
        .find_map(|w| w.strip_prefix("file="))
}

/// The text of the block of `docs/PAGE` named `file=NAME`.
pub fn named_block(page: &str, name: &str) -> String {
    block_named(&guide_page(page), name)
        .unwrap_or_else(|| panic!("docs/{page} shows no block named file={name}"))
}

/// The text of the block of Markdown `text` named `file=NAME`, if any.
pub fn block_named(text: &str, name: &str) -> Option<String> {
    fenced_blocks(text)
        .into_iter()
        .find(|b| file_name(&b.info) == Some(name))
        .map(|b| b.text)
}

/// Runs a shell block of the guide as a person would paste it, with each
/// `(from, to)` of `swaps` replaced first (the test's own port for the
/// page's `127.0.0.1:8080`, a scratch folder for its `/tmp/calc`): by
/// `bash -eu` in `cwd`, the `sluice` under test first on `PATH`.
pub fn run_shell_block(text: &str, swaps: &[(&str, &str)], cwd: &Path) -> std::process::Output {
    let mut script = text.to_string();
    for (from, to) in swaps {
        assert!(script.contains(from), "the block has no {from:?}:\n{text}");
        script = script.replace(from, to);
    }
    let bin_dir = super::sluice_bin().parent().unwrap().to_path_buf();
    let path = format!("{}:{}", bin_dir.display(), std::env::var("PATH").unwrap());
    std::process::Command::new("bash")
        .args(["-eu", "-c", &script])
        .current_dir(cwd)
        .env("PATH", path)
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap()
}
