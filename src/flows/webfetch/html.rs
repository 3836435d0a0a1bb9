//! HTML rendered for a model to read: what `webfetch` returns for an HTML
//! response with `format = "markdown"` (the default) or `"text"`.
//!
//! A fetched page is mostly markup, scripts and site chrome; the model wants
//! the article. [`to_markdown`] keeps what carries meaning and is cheap to
//! read: ATX headings, links resolved to absolute URLs (a relative link means
//! nothing once the page is gone), `*`/`**` emphasis, nested lists, tables
//! with a header row as Markdown tables, images as `![alt](src)`, inline code
//! and fenced code blocks tagged with their language (from `language-x` or
//! `lang-x` on `<code>`/`<pre>`, or Sphinx's `highlight-x` on an enclosing
//! `<div>`), the code kept verbatim. [`to_text`] keeps only the readable text,
//! each block on its own lines.
//!
//! Both drop what is not content, so it costs no tokens: `script`, `style`,
//! `noscript`, `template`, `svg`, `iframe`, the document `head`, form
//! controls (`button`, `select`), comments, and navigation chrome: `nav`,
//! `aside` (footnotes excepted: Sphinx renders them as `aside.footnote`),
//! page-level `header`/`footer` (those inside an `article`, `section` or
//! `main` are the article's own and stay), elements whose `role` is
//! `navigation`, `banner` or `contentinfo`, and Sphinx's chrome
//! (`div.related`, `div.sphinxsidebar`, `div.footer` and the `¶` permalinks
//! `a.headerlink`). Runs of blank lines become one (in Markdown, outside code
//! blocks) and the result is trimmed.
//!
//! The conversion is [htmd]'s walk over an html5ever tree, with handlers of
//! our own where its defaults differ from the above. Those handlers need
//! context the walk does not pass down (the base URL, whether an enclosing
//! element is code or a sectioning element, the Sphinx language of an
//! enclosing `div`); it lives in a thread-local `State` set for the length
//! of one conversion, pushed and popped around the walk of each element's
//! children.

use std::cell::RefCell;
use std::rc::Rc;
use std::sync::OnceLock;

use htmd::element_handler::{HandlerResult, Handlers};
use htmd::options::{
    BulletListMarker, CodeBlockFence, CodeBlockStyle, HeadingStyle, LinkStyle, Options,
};
use htmd::{Element, HtmlToMarkdown, Node};
use markup5ever_rcdom::NodeData;
use url::Url;

/// Renders an HTML document as Markdown. `base` resolves relative links and image sources.
pub fn to_markdown(html: &str, base: Option<&Url>) -> String {
    let raw = convert(markdown_converter(), html, base);
    finish_markdown(&raw)
}

/// Renders an HTML document as plain text: the readable text, block elements on their own lines, no markup.
pub fn to_text(html: &str) -> String {
    let raw = convert(text_converter(), html, None);
    finish_text(&raw)
}

fn convert(converter: &HtmlToMarkdown, html: &str, base: Option<&Url>) -> String {
    // A fresh state per conversion: nothing leaks from a conversion that
    // panicked half-way on this thread.
    STATE.with(|s| {
        *s.borrow_mut() = State {
            base: base.cloned(),
            ..State::default()
        }
    });
    // htmd's convert only fails on I/O, and a `&str` source does none.
    let out = converter.convert(html).unwrap_or_default();
    STATE.with(|s| *s.borrow_mut() = State::default());
    out
}

/// Elements dropped with everything inside them, in both renderings.
const DROPPED: &[&str] = &[
    "script", "style", "noscript", "template", "svg", "iframe", "head", "button", "select",
];

/// Elements that may be navigation chrome (by tag, `role` or Sphinx class),
/// or that set context for their descendants. See [`container`].
const CONTAINERS: &[&str] = &[
    "div", "section", "article", "main", "header", "footer", "nav", "aside", "ul", "ol", "menu",
    "table", "form",
];

const HEADINGS: &[&str] = &["h1", "h2", "h3", "h4", "h5", "h6"];

fn markdown_converter() -> &'static HtmlToMarkdown {
    static CONVERTER: OnceLock<HtmlToMarkdown> = OnceLock::new();
    CONVERTER.get_or_init(|| {
        HtmlToMarkdown::builder()
            .options(Options {
                heading_style: HeadingStyle::Atx,
                code_block_style: CodeBlockStyle::Fenced,
                code_block_fence: CodeBlockFence::Backticks,
                link_style: LinkStyle::Inlined,
                bullet_list_marker: BulletListMarker::Dash,
                ul_bullet_spacing: 1,
                ol_number_spacing: 1,
                ..Options::default()
            })
            .add_handler(vec!["pre"], md_pre)
            .add_handler(vec!["code"], md_code)
            .add_handler(vec!["a"], md_anchor)
            .add_handler(vec!["img"], md_img)
            .add_handler(vec!["em", "i", "strong", "b"], md_emphasis)
            .add_handler(vec!["br"], md_br)
            .add_handler(HEADINGS.to_vec(), md_heading)
            .add_handler(vec!["table"], md_table)
            .add_handler(CONTAINERS.to_vec(), container)
            .add_handler(DROPPED.to_vec(), dropped)
            .build()
    })
}

