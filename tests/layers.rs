//! The house's layers, as ARCHITECTURE.md draws them: every `crate::X`
//! a module of `src/` names must be in a strictly lower layer than its own
//! (or inside its own top-level module), so the import graph between
//! `src/` folders has no circle. The order is read from ARCHITECTURE.md's
//! `layers` block, so the document and the check cannot disagree.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

/// Top-level module → its layer (0 at the bottom), from the fenced
/// ```` ```layers ```` block of ARCHITECTURE.md, whose first line is the
/// top layer.
fn layers() -> BTreeMap<String, usize> {
    let doc = fs::read_to_string(Path::new(ROOT).join("ARCHITECTURE.md"))
        .expect("ARCHITECTURE.md exists at the repository root");
    let block = doc
        .split("```layers\n")
        .nth(1)
        .and_then(|rest| rest.split("```").next())
        .expect("ARCHITECTURE.md has a ```layers block");
    let rows: Vec<&str> = block.lines().filter(|l| !l.trim().is_empty()).collect();
    let mut layer = BTreeMap::new();
    for (i, row) in rows.iter().enumerate() {
        let row = row.split('#').next().unwrap_or_default();
        for name in row.split_whitespace() {
            layer.insert(name.to_string(), rows.len() - 1 - i);
        }
    }
    layer
}

/// Every `.rs` file under `dir`.
fn sources(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            sources(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The top-level module a file of `src/` belongs to (`None` for the crate
/// root and the binary, which see everything).
fn module_of(file: &Path) -> Option<String> {
    let rel = file.strip_prefix(Path::new(ROOT).join("src")).unwrap();
    let first = rel.components().next()?.as_os_str().to_str()?.to_string();
    match first.as_str() {
        "lib.rs" | "main.rs" => None,
        f => Some(f.trim_end_matches(".rs").to_string()),
    }
}

/// The top-level modules `line` names as `crate::X`, outside comments.
fn named(line: &str) -> Vec<String> {
    let code = line.trim_start();
    if code.starts_with("//") {
        return Vec::new();
    }
    let code = code.split(" //").next().unwrap_or_default();
    let mut found = Vec::new();
    let mut rest = code;
    while let Some(at) = rest.find("crate::") {
        let after = &rest[at + "crate::".len()..];
        let name: String = after
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect();
        if !name.is_empty() {
            found.push(name);
        }
        rest = after;
    }
    found
}

#[test]
fn every_import_goes_to_a_lower_layer() {
    let layer = layers();
    let mut files = Vec::new();
    sources(&Path::new(ROOT).join("src"), &mut files);
    files.sort();
    let mut wrong = Vec::new();
    for file in &files {
        let Some(module) = module_of(file) else {
            continue;
        };
        let Some(&own) = layer.get(&module) else {
            wrong.push(format!(
                "src/{module} is in no layer: add it to ARCHITECTURE.md's layers block"
            ));
            continue;
        };
        let text = fs::read_to_string(file).unwrap();
        for (n, line) in text.lines().enumerate() {
            for target in named(line) {
                if target == module {
                    continue;
                }
                match layer.get(&target) {
                    Some(&l) if l < own => {}
                    Some(&l) => wrong.push(format!(
                        "{}:{}: {module} (layer {own}) imports {target} (layer {l}); a module may only use lower layers",
                        file.strip_prefix(ROOT).unwrap().display(),
                        n + 1
                    )),
                    None => wrong.push(format!(
                        "{}:{}: crate::{target} is in no layer of ARCHITECTURE.md",
                        file.strip_prefix(ROOT).unwrap().display(),
                        n + 1
                    )),
                }
            }
        }
    }
    assert!(wrong.is_empty(), "layer violations:\n{}", wrong.join("\n"));
}

#[test]
fn the_check_sees_an_upward_import() {
    assert_eq!(named("use crate::pipeline::Core;"), ["pipeline"]);
    assert_eq!(
        named("    let x = crate::flows::Registry::standard(); // crate::cli"),
        ["flows"]
    );
    assert!(named("/// [`crate::pipeline::Core::call`]").is_empty());
    let layer = layers();
    assert!(layer["cli"] > layer["runtime"], "cli sits above runtime");
    assert!(layer["kernel"] > layer["audit"], "kernel sits above audit");
    assert!(
        layer["flows"] > layer["kernel"],
        "flows sit above the kernel"
    );
}

/// The flows `Registry::standard` adds, by module: `r.add::<read::Read>()`.
fn flow_modules() -> Vec<String> {
    let registry = fs::read_to_string(Path::new(ROOT).join("src/flows/mod.rs")).unwrap();
    registry
        .lines()
        .filter_map(|l| l.trim().strip_prefix("r.add::<"))
        .filter_map(|l| l.split("::").next())
        .map(str::to_string)
        .collect()
}

#[test]
fn flows_do_not_import_each_other() {
    let flows = flow_modules();
    assert!(flows.len() >= 13, "the registry lists the flows: {flows:?}");
    let dir = Path::new(ROOT).join("src/flows");
    let mut files = Vec::new();
    sources(&dir, &mut files);
    let mut wrong = Vec::new();
    for file in files {
        let rel = file.strip_prefix(&dir).unwrap();
        let own = rel
            .components()
            .next()
            .unwrap()
            .as_os_str()
            .to_str()
            .unwrap();
        let own = own.trim_end_matches(".rs");
        let text = fs::read_to_string(&file).unwrap();
        for (n, line) in text.lines().enumerate() {
            if line.trim_start().starts_with("//") {
                continue;
            }
            for other in flows.iter().filter(|f| f.as_str() != own) {
                let names = [
                    format!("super::{other}::"),
                    format!("super::super::{other}::"),
                    format!("crate::flows::{other}::"),
                    format!("super::{{{other}"),
                ];
                if own != "mod" && names.iter().any(|p| line.contains(p.as_str())) {
                    wrong.push(format!(
                        "src/flows/{}:{}: {}",
                        rel.display(),
                        n + 1,
                        line.trim()
                    ));
                }
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "a flow imports another flow; move what they share into a helper module of flows/ (walk.rs, lines.rs, region.rs, http.rs) or lower:\n{}",
        wrong.join("\n")
    );
}
