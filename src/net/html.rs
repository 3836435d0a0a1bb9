//! HTML rendered for reading (being written; this stub only holds the API so the crate builds).
pub fn to_markdown(html: &str, _base: Option<&url::Url>) -> String {
    html.to_string()
}
pub fn to_text(html: &str) -> String {
    html.to_string()
}