fn text_converter() -> &'static HtmlToMarkdown {
    static CONVERTER: OnceLock<HtmlToMarkdown> = OnceLock::new();
    CONVERTER.get_or_init(|| {
        let mut blocks = HEADINGS.to_vec();
        blocks.extend(["p", "blockquote", "dt", "dd", "caption", "figcaption"]);
        HtmlToMarkdown::builder()
            .add_handler(blocks, text_block)
            .add_handler(vec!["pre"], text_pre)
            .add_handler(vec!["code"], text_code)
            .add_handler(vec!["a"], text_anchor)
            .add_handler(vec!["img"], dropped)
            .add_handler(
                vec!["em", "i", "strong", "b", "thead", "tbody", "tfoot"],
                text_inline,
            )
            .add_handler(vec!["ul", "ol"], text_list)
            .add_handler(vec!["li"], text_item)
            .add_handler(vec!["table"], text_table)
            .add_handler(vec!["tr"], text_row)
            .add_handler(vec!["td", "th"], text_cell)
            .add_handler(vec!["br"], text_br)
            .add_handler(vec!["hr"], text_hr)
            .add_handler(CONTAINERS.to_vec(), container)
            .add_handler(DROPPED.to_vec(), dropped)
            .build()
    })
}

// ---------------------------------------------------------------------------
// Conversion state

/// What the handlers of the conversion running on this thread need to know
/// about the elements enclosing the one they handle.
#[derive(Default)]
struct State {
    /// Resolves relative links and image sources.
    base: Option<Url>,
    /// Open `article`/`section`/`main` (and footnote `aside`) elements: a
    /// `header` or `footer` inside one belongs to it, not to the page.
    sectioning: u32,
    /// Open `pre`/`code` elements: inside code, markup is text.
    code_depth: u32,
    /// Open `li` elements (to_text: a nested list is not a new paragraph).
    li_depth: u32,
    /// Languages of open Sphinx `div.highlight-x` elements (None: `none`/`default`).
    sphinx_langs: Vec<Option<String>>,
    /// Open `pre` elements and the language their direct `<code>` child declared.
    pres: Vec<(Rc<Node>, Option<String>)>,
}

thread_local! {
    static STATE: RefCell<State> = RefCell::new(State::default());
}

fn with_state<R>(f: impl FnOnce(&mut State) -> R) -> R {
    STATE.with(|s| f(&mut s.borrow_mut()))
}

/// Runs `walk` (which walks an element's children) with `enter` applied to
/// the state before and `leave` after.
fn within<R>(
    enter: impl FnOnce(&mut State),
    leave: impl FnOnce(&mut State),
    walk: impl FnOnce() -> R,
) -> R {
    with_state(enter);
    let out = walk();
    with_state(leave);
    out
}

fn in_code() -> bool {
    with_state(|s| s.code_depth > 0)
}

// ---------------------------------------------------------------------------
// Element helpers

fn attr<'a>(element: &'a Element, name: &str) -> Option<&'a str> {
    element
        .attrs
        .iter()
        .find(|a| &*a.name.local == name)
        .map(|a| &*a.value)
}

fn has_token(value: Option<&str>, pred: impl Fn(&str) -> bool) -> bool {
    value.is_some_and(|v| v.split_ascii_whitespace().any(pred))
}

fn has_class(element: &Element, class: &str) -> bool {
    has_token(attr(element, "class"), |c| c == class)
}

/// The node's parent, read without disturbing the tree (the parent link is a
/// `Cell`, so it is taken and put back).
fn parent(node: &Rc<Node>) -> Option<Rc<Node>> {
    let link = node.parent.take();
    let parent = link.as_ref().and_then(|weak| weak.upgrade());
    node.parent.set(link);
    parent
}

/// `language-x` or `lang-x` in a `class` attribute.
fn class_language(element: &Element) -> Option<String> {
    attr(element, "class")?
        .split_ascii_whitespace()
        .find_map(|c| {
            c.strip_prefix("language-")
                .or_else(|| c.strip_prefix("lang-"))
        })
        .filter(|lang| !lang.is_empty())
        .map(str::to_string)
}

/// Sphinx marks a code block's language on the `div` around it:
/// `<div class="highlight-python3 notranslate"><div class="highlight"><pre>`.
/// Outer None: not such a div. Inner None: `highlight-none`/`highlight-default`,
/// no language to tell.
fn sphinx_language(element: &Element) -> Option<Option<String>> {
    let class = attr(element, "class")?;
    let lang = class
        .split_ascii_whitespace()
        .find_map(|c| c.strip_prefix("highlight-"))?;
    // GitHub's rendering says `highlight-source-python`.
    let lang = lang.strip_prefix("source-").unwrap_or(lang);
    Some(match lang {
        "" | "none" | "default" => None,
        lang => Some(lang.to_string()),
    })
}

fn is_footnote(element: &Element) -> bool {
    has_token(attr(element, "class"), |c| c.starts_with("footnote"))
        || has_token(attr(element, "role"), |r| {
            r == "doc-footnote" || r == "doc-endnotes"
        })
}

/// Navigation chrome: dropped with its content.
fn is_chrome(element: &Element) -> bool {
    if has_token(attr(element, "role"), |r| {
        matches!(r, "navigation" | "banner" | "contentinfo")
    }) {
        return true;
    }
    match element.tag {
        "nav" => true,
        "aside" => !is_footnote(element),
        "header" | "footer" => with_state(|s| s.sectioning == 0),
        "div" => has_token(attr(element, "class"), |c| {
            matches!(c, "related" | "sphinxsidebar" | "footer")
        }),
        _ => false,
    }
}

