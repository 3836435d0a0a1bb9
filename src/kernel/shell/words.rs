//! Words: their values after quote removal, or their source text when only
//! the run knows them, and the commands their substitutions run.

use super::walk::{deeper, Walk, Walker};
use brush_parser::word::{self, Parameter, ParameterExpr, WordPiece, WordPieceWithSource};

/// A word as the command will see it: `text` is the value after quote
/// removal, or the source text when `dynamic`.
#[derive(Debug, Clone)]
pub(super) struct Arg {
    pub text: String,
    pub dynamic: bool,
}

impl Walker {
    /// A word's value (or source text), listing the commands in it.
    pub(super) fn word(&mut self, raw: &str, depth: usize) -> Walk<Arg> {
        let depth = deeper(depth)?;
        let pieces = match word::parse(raw, &self.options) {
            Ok(pieces) => pieces,
            // Without `$` or a backquote the word can hold no command: keep
            // it as written. Otherwise it might, and it cannot be checked.
            Err(_) if !raw.contains(['$', '`']) => {
                return Ok(Arg {
                    text: raw.to_owned(),
                    dynamic: true,
                })
            }
            Err(e) => return Err(format!("cannot parse the word `{}`: {e}", snippet(raw))),
        };
        let mut value = String::new();
        let dynamic = self.pieces(&pieces, Quoting::None, &mut value, depth)?;
        Ok(Arg {
            text: if dynamic { raw.to_owned() } else { value },
            dynamic,
        })
    }

    /// Lists the commands in text that is expanded but never a command
    /// word: assignment values, patterns, arithmetic, `${...}` operands.
    pub(super) fn scan(&mut self, text: &str, depth: usize) -> Walk {
        if text.contains(['$', '`']) {
            self.word(text, depth)?;
        }
        Ok(())
    }

    /// Appends the static value of `pieces` to `value`; true if some piece
    /// is only known at run time.
    pub(super) fn pieces(
        &mut self,
        pieces: &[WordPieceWithSource],
        quoting: Quoting,
        value: &mut String,
        depth: usize,
    ) -> Walk<bool> {
        let mut dynamic = false;
        for piece in pieces {
            match &piece.piece {
                WordPiece::Text(text) => {
                    dynamic |= quoting == Quoting::None && is_pattern(text);
                    value.push_str(text);
                }
                WordPiece::SingleQuotedText(text) => value.push_str(text),
                WordPiece::AnsiCQuotedText(body) => match ansi_c(body) {
                    Some(text) => value.push_str(&text),
                    None => dynamic = true,
                },
                WordPiece::DoubleQuotedSequence(inner) => {
                    dynamic |= self.pieces(inner, Quoting::Double, value, depth)?;
                }
                // `$"..."` is translated at run time.
                WordPiece::GettextDoubleQuotedSequence(inner) => {
                    self.pieces(inner, Quoting::Double, value, depth)?;
                    dynamic = true;
                }
                WordPiece::TildeExpansion(_) => dynamic = true,
                WordPiece::ParameterExpansion(expr) => {
                    self.parameter(expr, depth)?;
                    dynamic = true;
                }
                WordPiece::CommandSubstitution(script)
                | WordPiece::BackquotedCommandSubstitution(script) => {
                    self.script(script, depth)?;
                    dynamic = true;
                }
                WordPiece::EscapeSequence(escape) => unescape(escape, quoting, value),
                WordPiece::ArithmeticExpression(expr) => {
                    self.scan(&expr.value, depth)?;
                    dynamic = true;
                }
            }
        }
        Ok(dynamic)
    }

    /// Lists the commands in the operands of `${...}`.
    fn parameter(&mut self, expr: &ParameterExpr, depth: usize) -> Walk {
        use ParameterExpr as P;
        let mut texts: Vec<&str> = Vec::new();
        let parameter = match expr {
            P::Parameter { parameter, .. }
            | P::ParameterLength { parameter, .. }
            | P::Transform { parameter, .. } => parameter,
            P::UseDefaultValues {
                parameter,
                default_value: text,
                ..
            }
            | P::AssignDefaultValues {
                parameter,
                default_value: text,
                ..
            }
            | P::IndicateErrorIfNullOrUnset {
                parameter,
                error_message: text,
                ..
            }
            | P::UseAlternativeValue {
                parameter,
                alternative_value: text,
                ..
            }
            | P::RemoveSmallestSuffixPattern {
                parameter,
                pattern: text,
                ..
            }
            | P::RemoveLargestSuffixPattern {
                parameter,
                pattern: text,
                ..
            }
            | P::RemoveSmallestPrefixPattern {
                parameter,
                pattern: text,
                ..
            }
            | P::RemoveLargestPrefixPattern {
                parameter,
                pattern: text,
                ..
            }
            | P::UppercaseFirstChar {
                parameter,
                pattern: text,
                ..
            }
            | P::UppercasePattern {
                parameter,
                pattern: text,
                ..
            }
            | P::LowercaseFirstChar {
                parameter,
                pattern: text,
                ..
            }
            | P::LowercasePattern {
                parameter,
                pattern: text,
                ..
            } => {
                texts.extend(text.as_deref());
                parameter
            }
            P::Substring {
                parameter,
                offset,
                length,
                ..
            } => {
                texts.push(&offset.value);
                texts.extend(length.as_ref().map(|l| l.value.as_str()));
                parameter
            }
            P::ReplaceSubstring {
                parameter,
                pattern,
                replacement,
                ..
            } => {
                texts.push(pattern);
                texts.extend(replacement.as_deref());
                parameter
            }
            P::VariableNames { .. } | P::MemberKeys { .. } => return Ok(()),
        };
        if let Parameter::NamedWithIndex { index, .. } = parameter {
            texts.push(index);
        }
        for text in texts {
            self.scan(text, depth)?;
        }
        Ok(())
    }
}

