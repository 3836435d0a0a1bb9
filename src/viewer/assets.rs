//! The page's three files, built into the binary: no build step, nothing
//! fetched from anywhere else.

/// The page.
pub const INDEX: &str = include_str!("assets/index.html");
/// Its script.
pub const SCRIPT: &str = include_str!("assets/app.js");
/// Its style.
pub const STYLE: &str = include_str!("assets/app.css");

/// The file served at `path`, with its content type; `None` for the API
/// and for every other path.
pub fn file(path: &str) -> Option<(&'static str, &'static [u8])> {
    match path {
        "/" | "/index.html" => Some(("text/html; charset=utf-8", INDEX.as_bytes())),
        "/app.js" => Some(("text/javascript; charset=utf-8", SCRIPT.as_bytes())),
        "/app.css" => Some(("text/css; charset=utf-8", STYLE.as_bytes())),
        _ => None,
    }
}