/// Opens a scope in which `header`/`footer` are not page-level.
fn is_sectioning(element: &Element) -> bool {
    matches!(element.tag, "article" | "section" | "main" | "aside")
        || has_token(attr(element, "role"), |r| {
            matches!(r, "main" | "article" | "region")
        })
}

// ---------------------------------------------------------------------------
// Handlers shared by both renderings

fn dropped(_: &dyn Handlers, _: Element) -> Option<HandlerResult> {
    None
}

/// Drops chrome; keeps track of sectioning elements and Sphinx code
/// languages for the descendants; otherwise hands the element to the
/// handler registered before this one.
fn container(handlers: &dyn Handlers, element: Element) -> Option<HandlerResult> {
    if is_chrome(&element) {
        return None;
    }
    if element.tag == "div" && in_code() {
        // A highlighter that puts each line of a code block in a div: one
        // line each, not Markdown paragraphs.
        let mut line = handlers.walk_children(element.node).content;
        if !line.ends_with('\n') {
            line.push('\n');
        }
        return Some(line.into());
    }
    if is_sectioning(&element) {
        return within(
            |s| s.sectioning += 1,
            |s| s.sectioning -= 1,
            || handlers.fallback(element),
        );
    }
    if element.tag == "div" {
        if let Some(lang) = sphinx_language(&element) {
            return within(
                |s| s.sphinx_langs.push(lang),
                |s| {
                    s.sphinx_langs.pop();
                },
                || handlers.fallback(element),
            );
        }
    }
    handlers.fallback(element)
}

/// The text of a `<pre>`, verbatim, and the language its direct `<code>`
/// child declared (read by [`md_code`]/[`text_code`] while the walk is in it).
fn pre_contents(handlers: &dyn Handlers, element: &Element) -> (String, Option<String>) {
    let node = element.node.clone();
    with_state(|s| {
        s.code_depth += 1;
        s.pres.push((node, None));
    });
    let mut code = handlers.walk_children(element.node).content;
    // htmd's walk puts a backslash before a text child of `<pre>` that starts
    // with ` or ~ (a guard for its own fences). Our fences are long enough
    // anyway; when that guard may have fired, read the text exactly instead.
    if code.contains("\\`") || code.contains("\\~") {
        if let Some(exact) = exact_pre_text(handlers, element.node) {
            code = exact;
        }
    }
    let lang = with_state(|s| {
        s.code_depth -= 1;
        s.pres.pop().and_then(|(_, lang)| lang)
    });
    (code, lang)
}

/// In a `<pre>`, whether this `<code>` is the pre's direct child; if so,
/// records its language for [`pre_contents`].
fn note_code_block_language(element: &Element) -> bool {
    let Some(pre) = with_state(|s| s.pres.last().map(|(pre, _)| pre.clone())) else {
        return false;
    };
    if !parent(element.node).is_some_and(|p| Rc::ptr_eq(&p, &pre)) {
        return false;
    }
    let lang = class_language(element);
    with_state(|s| {
        if let Some((_, slot)) = s.pres.last_mut() {
            if slot.is_none() {
                *slot = lang;
            }
        }
    });
    true
}

/// A `<pre>`'s content with its direct text children read from the tree
/// rather than through htmd's walk (see [`pre_contents`]). None when a text
/// node cannot be read.
fn exact_pre_text(handlers: &dyn Handlers, pre: &Rc<Node>) -> Option<String> {
    let children: Vec<Rc<Node>> = pre.children.borrow().clone();
    let mut out = String::new();
    for child in &children {
        if child.children.borrow().is_empty() {
            match leaf(child) {
                Leaf::Text(text) => {
                    out.push_str(&text);
                    continue;
                }
                Leaf::Other => continue,
                Leaf::Element => {}
            }
        }
        out.push_str(&handlers.handle(child)?.content);
    }
    Some(out)
}

enum Leaf {
    Text(String),
    Element,
    Other,
}

/// What a childless node is.
fn leaf(node: &Node) -> Leaf {
    match &node.data {
        NodeData::Element { .. } => Leaf::Element,
        NodeData::Text { contents } => Leaf::Text(contents.borrow().to_string()),
        _ => Leaf::Other,
    }
}

/// `href`/`src` made absolute against the base when there is one.
fn resolve(reference: &str) -> String {
    let reference = reference.trim();
    with_state(|s| match &s.base {
        Some(base) => base
            .join(reference)
            .map_or_else(|_| reference.to_string(), String::from),
        None => reference.to_string(),
    })
}

/// A link destination as Markdown reads it.
fn destination(url: &str) -> String {
    if url.contains([' ', '<', '>']) {
        return format!("<{}>", url.replace('<', "%3C").replace('>', "%3E"));
    }
    let opens = url.matches('(').count();
    if opens == url.matches(')').count() {
        url.to_string()
    } else {
        url.replace('(', "\\(").replace(')', "\\)")
    }
}

// ---------------------------------------------------------------------------
// Markdown handlers

/// A fenced code block, tagged with the language from the `<code>`, the
/// `<pre>` or an enclosing Sphinx `div`, the code verbatim.
fn md_pre(handlers: &dyn Handlers, element: Element) -> Option<HandlerResult> {
    if in_code() {
        return Some(handlers.walk_children(element.node));
    }
    let (code, code_lang) = pre_contents(handlers, &element);
    if code.trim().is_empty() {
        return None;
    }
    let lang = code_lang
        .or_else(|| class_language(&element))
        .or_else(|| with_state(|s| s.sphinx_langs.last().cloned().flatten()))
        .unwrap_or_default();
    let code = code.strip_suffix('\n').unwrap_or(&code);
    let longest_run = code.split(|c| c != '`').map(str::len).max().unwrap_or(0);
    let fence = "`".repeat(3.max(longest_run + 1));
    Some(format!("\n\n{fence}{lang}\n{code}\n{fence}\n\n").into())
}

