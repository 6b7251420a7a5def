//! The dotenv syntax of `env-file` (SPEC §16): `KEY=value` lines, `#`
//! comments, an optional `export ` prefix, single quotes (literal) and double
//! quotes (with `\n`, `\t`, `\"`, `\\` escapes; both may span lines). No
//! variable interpolation: `$HOME` stays `$HOME` (decision D in docs).

use std::ops::Range;

/// A mistake inside an env file: where (bytes) and what.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct DotenvError {
    /// The offending bytes of the file text.
    pub(crate) span: Range<usize>,
    /// One sentence.
    pub(crate) message: String,
    /// Shown under the caret.
    pub(crate) label: &'static str,
    /// What to write instead.
    pub(crate) help: &'static str,
}

/// Every `KEY=value` pair of `text`, in file order (a later duplicate wins
/// when the caller collects them), or every bad line.
pub(crate) fn parse(text: &str) -> Result<Vec<(String, String)>, Vec<DotenvError>> {
    let mut out = Vec::new();
    let mut errors = Vec::new();
    let bytes = text.as_bytes();
    let mut pos = 0;
    while pos < bytes.len() {
        let line_end = find_from(bytes, pos, b'\n').unwrap_or(bytes.len());
        match entry(text, pos, line_end) {
            Ok((None, next)) => pos = next,
            Ok((Some(pair), next)) => {
                out.push(pair);
                pos = next;
            }
            Err((e, next)) => {
                errors.push(e);
                pos = next;
            }
        }
    }
    if errors.is_empty() {
        Ok(out)
    } else {
        Err(errors)
    }
}

fn find_from(bytes: &[u8], from: usize, b: u8) -> Option<usize> {
    bytes[from..].iter().position(|&c| c == b).map(|i| from + i)
}

type Entry = Result<(Option<(String, String)>, usize), (DotenvError, usize)>;

