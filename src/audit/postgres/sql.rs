//! The portable dialect's parameters in PostgreSQL's spelling: `?N`
//! becomes `$N`, outside string literals, quoted names and comments, where
//! a `?` is text.

use crate::audit::db::{Error, Result};

/// `sql` with each `?N` written `$N`. A `?` without a number is refused:
/// the dialect numbers every parameter, and PostgreSQL has no bare `?`.
pub fn numbered(sql: &str) -> Result<String> {
    let bytes = sql.as_bytes();
    let mut out = String::with_capacity(sql.len() + 8);
    let mut copied = 0;
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'\'' | b'"' => i = closing(bytes, i + 1, bytes[i]),
            b'-' if bytes.get(i + 1) == Some(&b'-') => i = line_end(bytes, i),
            b'/' if bytes.get(i + 1) == Some(&b'*') => i = comment_end(bytes, i + 2),
            b'?' => {
                let digits = bytes[i + 1..]
                    .iter()
                    .take_while(|b| b.is_ascii_digit())
                    .count();
                if digits == 0 {
                    return Err(Error::other(format!(
                        "the query has a `?` without a number at byte {i}: number every parameter \
                         (?1, ?2...): {}",
                        head(sql)
                    )));
                }
                out.push_str(&sql[copied..i]);
                out.push('$');
                copied = i + 1;
                i += 1 + digits;
            }
            _ => i += 1,
        }
    }
    out.push_str(&sql[copied..]);
    Ok(out)
}

/// `sql`, an `INSERT ... VALUES (TUPLE) [SUFFIX]` of `per_row`
/// parameters (`?1`..), as one statement inserting `rows` rows: the tuple
/// repeated, each copy's parameters numbered after the one before it.
/// `None` for any other statement, or one whose suffix updates on a
/// conflict (PostgreSQL refuses to update one row twice in a statement).
pub fn multi_row(sql: &str, rows: usize, per_row: usize) -> Option<String> {
    let upper = sql.to_ascii_uppercase();
    if !upper.trim_start().starts_with("INSERT") || upper.contains("DO UPDATE") {
        return None;
    }
    let values = upper.find(" VALUES")? + " VALUES".len();
    let open = values + sql[values..].find('(')?;
    let close = tuple_end(sql.as_bytes(), open)?;
    let tuple = &sql[open..close];
    let mut out = String::with_capacity(sql.len() + rows * tuple.len());
    out.push_str(&sql[..open]);
    for k in 0..rows {
        if k > 0 {
            out.push_str(", ");
        }
        out.push_str(&shifted(tuple, k * per_row)?);
    }
    out.push_str(&sql[close..]);
    Some(out)
}

/// The index after the parenthesis closing the one at `open`, outside
/// string literals.
fn tuple_end(bytes: &[u8], open: usize) -> Option<usize> {
    let (mut depth, mut i) = (0usize, open);
    while i < bytes.len() {
        match bytes[i] {
            b'\'' | b'"' => {
                i = closing(bytes, i + 1, bytes[i]);
                continue;
            }
            b'(' => depth += 1,
            b')' => {
                depth -= 1;
                if depth == 0 {
                    return Some(i + 1);
                }
            }
            _ => {}
        }
        i += 1;
    }
    None
}

/// `tuple` with each `?N` written `?(N + by)`; `None` when it holds text
/// or a comment, where a `?` would not be a parameter.
fn shifted(tuple: &str, by: usize) -> Option<String> {
    if tuple.contains(['\'', '"', '-', '/']) {
        return None;
    }
    let mut out = String::with_capacity(tuple.len() + 8);
    let mut rest = tuple;
    while let Some(at) = rest.find('?') {
        out.push_str(&rest[..=at]);
        let digits = rest[at + 1..]
            .bytes()
            .take_while(u8::is_ascii_digit)
            .count();
        let n: usize = rest[at + 1..at + 1 + digits].parse().ok()?;
        out.push_str(&(n + by).to_string());
        rest = &rest[at + 1 + digits..];
    }
    out.push_str(rest);
    Some(out)
}

/// The index after the quote closing one opened before `from`. A doubled
/// quote (`''`) is a quote inside: it closes and opens again, the same.
fn closing(bytes: &[u8], from: usize, quote: u8) -> usize {
    bytes[from..]
        .iter()
        .position(|&b| b == quote)
        .map_or(bytes.len(), |p| from + p + 1)
}

fn line_end(bytes: &[u8], from: usize) -> usize {
    bytes[from..]
        .iter()
        .position(|&b| b == b'\n')
        .map_or(bytes.len(), |p| from + p + 1)
}

fn comment_end(bytes: &[u8], from: usize) -> usize {
    bytes[from..]
        .windows(2)
        .position(|w| w == b"*/")
        .map_or(bytes.len(), |p| from + p + 2)
}

/// The query's start, for an error that names it.
pub fn head(sql: &str) -> String {
    let flat: String = sql.split_whitespace().collect::<Vec<_>>().join(" ");
    match flat.char_indices().nth(80) {
        Some((at, _)) => format!("{}...", &flat[..at]),
        None => flat,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_numbered_parameter_is_renumbered_repeated_or_out_of_order() {
        assert_eq!(
            numbered("SELECT a FROM t WHERE b = ?2 AND c = ?1 OR d = ?2 LIMIT ?10").unwrap(),
            "SELECT a FROM t WHERE b = $2 AND c = $1 OR d = $2 LIMIT $10"
        );
        assert_eq!(numbered("?1").unwrap(), "$1");
    }

    #[test]
    fn an_insert_is_repeated_as_rows_with_each_copy_numbered_after_the_last() {
        let sql = "INSERT INTO t (a, b, c) VALUES (?1, lower(?2), 0) ON CONFLICT (a) DO NOTHING";
        assert_eq!(
            multi_row(sql, 3, 2).unwrap(),
            "INSERT INTO t (a, b, c) VALUES (?1, lower(?2), 0), (?3, lower(?4), 0), \
             (?5, lower(?6), 0) ON CONFLICT (a) DO NOTHING"
        );
        assert_eq!(
            multi_row("INSERT INTO t (a) VALUES (?1)", 1, 1).unwrap(),
            "INSERT INTO t (a) VALUES (?1)"
        );
        // What cannot be repeated so is left to one statement per row.
        assert_eq!(multi_row("UPDATE t SET a = ?1", 2, 1), None);
        assert_eq!(
            multi_row(
                "INSERT INTO t (a) VALUES (?1) ON CONFLICT (a) DO UPDATE SET a = ?1",
                2,
                1
            ),
            None
        );
        assert_eq!(multi_row("INSERT INTO t (a) VALUES ('?1')", 2, 0), None);
    }

    #[test]
    fn a_question_mark_in_text_or_a_comment_is_left_alone() {
        let sql = "SELECT 'a?1 ''?2''' AS \"q?3\", x -- ?4\n FROM t /* ?5 */ WHERE y = ?6";
        assert_eq!(
            numbered(sql).unwrap(),
            "SELECT 'a?1 ''?2''' AS \"q?3\", x -- ?4\n FROM t /* ?5 */ WHERE y = $6"
        );
    }

    #[test]
    fn a_bare_question_mark_is_refused_naming_where() {
        let e = numbered("SELECT a FROM t WHERE b = ?").unwrap_err();
        assert!(e.message.contains("at byte 26"), "{e}");
        assert!(e.message.contains("SELECT a FROM t"), "{e}");
    }
}