/// Inside a code block: the text. Otherwise inline code, by htmd, with
/// markup inside it (links, emphasis) kept as text.
fn md_code(handlers: &dyn Handlers, element: Element) -> Option<HandlerResult> {
    if note_code_block_language(&element) || in_code() {
        return Some(handlers.walk_children(element.node));
    }
    within(
        |s| s.code_depth += 1,
        |s| s.code_depth -= 1,
        || handlers.fallback(element),
    )
}

/// `[text](absolute-url)`, without the title (Sphinx titles every link with
/// its target's name). No link for a missing or `javascript:` href, nor
/// inside code; Sphinx's `¶` permalinks dropped.
fn md_anchor(handlers: &dyn Handlers, element: Element) -> Option<HandlerResult> {
    if has_class(&element, "headerlink") {
        return None;
    }
    let content = handlers.walk_children(element.node).content;
    let href = attr(&element, "href").map(str::trim);
    let Some(href) = href.filter(|h| !h.is_empty() && !h.starts_with("javascript:")) else {
        return Some(content.into());
    };
    if in_code() {
        return Some(content.into());
    }
    let inner = content.trim();
    if inner.is_empty() {
        return (!content.is_empty()).then(|| content.clone().into());
    }
    let start = content.len() - content.trim_start().len();
    let lead = &content[..start];
    let trail = &content[start + inner.len()..];
    let url = destination(&resolve(href));
    Some(format!("{lead}[{inner}]({url}){trail}").into())
}

/// `![alt](src)`; an image with no usable source (none, or a `data:` URL
/// that would only cost tokens) keeps its alt text as `![alt]()`.
fn md_img(_: &dyn Handlers, element: Element) -> Option<HandlerResult> {
    if in_code() {
        return None;
    }
    let alt = attr(&element, "alt")
        .unwrap_or("")
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .replace('[', "\\[")
        .replace(']', "\\]");
    let src = attr(&element, "src")
        .map(str::trim)
        .filter(|s| !s.is_empty() && !s.starts_with("data:"));
    match src {
        Some(src) => {
            let url = destination(&resolve(src));
            Some(format!("![{alt}]({url})").into())
        }
        None if !alt.is_empty() => Some(format!("![{alt}]()").into()),
        None => None,
    }
}

fn md_emphasis(handlers: &dyn Handlers, element: Element) -> Option<HandlerResult> {
    if in_code() {
        return Some(handlers.walk_children(element.node));
    }
    handlers.fallback(element)
}

fn md_br(handlers: &dyn Handlers, element: Element) -> Option<HandlerResult> {
    if in_code() {
        return Some("\n".into());
    }
    handlers.fallback(element)
}

/// htmd's heading, without the escapes that keep text from starting a list
/// or a quote: nothing in a heading's text can (`# 4\. Tools` → `# 4. Tools`).
fn md_heading(handlers: &dyn Handlers, element: Element) -> Option<HandlerResult> {
    let result = handlers.fallback(element)?;
    let content = result.content;
    let Some(at) = content.find("# ").map(|at| at + 2) else {
        return Some(content.into());
    };
    let text = &content[at..];
    let digits = text.len() - text.trim_start_matches(|c: char| c.is_ascii_digit()).len();
    let unescaped = if digits > 0 && text[digits..].starts_with("\\.") {
        format!(
            "{}{}{}",
            &content[..at],
            &text[..digits],
            &text[digits + 1..]
        )
    } else if text.starts_with('\\') && text[1..].starts_with(['-', '+', '=', '~', '>', '#']) {
        format!("{}{}", &content[..at], &text[1..])
    } else {
        return Some(content.into());
    };
    Some(unescaped.into())
}

/// htmd's table (for a table with a header row; htmd leaves other tables,
/// often layout, as blocks), without the padding that aligns the columns:
/// it only costs tokens, and one long cell pads every row of its column.
fn md_table(handlers: &dyn Handlers, element: Element) -> Option<HandlerResult> {
    let result = handlers.fallback(element)?;
    let is_separator = |line: &str| {
        let line = line.trim();
        line.len() > 2
            && line.starts_with('|')
            && line.ends_with('|')
            && line.bytes().all(|b| matches!(b, b'|' | b'-' | b' '))
    };
    if !result.content.lines().any(is_separator) {
        return Some(result);
    }
    let mut out = String::with_capacity(result.content.len());
    for line in result.content.split_inclusive('\n') {
        let body = line.trim_end_matches('\n');
        // htmd writes a `|` inside a cell as `&#124;`: every `|` of a row is a delimiter.
        if body.len() >= 2 && body.starts_with('|') && body.ends_with('|') {
            let separator = is_separator(body);
            out.push('|');
            for cell in body[1..body.len() - 1].split('|') {
                let cell = if separator { "---" } else { cell.trim() };
                out.push(' ');
                out.push_str(cell);
                if !cell.is_empty() {
                    out.push(' ');
                }
                out.push('|');
            }
            out.push_str(&line[body.len()..]);
        } else {
            out.push_str(line);
        }
    }
    Some(out.into())
}