/// `args` as one word, joined by spaces (how `eval`, `watch` and `ssh` make
/// a script of their arguments).
pub(super) fn joined(args: &[Arg]) -> Arg {
    Arg {
        text: args
            .iter()
            .map(|a| a.text.as_str())
            .collect::<Vec<_>>()
            .join(" "),
        dynamic: args.iter().any(|a| a.dynamic),
    }
}

/// The source text a span covers (its positions count characters).
pub(super) fn chars(src: &str, span: &brush_parser::SourceSpan) -> String {
    let (start, end) = (span.start.index, span.end.index);
    src.chars()
        .skip(start)
        .take(end.saturating_sub(start))
        .collect()
}

/// Unquoted text that the shell would expand as a pattern: globs,
/// extglobs and brace expansions.
fn is_pattern(text: &str) -> bool {
    text.contains(['*', '?'])
        || text.find('[').is_some_and(|i| text[i + 1..].contains(']'))
        || ["+(", "@(", "!("].iter().any(|p| text.contains(p))
        || (text.contains('{') && text.contains('}') && (text.contains(',') || text.contains("..")))
}

/// Where a piece of a word sits, for quote removal.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Quoting {
    None,
    /// Inside `"..."`.
    Double,
    /// The body of an unquoted here-document, where `"` is not special.
    HereDocument,
}

/// Quote removal for a backslash escape (`\x`): outside quotes it yields
/// `x`; inside double quotes (and here-documents) only `$`, backquote, `\`
/// and newline are escaped (and `"`, inside double quotes).
fn unescape(escape: &str, quoting: Quoting, value: &mut String) {
    let escaped = escape.strip_prefix('\\').unwrap_or(escape);
    match (escaped, quoting) {
        ("\n", _) => {}
        ("$" | "`" | "\\", _) | ("\"", Quoting::Double) | (_, Quoting::None) => {
            value.push_str(escaped)
        }
        _ => value.push_str(escape),
    }
}

/// The value of `$'...'` (bash's ANSI-C quoting), or `None` where it is
/// not a plain string (a NUL, a raw byte, `\c`), which leaves the word
/// dynamic.
fn ansi_c(body: &str) -> Option<String> {
    let mut value = String::new();
    let mut chars = body.chars().peekable();
    while let Some(c) = chars.next() {
        if c != '\\' {
            value.push(c);
            continue;
        }
        let escape = chars.next()?;
        let code = match escape {
            'a' => 0x07,
            'b' => 0x08,
            'e' | 'E' => 0x1b,
            'f' => 0x0c,
            'n' => 0x0a,
            'r' => 0x0d,
            't' => 0x09,
            'v' => 0x0b,
            '\\' | '\'' | '"' | '?' => u32::from(escape),
            '0'..='7' => {
                let mut code = escape.to_digit(8)?;
                for _ in 0..2 {
                    match chars.peek().and_then(|c| c.to_digit(8)) {
                        Some(d) => {
                            code = code * 8 + d;
                            chars.next();
                        }
                        None => break,
                    }
                }
                // Values from 0x80 up are raw bytes, not characters.
                if code >= 0x80 {
                    return None;
                }
                code
            }
            'x' | 'u' | 'U' => {
                let max = match escape {
                    'x' => 2,
                    'u' => 4,
                    _ => 8,
                };
                let mut code = 0u32;
                let mut digits = 0;
                while digits < max {
                    match chars.peek().and_then(|c| c.to_digit(16)) {
                        Some(d) => {
                            code = code.checked_mul(16)?.checked_add(d)?;
                            chars.next();
                            digits += 1;
                        }
                        None => break,
                    }
                }
                if digits == 0 || (escape == 'x' && code >= 0x80) {
                    return None;
                }
                code
            }
            'c' => return None,
            // bash keeps unknown escapes as written.
            other => {
                value.push('\\');
                value.push(other);
                continue;
            }
        };
        // The shell's strings end at a NUL.
        if code == 0 {
            return None;
        }
        value.push(char::from_u32(code)?);
    }
    Some(value)
}

pub(super) fn snippet(text: &str) -> String {
    const MAX: usize = 60;
    match text.char_indices().nth(MAX) {
        Some((i, _)) => format!("{}...", &text[..i]),
        None => text.to_owned(),
    }
}

/// A word as a shell would need it quoted to stay one word.
pub fn quote(word: &str) -> String {
    let plain = !word.is_empty()
        && word
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_./=:@%+,".contains(&b));
    if plain {
        word.to_string()
    } else {
        format!("'{}'", word.replace('\'', r"'\''"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ansi_c_decoding() {
        assert_eq!(
            ansi_c(r"a\tb\x41\u00e9\101\\\'").as_deref(),
            Some("a\tbAé".to_owned() + "A\\'").as_deref()
        );
        assert_eq!(ansi_c(r"\q").as_deref(), Some(r"\q"));
        assert_eq!(ansi_c(r"\xff"), None);
        assert_eq!(ansi_c(r"\cA"), None);
        assert_eq!(ansi_c(r"\0"), None);
    }
}