/// One logical entry starting at `start` (its physical line ends at
/// `line_end`); returns the pair (none for blank and comment lines) and
/// where the next entry starts.
fn entry(text: &str, start: usize, line_end: usize) -> Entry {
    let bytes = text.as_bytes();
    let after_line = if line_end < bytes.len() {
        line_end + 1
    } else {
        line_end
    };
    let mut i = skip_ws(bytes, start, line_end);
    if i == line_end || bytes[i] == b'#' || (bytes[i] == b'\r' && i + 1 == line_end) {
        return Ok((None, after_line));
    }
    let err = |span: Range<usize>, message: String, label, help| {
        Err((
            DotenvError {
                span,
                message,
                label,
                help,
            },
            after_line,
        ))
    };
    if text[i..line_end].starts_with("export ") || text[i..line_end].starts_with("export\t") {
        i = skip_ws(bytes, i + "export".len(), line_end);
    }
    let key_start = i;
    while i < line_end && (bytes[i].is_ascii_alphanumeric() || matches!(bytes[i], b'_' | b'.')) {
        i += 1;
    }
    let key = &text[key_start..i];
    let eq = skip_ws(bytes, i, line_end);
    if key.is_empty() || key.as_bytes()[0].is_ascii_digit() {
        let end = text[key_start..line_end]
            .find(['=', ' ', '\t'])
            .map_or(line_end, |n| key_start + n)
            .max(key_start + 1)
            .min(line_end.max(key_start + 1));
        return err(
            key_start..end.min(text.len()),
            format!(
                "invalid variable name {:?} in env file",
                text[key_start..end.min(line_end)].trim_end_matches('\r')
            ),
            "not a variable name",
            "a name is letters, digits, `_` and `.`, not starting with a digit: KEY=value",
        );
    }
    if eq >= line_end || bytes[eq] != b'=' {
        return err(
            key_start..line_end.max(key_start + 1).min(text.len()),
            format!("expected `{key}=value` in env file"),
            "no `=`",
            "write one variable per line: KEY=value (comments start with #)",
        );
    }
    let v = skip_ws(bytes, eq + 1, line_end);
    match bytes.get(v) {
        Some(&q @ (b'"' | b'\'')) if v < line_end => {
            let mut value = String::new();
            let mut j = v + 1;
            let mut closed = None;
            while j < bytes.len() {
                let c = bytes[j];
                if c == q {
                    closed = Some(j);
                    break;
                }
                if q == b'"' && c == b'\\' && j + 1 < bytes.len() {
                    let (ch, n) = match bytes[j + 1] {
                        b'n' => ('\n', 2),
                        b't' => ('\t', 2),
                        b'r' => ('\r', 2),
                        b'"' => ('"', 2),
                        b'\\' => ('\\', 2),
                        b'$' => ('$', 2),
                        _ => ('\\', 1),
                    };
                    value.push(ch);
                    j += n;
                    continue;
                }
                // Copy one whole UTF-8 character.
                let ch = text[j..].chars().next().unwrap_or('\u{fffd}');
                value.push(ch);
                j += ch.len_utf8();
            }
            let Some(close) = closed else {
                return Err((
                    DotenvError {
                        span: v..v + 1,
                        message: format!("unterminated quoted value for `{key}` in env file"),
                        label: "quote opened here",
                        help: "close the value with the same quote it opens with",
                    },
                    bytes.len(),
                ));
            };
            // After the closing quote: only blanks or a comment.
            let close_line_end = find_from(bytes, close, b'\n').unwrap_or(bytes.len());
            let rest = skip_ws(bytes, close + 1, close_line_end);
            let next = if close_line_end < bytes.len() {
                close_line_end + 1
            } else {
                close_line_end
            };
            if rest < close_line_end && bytes[rest] != b'#' && bytes[rest] != b'\r' {
                return Err((
                    DotenvError {
                        span: rest..close_line_end,
                        message: format!("unexpected text after the quoted value of `{key}`"),
                        label: "after the closing quote",
                        help: "put the whole value inside the quotes",
                    },
                    next,
                ));
            }
            if value.contains('\0') {
                return err(
                    v..close + 1,
                    format!("the value of `{key}` contains a NUL character"),
                    "NUL",
                    "processes cannot receive NUL in their environment",
                );
            }
            Ok((Some((key.to_owned(), value)), next))
        }
        _ => {
            let raw = &text[v.min(line_end)..line_end];
            // An inline comment needs a blank before `#` (`a#b` is a value).
            let cut = raw
                .char_indices()
                .find(|&(n, c)| c == '#' && n > 0 && raw[..n].ends_with([' ', '\t']))
                .map_or(raw.len(), |(n, _)| n);
            let value = raw[..cut].trim_end_matches([' ', '\t', '\r']);
            if value.contains('\0') {
                return err(
                    v..line_end,
                    format!("the value of `{key}` contains a NUL character"),
                    "NUL",
                    "processes cannot receive NUL in their environment",
                );
            }
            Ok((Some((key.to_owned(), value.to_owned())), after_line))
        }
    }
}

fn skip_ws(bytes: &[u8], mut i: usize, end: usize) -> usize {
    while i < end && matches!(bytes[i], b' ' | b'\t') {
        i += 1;
    }
    i
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok(text: &str) -> Vec<(String, String)> {
        parse(text).expect("valid")
    }

    fn pairs(p: &[(&str, &str)]) -> Vec<(String, String)> {
        p.iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn plain_comments_export_and_blanks() {
        let text = "# top\n\nA=1\nexport B = two words  # note\n  C=\nD=a#b\r\n";
        assert_eq!(
            ok(text),
            pairs(&[("A", "1"), ("B", "two words"), ("C", ""), ("D", "a#b")])
        );
    }

    #[test]
    fn quotes() {
        let text = "S='lit $X \\n'\nD=\"a\\nb \\\"q\\\" # not\" # c\nM=\"line1\nline2\"\nE=''\n";
        assert_eq!(
            ok(text),
            pairs(&[
                ("S", "lit $X \\n"),
                ("D", "a\nb \"q\" # not"),
                ("M", "line1\nline2"),
                ("E", ""),
            ])
        );
    }

    #[test]
    fn errors_point_at_the_line() {
        let text = "A=1\nthis is wrong\n9X=2\nQ=\"open\n";
        let errs = parse(text).unwrap_err();
        assert_eq!(errs.len(), 3);
        assert_eq!(&text[errs[0].span.clone()], "this is wrong");
        assert!(errs[0].message.contains("expected `this=value`"));
        assert_eq!(errs[1].span.start, text.find("9X").unwrap());
        assert!(errs[2].message.contains("unterminated"), "{errs:?}");
    }

    #[test]
    fn text_after_closing_quote() {
        let errs = parse("A=\"x\" y\n").unwrap_err();
        assert_eq!(errs[0].span, 6..7);
    }
}