/// At most one blank line in a row outside fenced code blocks, whose lines
/// are kept as they are; lines of only whitespace count as blank; trimmed.
fn finish_markdown(raw: &str) -> String {
    let mut out = String::with_capacity(raw.len());
    let mut fence: Option<&str> = None;
    let mut blank = false;
    for line in raw.lines() {
        if let Some(open) = fence {
            out.push_str(line);
            out.push('\n');
            if line.trim() == open {
                fence = None;
            }
            continue;
        }
        if line.trim().is_empty() {
            blank = true;
            continue;
        }
        if blank && !out.is_empty() {
            // A hard line break (trailing spaces) before a blank line breaks nothing.
            let kept = out.trim_end().len();
            out.truncate(kept);
            out.push_str("\n\n");
        }
        blank = false;
        let body = line.trim_start();
        let run = body.len() - body.trim_start_matches('`').len();
        if run >= 3 && !body[run..].contains('`') {
            fence = Some(&body[..run]);
        }
        out.push_str(line);
        out.push('\n');
    }
    let end = out.trim_end().len();
    out.truncate(end);
    out
}

// ---------------------------------------------------------------------------
// Plain-text handlers
//
// htmd's walk escapes text for Markdown (`\*`, `\_`, `\<p>`, and every
// literal backslash doubled), so `finish_text` undoes `\x` → `x`. Code comes
// out of the walk unescaped, so its backslashes are doubled here to come out
// of that pass as they were.

fn text_block(handlers: &dyn Handlers, element: Element) -> Option<HandlerResult> {
    let content = handlers.walk_children(element.node).content;
    Some(format!("\n\n{}\n\n", content.trim()).into())
}

fn text_inline(handlers: &dyn Handlers, element: Element) -> Option<HandlerResult> {
    Some(handlers.walk_children(element.node))
}

fn text_anchor(handlers: &dyn Handlers, element: Element) -> Option<HandlerResult> {
    if has_class(&element, "headerlink") {
        return None;
    }
    Some(handlers.walk_children(element.node))
}

fn text_pre(handlers: &dyn Handlers, element: Element) -> Option<HandlerResult> {
    if in_code() {
        return Some(handlers.walk_children(element.node));
    }
    let (code, _) = pre_contents(handlers, &element);
    let code = code.strip_suffix('\n').unwrap_or(&code);
    Some(format!("\n\n{}\n\n", code.replace('\\', "\\\\")).into())
}

fn text_code(handlers: &dyn Handlers, element: Element) -> Option<HandlerResult> {
    if note_code_block_language(&element) || in_code() {
        return Some(handlers.walk_children(element.node));
    }
    let code = within(
        |s| s.code_depth += 1,
        |s| s.code_depth -= 1,
        || handlers.walk_children(element.node).content,
    );
    Some(code.replace('\\', "\\\\").into())
}

fn text_list(handlers: &dyn Handlers, element: Element) -> Option<HandlerResult> {
    let content = handlers.walk_children(element.node).content;
    let content = content.trim_matches('\n');
    if content.is_empty() {
        return None;
    }
    if with_state(|s| s.li_depth > 0) {
        Some(format!("\n{content}\n").into())
    } else {
        Some(format!("\n\n{content}\n\n").into())
    }
}

/// One item a line (or more, for items of several blocks).
fn text_item(handlers: &dyn Handlers, element: Element) -> Option<HandlerResult> {
    let content = within(
        |s| s.li_depth += 1,
        |s| s.li_depth -= 1,
        || handlers.walk_children(element.node).content,
    );
    Some(format!("\n{}", content.trim()).into())
}

fn text_table(handlers: &dyn Handlers, element: Element) -> Option<HandlerResult> {
    let content = handlers.walk_children(element.node).content;
    let content = content.trim_matches('\n');
    if content.trim().is_empty() {
        return None;
    }
    Some(format!("\n\n{content}\n\n").into())
}

/// A table row a line, cells separated by tabs.
fn text_row(handlers: &dyn Handlers, element: Element) -> Option<HandlerResult> {
    let content = handlers.walk_children(element.node).content;
    let cells = content.trim_matches([' ', '\n']);
    Some(format!("\n{}", cells.strip_prefix('\t').unwrap_or(cells)).into())
}

fn text_cell(handlers: &dyn Handlers, element: Element) -> Option<HandlerResult> {
    let content = handlers.walk_children(element.node).content;
    let cell = content.split_whitespace().collect::<Vec<_>>().join(" ");
    Some(format!("\t{cell}").into())
}

fn text_br(_: &dyn Handlers, _: Element) -> Option<HandlerResult> {
    Some("\n".into())
}

fn text_hr(_: &dyn Handlers, _: Element) -> Option<HandlerResult> {
    Some("\n\n".into())
}

/// Undoes htmd's Markdown escapes; trailing whitespace off each line; at
/// most one blank line in a row; trimmed.
fn finish_text(raw: &str) -> String {
    let mut text = String::with_capacity(raw.len());
    let mut chars = raw.chars();
    while let Some(c) = chars.next() {
        if c == '\\' {
            text.push(chars.next().unwrap_or('\\'));
        } else {
            text.push(c);
        }
    }
    let mut out = String::with_capacity(text.len());
    let mut blank = false;
    for line in text.lines() {
        let line = line.trim_end();
        if line.is_empty() {
            blank = true;
            continue;
        }
        if blank && !out.is_empty() {
            out.push('\n');
        }
        blank = false;
        out.push_str(line);
        out.push('\n');
    }
    let end = out.trim_end().len();
    out.truncate(end);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::{Path, PathBuf};

    fn base() -> Url {
        Url::parse("https://docs.example.org/guide/intro.html").unwrap()
    }

    fn md(html: &str) -> String {
        to_markdown(html, Some(&base()))
    }

    const HEADINGS_HTML: &str =
        "<h1>One</h1><h2>Two</h2><h3>Three</h3><h4>Four</h4><h5>Five</h5><h6>Six</h6>";
    const LINKS_HTML: &str = "<p>See <a href=\"../api/index.html#top\" title=\"API\">the API</a>, \
         <a href=\"#usage\">usage</a> and <a href=\"https://other.org/x\">this</a>.</p>";
    const IMAGES_HTML: &str = "<p><img src=\"img/logo.png\" alt=\"The logo\"> \
         <img src=\"data:image/png;base64,AAAA\" alt=\"inline\"> <img src=\"/a.png\"></p>";
    const EMPHASIS_HTML: &str =
        "<p><em>one</em> <i>two</i> <strong>three</strong> <b>four</b> <em><strong>five</strong></em></p>";
    const LISTS_HTML: &str = "<ul><li>A<ul><li>A1</li><li>A2<ol><li>x</li><li>y</li></ol></li>\
         </ul></li><li>B</li></ul><ol start=\"3\"><li>three</li><li>four</li></ol>";
    const TABLE_HTML: &str = "<table><thead><tr><th>Name</th><th>Value</th></tr></thead><tbody>\
         <tr><td>a|b</td><td><code>1</code></td></tr><tr><td>long name</td><td></td></tr>\
         </tbody></table>";
    const CHROME_HTML: &str = "<html><head><title>T</title><style>p{color:red}</style>\
         <script>track()</script></head><body><header>Site banner</header>\
         <nav><a href=\"/\">Home</a></nav><!-- a comment --><main><article>\
         <header><h1>Title</h1></header><p>Body.<script>x()</script><style>b{}</style></p>\
         <aside>Related links</aside><footer>Article footer</footer></article></main>\
         <div role=\"navigation\">Menu</div><ul role=\"navigation\"><li>Item</li></ul>\
         <div role=\"banner\">Banner</div><div role=\"contentinfo\">Info</div>\
         <noscript>Enable JS</noscript><template><p>tpl</p></template>\
         <svg><text>svg text</text></svg><iframe src=\"x\"></iframe>\
         <footer>Copyright</footer></body></html>";
    const SPHINX_CHROME_HTML: &str =
        "<div class=\"related\" role=\"navigation\"><h3>Navigation</h3>\
         </div><div class=\"document\"><h1>Page<a class=\"headerlink\" href=\"#page\" \
         title=\"Permalink to this heading\">¶</a></h1><p>Text.</p></div>\
         <div class=\"sphinxsidebar\"><h3>Table of Contents</h3></div>\
         <div class=\"footer\">&copy; Copyright.</div>";
    const ENTITIES_HTML: &str =
        "<p>Fish &amp; chips &copy; 2024 &lt; 3 &gt; 2 &quot;q&quot; &#8212; &lt;div&gt;</p>";
    const BLANK_LINES_HTML: &str = "<p>one</p>\n\n\n<div><div><br><br><br></div></div>\n\n\
         <p>two<br><br><br><br>three</p><p>   </p><p>four</p>";

    #[test]
    fn markdown_headings_each_level() {
        assert_eq!(
            md(HEADINGS_HTML),
            "# One\n\n## Two\n\n### Three\n\n#### Four\n\n##### Five\n\n###### Six"
        );
        // A numbered heading is not escaped as if it could start a list.
        assert_eq!(md("<h2>4. Four</h2>"), "## 4. Four");
    }

    #[test]
    fn markdown_links_resolved_against_base() {
        assert_eq!(
            md(LINKS_HTML),
            "See [the API](https://docs.example.org/api/index.html#top), \
             [usage](https://docs.example.org/guide/intro.html#usage) and \
             [this](https://other.org/x)."
        );
        // Without a base, hrefs are kept as written.
        assert_eq!(
            to_markdown(LINKS_HTML, None),
            "See [the API](../api/index.html#top), [usage](#usage) and [this](https://other.org/x)."
        );
        // No href, or a script: the text alone.
        assert_eq!(
            md("<p><a name=\"x\">anchor</a> <a href=\"javascript:go()\">go</a></p>"),
            "anchor go"
        );
    }

    #[test]
    fn markdown_images_keep_alt_text() {
        assert_eq!(
            md(IMAGES_HTML),
            "![The logo](https://docs.example.org/guide/img/logo.png) ![inline]() \
             ![](https://docs.example.org/a.png)"
        );
        assert_eq!(
            md("<a href=\"big.png\"><img src=\"small.png\" alt=\"A [boxed] pic\"></a>"),
            "[![A \\[boxed\\] pic](https://docs.example.org/guide/small.png)]\
             (https://docs.example.org/guide/big.png)"
        );
    }

    #[test]
    fn markdown_emphasis() {
        assert_eq!(
            md(EMPHASIS_HTML),
            "*one* *two* **three** **four** ***five***"
        );
    }

    #[test]
    fn markdown_nested_lists() {
        assert_eq!(
            md(LISTS_HTML),
            "- A\n  - A1\n  - A2\n    1. x\n    2. y\n- B\n\n3. three\n4. four"
        );
    }

    #[test]
    fn markdown_table_with_header() {
        assert_eq!(
            md(TABLE_HTML),
            "| Name | Value |\n| --- | --- |\n| a&#124;b | `1` |\n| long name | |"
        );
    }

    #[test]
    fn markdown_code_language_from_code_class() {
        let html = "<pre><code class=\"hljs language-rust\">fn main() {\n    \
                    println!(\"&lt;hi&gt; *x* _y_ [z]\");\n}\n</code></pre>";
        assert_eq!(
            md(html),
            "```rust\nfn main() {\n    println!(\"<hi> *x* _y_ [z]\");\n}\n```"
        );
        assert_eq!(
            md("<pre><code class=\"lang-sh\">ls</code></pre>"),
            "```sh\nls\n```"
        );
    }

    #[test]
    fn markdown_code_language_from_pre_class() {
        assert_eq!(
            md("<pre class=\"lang-js\">let a = b &amp;&amp; c;\n</pre>"),
            "```js\nlet a = b && c;\n```"
        );
        assert_eq!(
            md("<pre class=\"language-c\"><code>int x;</code></pre>"),
            "```c\nint x;\n```"
        );
    }

    #[test]
    fn markdown_code_language_from_sphinx_div() {
        // As Sphinx writes it (python docs), highlighter spans and all.
        let html = "<div class=\"highlight-python3 notranslate\"><div class=\"highlight\"><pre>\
                    <span></span><span class=\"k\">def</span> <span class=\"nf\">f</span>\
                    <span class=\"p\">():</span>\n    <span class=\"k\">return</span> \
                    <span class=\"s1\">&#39;a\\\\b&#39;</span>\n</pre></div></div>";
        assert_eq!(md(html), "```python3\ndef f():\n    return 'a\\\\b'\n```");
        // `highlight-default`/`highlight-none` name no language.
        assert_eq!(
            md(
                "<div class=\"doctest highlight-default notranslate\"><div class=\"highlight\">\
                <pre><span class=\"gp\">&gt;&gt;&gt; </span>1</pre></div></div>"
            ),
            "```\n>>> 1\n```"
        );
    }

    #[test]
    fn markdown_code_blocks_are_verbatim() {
        // Text starting with ~ or ` right inside <pre> (htmd escapes it),
        // backslashes, blank lines, a character Debug escapes, links and
        // emphasis inside code (text there, not Markdown).
        let html = "<pre>~/envs/bin/activate\n`tick` ```\n\n\nC:\\dir\u{200b}\t\"q\"\n\
                    <a href=\"x.html\">link</a> <em>em</em><br>next</pre>";
        assert_eq!(
            md(html),
            "````\n~/envs/bin/activate\n`tick` ```\n\n\nC:\\dir\u{200b}\t\"q\"\nlink em\nnext\n````"
        );
    }

    #[test]
    fn markdown_inline_code() {
        assert_eq!(
            md("<p>Run <code>ls -l *.rs</code>, <code>a`b</code> or \
                <a href=\"f.html\"><code>f()</code></a>.</p>"),
            "Run `ls -l *.rs`, ``a`b`` or [`f()`](https://docs.example.org/guide/f.html)."
        );
    }

    #[test]
    fn markdown_drops_scripts_styles_comments_and_chrome() {
        // The page-level header/footer, nav, aside, role=navigation/banner/
        // contentinfo go; the article's own header and footer stay.
        assert_eq!(md(CHROME_HTML), "# Title\n\nBody.\n\nArticle footer");
        // Footnotes are asides in Sphinx; they are content.
        assert_eq!(
            md("<aside class=\"footnote brackets\" id=\"id2\" role=\"note\"><p>A note.</p></aside>"),
            "A note."
        );
    }

    #[test]
    fn markdown_drops_sphinx_chrome() {
        assert_eq!(md(SPHINX_CHROME_HTML), "# Page\n\nText.");
    }

    #[test]
    fn markdown_decodes_entities() {
        // `<div>` as text stays text: escaped so Markdown does not read it as HTML.
        assert_eq!(
            md(ENTITIES_HTML),
            "Fish & chips © 2024 < 3 > 2 \"q\" — \\<div>"
        );
    }

    #[test]
    fn markdown_collapses_blank_lines() {
        assert_eq!(md(BLANK_LINES_HTML), "one\n\ntwo\n\nthree\n\nfour");
        assert_eq!(md("\n\n  <p>  x  </p>\n\n"), "x");
    }

    #[test]
    fn text_headings_and_blocks() {
        assert_eq!(
            to_text(HEADINGS_HTML),
            "One\n\nTwo\n\nThree\n\nFour\n\nFive\n\nSix"
        );
        assert_eq!(
            to_text("<h2>4. Four</h2><p>a*b_c [d] \\e</p>"),
            "4. Four\n\na*b_c [d] \\e"
        );
    }

    #[test]
    fn text_links_images_emphasis() {
        assert_eq!(to_text(LINKS_HTML), "See the API, usage and this.");
        assert_eq!(to_text(IMAGES_HTML), "");
        assert_eq!(to_text(EMPHASIS_HTML), "one two three four five");
    }

    #[test]
    fn text_lists() {
        assert_eq!(to_text(LISTS_HTML), "A\nA1\nA2\nx\ny\nB\n\nthree\nfour");
    }

    #[test]
    fn text_table() {
        assert_eq!(to_text(TABLE_HTML), "Name\tValue\na|b\t1\nlong name");
    }

    #[test]
    fn text_code() {
        let html = "<p>Run <code>ls \\d *.rs</code>:</p><pre><code class=\"language-rust\">\
                    fn main() {\n    println!(\"&lt;hi&gt; \\\\ *x*\");\n}\n</code></pre>\
                    <pre>~/envs\n`tick`</pre>";
        assert_eq!(
            to_text(html),
            "Run ls \\d *.rs:\n\nfn main() {\n    println!(\"<hi> \\\\ *x*\");\n}\n\n~/envs\n`tick`"
        );
    }

    #[test]
    fn text_drops_scripts_styles_comments_and_chrome() {
        assert_eq!(to_text(CHROME_HTML), "Title\n\nBody.\n\nArticle footer");
        assert_eq!(to_text(SPHINX_CHROME_HTML), "Page\n\nText.");
    }

    #[test]
    fn text_decodes_entities() {
        assert_eq!(
            to_text(ENTITIES_HTML),
            "Fish & chips © 2024 < 3 > 2 \"q\" — <div>"
        );
    }

    #[test]
    fn text_collapses_blank_lines() {
        assert_eq!(to_text(BLANK_LINES_HTML), "one\n\ntwo\n\nthree\n\nfour");
    }

    /// The HTML documentation of Debian's python3.11-doc package: real Sphinx
    /// pages. Required: a test that cannot find them fails rather than passes.
    fn python_docs() -> PathBuf {
        let root = Path::new("/usr/share/doc/python3.11/html");
        assert!(
            root.join("library/functions.html").is_file(),
            "{} is missing: these tests convert the Python 3.11 HTML docs; \
             install them with `apt-get install python3.11-doc` (scripts/test does)",
            root.display()
        );
        root.to_path_buf()
    }

    fn python_page(page: &str) -> (String, String, String) {
        let path = python_docs().join(page);
        let html = std::fs::read_to_string(&path).unwrap();
        let base = Url::from_file_path(&path).unwrap();
        (to_markdown(&html, Some(&base)), to_text(&html), html)
    }

    fn assert_no_chrome(out: &str) {
        for chrome in [
            "Table of Contents",
            "Previous topic",
            "Show Source",
            "Report a Bug",
            "Quick search",
            "Navigation",
            "¶",
            "© Copyright",
            "Last updated on",
            "jQuery",
            "@media",
        ] {
            assert!(!out.contains(chrome), "{chrome:?} is chrome, in:\n{out}");
        }
    }

    #[test]
    fn python_docs_functions_page() {
        let (md, text, html) = python_page("library/functions.html");
        assert!(html.contains("sphinxsidebar") && html.contains("Table of Contents"));
        assert!(
            md.starts_with("# Built-in Functions\n\nThe Python interpreter has"),
            "{md}"
        );
        assert!(md.contains(
            "```python3\ndef all(iterable):\n    for element in iterable:\n        \
             if not element:\n            return False\n    return True\n```"
        ));
        // highlight-default: no language, prompts and all.
        assert!(md.contains("```\n>>> bin(3)\n'0b11'\n>>> bin(-10)\n'-0b1010'\n```"));
        assert!(md.contains("| Character | Meaning |\n| --- | --- |\n"));
        assert!(md.contains("| `'r'` | open for reading (default) |\n"));
        assert!(md.contains("| Built-in Functions | | | |\n| --- | --- | --- | --- |\n"));
        assert!(md.contains(
            "[`abs()`](file:///usr/share/doc/python3.11/html/library/functions.html#abs)"
        ));
        assert!(md.contains("*awaitable* anext(*async\\_iterator*)"));
        assert_no_chrome(&md);

        assert!(text.starts_with("Built-in Functions\n\nThe Python interpreter has"));
        assert!(text.contains("Character\tMeaning\n'r'\topen for reading (default)\n"));
        assert!(text.contains("def all(iterable):\n    for element in iterable:\n"));
        assert!(text.contains("awaitable anext(async_iterator)"));
        // Markdown's escapes undone: the signature as the page shows it.
        assert!(text.contains("\nbreakpoint(*args, **kws)\n"));
        assert!(md.contains("\nbreakpoint(*\\*args*, *\\*\\*kws*)\n"));
        assert!(!text.contains("```") && !text.contains("](file:"));
        assert_no_chrome(&text);
    }

    #[test]
    fn python_docs_controlflow_page() {
        let (md, text, _) = python_page("tutorial/controlflow.html");
        assert!(
            md.starts_with("# 4. More Control Flow Tools\n\nBesides the [`while`]"),
            "{md}"
        );
        assert!(md.contains("\n## 4.1. `if` Statements\n"));
        assert!(md.contains(
            "```python3\n>>> x = int(input(\"Please enter an integer: \"))\n\
             Please enter an integer: 42\n>>> if x < 0:\n...     x = 0\n"
        ));
        assert!(md.contains(
            "[`range()`](file:///usr/share/doc/python3.11/html/library/stdtypes.html#range)"
        ));
        assert_no_chrome(&md);

        assert!(text.starts_with("4. More Control Flow Tools\n\nBesides the while statement"));
        assert!(text.contains("\n4.1. if Statements\n"));
        assert!(text.contains(">>> x = int(input(\"Please enter an integer: \"))\n"));
        assert_no_chrome(&text);
    }
}
