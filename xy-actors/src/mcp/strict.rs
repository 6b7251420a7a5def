//! The one strict reader of a JSON-RPC message (SPEC §24, D160): what xy
//! forwards is only what it read itself, to the value every conforming
//! reader gets from the same bytes. [`check`] refuses what some SDK
//! parsers accept and others read differently — `NaN`/`Infinity`, a lone
//! surrogate escape, a duplicate key, a byte order mark, bytes that are not
//! UTF-8, a number past `f64`, trailing bytes — so the firewall's verdict
//! and the child's reading can never differ. It builds nothing: it scans
//! once and notes where the routing fields are (the top level's `id` and
//! `method`, `params.name`). [`glimpse`] is its lenient twin, for what xy
//! needs of a message it refused: the id of the request an unreadable
//! answer was meant for, the tool of a refused call.

use std::borrow::Cow;
use std::fmt;
use std::ops::Range;

use serde_json::Value;

/// How deep arrays and objects may nest: `serde_json`'s own limit, so no
/// message passes the check that the `Value` path then refuses.
const MAX_DEPTH: usize = 127;

/// Objects with more keys than this find duplicates through a hash set.
const LINEAR_KEYS: usize = 16;

/// Why a message cannot be read exactly.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Why {
    Empty,
    ByteOrderMark,
    NotUtf8,
    /// `NaN`, `Infinity` or `-Infinity`.
    NotANumber,
    /// A `\uD800`–`\uDFFF` escape without its pair.
    LoneSurrogate,
    /// The key, as decoded (bounded).
    DuplicateKey(String),
    NumberOutOfRange,
    ControlCharacter,
    TooDeep,
    TrailingBytes,
    /// Anything else that is not JSON (what was expected).
    Syntax(&'static str),
}

/// A message xy refused, where and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Unreadable {
    pub(crate) why: Why,
    /// 1-based line and column (in bytes) of the offending byte.
    pub(crate) line: usize,
    pub(crate) column: usize,
}

impl fmt::Display for Unreadable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.why {
            Why::Empty => f.write_str("an empty message")?,
            Why::ByteOrderMark => f.write_str("a byte order mark")?,
            Why::NotUtf8 => f.write_str("bytes that are not UTF-8")?,
            Why::NotANumber => f.write_str("NaN or Infinity, which JSON does not have")?,
            Why::LoneSurrogate => f.write_str("a lone surrogate escape (\\uD800-\\uDFFF)")?,
            Why::DuplicateKey(k) => write!(f, "the key {k:?} twice in one object")?,
            Why::NumberOutOfRange => f.write_str("a number out of range")?,
            Why::ControlCharacter => f.write_str("a control character inside a string")?,
            Why::TooDeep => write!(f, "nesting deeper than {MAX_DEPTH}")?,
            Why::TrailingBytes => f.write_str("bytes after the message")?,
            Why::Syntax(want) => write!(f, "invalid JSON (expected {want})")?,
        }
        write!(f, " at line {}, column {}", self.line, self.column)
    }
}

/// Where a message's routing fields are, as byte ranges of the message
/// (each a JSON value: the `method` and `name` ranges are quoted strings).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Fields {
    pub(crate) id: Option<Range<usize>>,
    pub(crate) method: Option<Range<usize>>,
    pub(crate) name: Option<Range<usize>>,
}

impl Fields {
    /// The `method`, when it is a string without escapes.
    pub(crate) fn method<'a>(&self, bytes: &'a [u8]) -> Option<&'a str> {
        plain_str(bytes, self.method.as_ref()?)
    }

    /// A whole-number `id`.
    pub(crate) fn number_id(&self, bytes: &[u8]) -> Option<u64> {
        std::str::from_utf8(bytes.get(self.id.clone()?)?)
            .ok()?
            .parse()
            .ok()
    }

    /// The `id` as a value (`None` when absent or not a string or number).
    pub(crate) fn id_value(&self, bytes: &[u8]) -> Option<Value> {
        let raw = bytes.get(self.id.clone()?)?;
        match serde_json::from_slice::<Value>(raw) {
            Ok(v @ (Value::String(_) | Value::Number(_))) => Some(v),
            _ => None,
        }
    }

    /// `params.name`, decoded leniently (a lone surrogate becomes U+FFFD).
    pub(crate) fn name(&self, bytes: &[u8]) -> Option<String> {
        lenient_str(bytes, self.name.as_ref()?)
    }
}

/// A string value at `at`, decoded leniently.
fn lenient_str(bytes: &[u8], at: &Range<usize>) -> Option<String> {
    let raw = bytes.get(at.clone())?;
    if raw.first() != Some(&b'"') {
        return None;
    }
    let inner = raw.get(1..raw.len().checked_sub(1)?)?;
    Some(decode(inner, true).ok()?.into_owned())
}

/// A string value at `at` that needs no decoding.
fn plain_str<'a>(bytes: &'a [u8], at: &Range<usize>) -> Option<&'a str> {
    let raw = bytes.get(at.clone())?;
    let inner = raw.get(1..raw.len().checked_sub(1)?)?;
    if inner.contains(&b'\\') {
        return None;
    }
    std::str::from_utf8(inner).ok()
}

/// Reads `bytes` as exactly one JSON value the strict way (see the module
/// docs); on success, where its routing fields are.
pub(crate) fn check(bytes: &[u8]) -> Result<Fields, Unreadable> {
    if bytes.starts_with(b"\xEF\xBB\xBF") {
        return Err(located(bytes, 0, Why::ByteOrderMark));
    }
    if let Err(e) = std::str::from_utf8(bytes) {
        return Err(located(bytes, e.valid_up_to(), Why::NotUtf8));
    }
    let mut s = Scan {
        b: bytes,
        i: 0,
        lax: false,
        fields: Fields::default(),
    };
    s.document().map_err(|(at, why)| located(bytes, at, why))?;
    Ok(s.fields)
}

/// [`check`], then the value itself (what the firewall decides on).
pub(crate) fn read(bytes: &[u8]) -> Result<(Value, Fields), Unreadable> {
    let fields = check(bytes)?;
    match serde_json::from_slice::<Value>(bytes) {
        Ok(v) => Ok((v, fields)),
        // Cannot happen for a checked message; refused if it ever does.
        Err(e) => Err(Unreadable {
            why: Why::Syntax("what serde_json reads"),
            line: e.line(),
            column: e.column(),
        }),
    }
}

/// What can be made out of a message [`check`] refused (or of the first
/// part of one too long to read): its routing fields as far as a lenient
/// scan gets, past `NaN`, lone surrogates, duplicate keys and bad bytes.
pub(crate) fn glimpse(bytes: &[u8]) -> Fields {
    let start = if bytes.starts_with(b"\xEF\xBB\xBF") {
        3
    } else {
        0
    };
    let mut s = Scan {
        b: bytes,
        i: start,
        lax: true,
        fields: Fields::default(),
    };
    let _ = s.document();
    s.fields
}

/// The tool to record for a request refused unread (SPEC §24: every
/// attempt is a call record): its `params.name`, or `(unreadable)`, when
/// it is or may be a `tools/call`; `None` for any other method.
pub(crate) fn refused_call(bytes: &[u8]) -> Option<String> {
    let f = glimpse(bytes);
    let method = f.method.as_ref().and_then(|m| lenient_str(bytes, m));
    if method.is_some_and(|m| m != "tools/call") {
        return None;
    }
    Some(f.name(bytes).unwrap_or_else(|| "(unreadable)".to_owned()))
}

/// A whole-number top-level `id` at the very end of a message's last
/// bytes (`…,"id":42}`), where encoders that write `result` first put it:
/// how the request an over-long answer was meant for is found without
/// holding the answer.
pub(crate) fn trailing_id(tail: &[u8]) -> Option<u64> {
    let t = tail.trim_ascii_end().strip_suffix(b"}")?.trim_ascii_end();
    let digits = t.len() - t.iter().rev().take_while(|b| b.is_ascii_digit()).count();
    let (rest, num) = t.split_at(digits);
    let rest = rest.trim_ascii_end().strip_suffix(b":")?.trim_ascii_end();
    let rest = rest.strip_suffix(b"\"id\"")?.trim_ascii_end();
    if !matches!(rest.last(), Some(b',' | b'{')) {
        return None;
    }
    std::str::from_utf8(num).ok()?.parse().ok()
}

fn located(bytes: &[u8], at: usize, why: Why) -> Unreadable {
    let before = &bytes[..at.min(bytes.len())];
    let line = 1 + memchr::memchr_iter(b'\n', before).count();
    let column = 1 + before.len() - memchr::memrchr(b'\n', before).map_or(0, |n| n + 1);
    Unreadable { why, line, column }
}

/// Which of the routing fields a value is.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Place {
    /// The message itself.
    Top,
    /// The top level's `params`.
    Params,
    Other,
}

type Failed = (usize, Why);

struct Scan<'a> {
    b: &'a [u8],
    i: usize,
    /// [`glimpse`]'s mode: only the grammar's skeleton is checked.
    lax: bool,
    fields: Fields,
}

impl<'a> Scan<'a> {
    fn fail<T>(&self, why: Why) -> Result<T, Failed> {
        Err((self.i, why))
    }

    fn ws(&mut self) {
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.b.get(self.i) {
            self.i += 1;
        }
    }

    fn document(&mut self) -> Result<(), Failed> {
        self.ws();
        if self.i >= self.b.len() {
            return self.fail(Why::Empty);
        }
        self.value(0, Place::Top)?;
        self.ws();
        if self.i < self.b.len() {
            return self.fail(Why::TrailingBytes);
        }
        Ok(())
    }

    fn value(&mut self, depth: usize, place: Place) -> Result<(), Failed> {
        match self.b.get(self.i) {
            Some(b'{') => self.object(depth + 1, place),
            Some(b'[') => self.array(depth + 1),
            Some(b'"') => self.string(false).map(|_| ()),
            Some(b'-' | b'0'..=b'9') => self.number(),
            Some(b't') => self.literal(b"true"),
            Some(b'f') => self.literal(b"false"),
            Some(b'n') => self.literal(b"null"),
            Some(b'N') if self.lax => self.literal(b"NaN"),
            Some(b'I') if self.lax => self.literal(b"Infinity"),
            Some(b'N' | b'I') => self.fail(Why::NotANumber),
            None => self.fail(Why::Syntax("a value")),
            Some(_) => self.fail(Why::Syntax("a value")),
        }
    }

    fn literal(&mut self, word: &[u8]) -> Result<(), Failed> {
        if self.b[self.i..].starts_with(word) {
            self.i += word.len();
            Ok(())
        } else {
            self.fail(Why::Syntax("true, false or null"))
        }
    }

    fn object(&mut self, depth: usize, place: Place) -> Result<(), Failed> {
        if depth > MAX_DEPTH {
            return self.fail(Why::TooDeep);
        }
        self.i += 1;
        self.ws();
        if self.b.get(self.i) == Some(&b'}') {
            self.i += 1;
            return Ok(());
        }
        let mut keys = Keys::default();
        loop {
            if self.b.get(self.i) != Some(&b'"') {
                return self.fail(Why::Syntax("a key"));
            }
            let key_at = self.i;
            let key = self.string(true)?;
            if !self.lax && !keys.insert(key.clone()) {
                let shown: String = key.chars().take(64).collect();
                return Err((key_at, Why::DuplicateKey(shown)));
            }
            self.ws();
            if self.b.get(self.i) != Some(&b':') {
                return self.fail(Why::Syntax("':'"));
            }
            self.i += 1;
            self.ws();
            let start = self.i;
            let inner = match (place, key.as_ref()) {
                (Place::Top, "params") => Place::Params,
                _ => Place::Other,
            };
            self.value(depth, inner)?;
            let at = Some(start..self.i);
            match (place, key.as_ref()) {
                (Place::Top, "id") => self.fields.id = at,
                (Place::Top, "method") => self.fields.method = at,
                (Place::Params, "name") => self.fields.name = at,
                _ => {}
            }
            self.ws();
            match self.b.get(self.i) {
                Some(b',') => {
                    self.i += 1;
                    self.ws();
                }
                Some(b'}') => {
                    self.i += 1;
                    return Ok(());
                }
                _ => return self.fail(Why::Syntax("',' or '}'")),
            }
        }
    }

    fn array(&mut self, depth: usize) -> Result<(), Failed> {
        if depth > MAX_DEPTH {
            return self.fail(Why::TooDeep);
        }
        self.i += 1;
        self.ws();
        if self.b.get(self.i) == Some(&b']') {
            self.i += 1;
            return Ok(());
        }
        loop {
            self.value(depth, Place::Other)?;
            self.ws();
            match self.b.get(self.i) {
                Some(b',') => {
                    self.i += 1;
                    self.ws();
                }
                Some(b']') => {
                    self.i += 1;
                    return Ok(());
                }
                _ => return self.fail(Why::Syntax("',' or ']'")),
            }
        }
    }

    /// A string at `self.i` (its opening quote): its decoded text (kept
    /// borrowed when it has no escapes) when `want`, else empty; escapes
    /// are checked either way.
    fn string(&mut self, want: bool) -> Result<Cow<'a, str>, Failed> {
        let b: &'a [u8] = self.b;
        let start = self.i + 1;
        let mut i = start;
        let mut escaped = false;
        loop {
            let Some(off) = memchr::memchr2(b'"', b'\\', &b[i.min(b.len())..]) else {
                self.i = b.len();
                return self.fail(Why::Syntax("a closing '\"'"));
            };
            let at = i + off;
            // A plain run: only its control characters matter (a loop the
            // compiler vectorises).
            if !self.lax && b[i..at].iter().any(|&c| c < 0x20) {
                self.i = i + b[i..at].iter().position(|&c| c < 0x20).unwrap_or(0);
                return self.fail(Why::ControlCharacter);
            }
            if b[at] == b'"' {
                i = at;
                break;
            }
            escaped = true;
            i = at + 2;
        }
        self.i = i + 1;
        let inner = &b[start..i];
        if !escaped {
            return Ok(if want {
                String::from_utf8_lossy(inner)
            } else {
                Cow::Borrowed("")
            });
        }
        if !want {
            return escapes(inner, self.lax)
                .map(|()| Cow::Borrowed(""))
                .map_err(|(off, why)| (start + off, why));
        }
        decode(inner, self.lax).map_err(|(off, why)| (start + off, why))
    }

    fn number(&mut self) -> Result<(), Failed> {
        let start = self.i;
        let b = self.b;
        let mut i = self.i;
        if b.get(i) == Some(&b'-') {
            i += 1;
            if self.lax && b[i..].starts_with(b"Infinity") {
                self.i = i + 8;
                return Ok(());
            }
            if b.get(i) == Some(&b'I') {
                self.i = i;
                return self.fail(Why::NotANumber);
            }
        }
        let digits = |i: &mut usize| {
            let s = *i;
            while b.get(*i).is_some_and(u8::is_ascii_digit) {
                *i += 1;
            }
            *i - s
        };
        match b.get(i) {
            Some(b'0') => i += 1,
            Some(b'1'..=b'9') => {
                digits(&mut i);
            }
            _ => {
                self.i = i;
                return self.fail(Why::Syntax("a digit"));
            }
        }
        let mut float = i - start > 18;
        if b.get(i) == Some(&b'.') {
            i += 1;
            float = true;
            if digits(&mut i) == 0 {
                self.i = i;
                return self.fail(Why::Syntax("a digit"));
            }
        }
        if let Some(b'e' | b'E') = b.get(i) {
            i += 1;
            float = true;
            if let Some(b'+' | b'-') = b.get(i) {
                i += 1;
            }
            if digits(&mut i) == 0 {
                self.i = i;
                return self.fail(Why::Syntax("a digit"));
            }
        }
        self.i = i;
        if float && !self.lax {
            // serde_json refuses what overflows an f64; Python reads it
            // as infinity: neither passes.
            let text = std::str::from_utf8(&b[start..i]).unwrap_or("x");
            if !text.parse::<f64>().is_ok_and(f64::is_finite) {
                self.i = start;
                return self.fail(Why::NumberOutOfRange);
            }
        }
        Ok(())
    }
}

/// The keys of one object so far.
#[derive(Default)]
struct Keys<'a> {
    few: Vec<Cow<'a, str>>,
    many: Option<std::collections::HashSet<Cow<'a, str>>>,
}

impl<'a> Keys<'a> {
    /// `false` when `key` was there already.
    fn insert(&mut self, key: Cow<'a, str>) -> bool {
        if let Some(set) = &mut self.many {
            return set.insert(key);
        }
        if self.few.contains(&key) {
            return false;
        }
        if self.few.len() < LINEAR_KEYS {
            self.few.push(key);
        } else {
            let mut set: std::collections::HashSet<_> = self.few.drain(..).collect();
            set.insert(key);
            self.many = Some(set);
        }
        true
    }
}

/// The text of a string's inside (between its quotes). Strict: a lone
/// surrogate is refused; lax: it becomes U+FFFD, like any bad byte.
fn decode(inner: &[u8], lax: bool) -> Result<Cow<'_, str>, Failed> {
    if !inner.contains(&b'\\') {
        return Ok(String::from_utf8_lossy(inner));
    }
    let mut out = String::with_capacity(inner.len());
    let mut i = 0;
    let bad = |at: usize, why: Why| -> Result<Cow<'_, str>, Failed> { Err((at, why)) };
    while i < inner.len() {
        let Some(off) = memchr::memchr(b'\\', &inner[i..]) else {
            out.push_str(&String::from_utf8_lossy(&inner[i..]));
            break;
        };
        out.push_str(&String::from_utf8_lossy(&inner[i..i + off]));
        i += off;
        let Some(&e) = inner.get(i + 1) else {
            return bad(i, Why::Syntax("an escape"));
        };
        i += 2;
        let c = match e {
            b'"' => '"',
            b'\\' => '\\',
            b'/' => '/',
            b'b' => '\u{8}',
            b'f' => '\u{c}',
            b'n' => '\n',
            b'r' => '\r',
            b't' => '\t',
            b'u' => {
                let Some(hi) = hex4(inner, i) else {
                    return bad(i, Why::Syntax("four hex digits"));
                };
                i += 4;
                match hi {
                    0xD800..=0xDBFF => {
                        let lo = (inner.get(i..i + 2) == Some(b"\\u"))
                            .then(|| hex4(inner, i + 2))
                            .flatten()
                            .filter(|lo| (0xDC00..=0xDFFF).contains(lo));
                        match lo {
                            Some(lo) => {
                                i += 6;
                                let c = 0x10000 + ((hi - 0xD800) << 10) + (lo - 0xDC00);
                                char::from_u32(c).unwrap_or('\u{FFFD}')
                            }
                            None if lax => '\u{FFFD}',
                            None => return bad(i - 6, Why::LoneSurrogate),
                        }
                    }
                    0xDC00..=0xDFFF if lax => '\u{FFFD}',
                    0xDC00..=0xDFFF => return bad(i - 6, Why::LoneSurrogate),
                    c => char::from_u32(c).unwrap_or('\u{FFFD}'),
                }
            }
            _ if lax => '\u{FFFD}',
            _ => return bad(i - 2, Why::Syntax("an escape")),
        };
        out.push(c);
    }
    Ok(Cow::Owned(out))
}

/// [`decode`]'s checks without the text: every escape valid, every
/// surrogate paired (a string value xy does not read).
fn escapes(inner: &[u8], lax: bool) -> Result<(), Failed> {
    if lax {
        return Ok(());
    }
    let mut i = 0;
    while let Some(off) = memchr::memchr(b'\\', &inner[i..]) {
        i += off;
        match inner.get(i + 1) {
            Some(b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't') => i += 2,
            Some(b'u') => {
                let Some(hi) = hex4(inner, i + 2) else {
                    return Err((i + 2, Why::Syntax("four hex digits")));
                };
                match hi {
                    0xD800..=0xDBFF => {
                        let paired = inner.get(i + 6..i + 8) == Some(b"\\u")
                            && hex4(inner, i + 8).is_some_and(|lo| (0xDC00..=0xDFFF).contains(&lo));
                        if !paired {
                            return Err((i, Why::LoneSurrogate));
                        }
                        i += 12;
                    }
                    0xDC00..=0xDFFF => return Err((i, Why::LoneSurrogate)),
                    _ => i += 6,
                }
            }
            _ => return Err((i, Why::Syntax("an escape"))),
        }
    }
    Ok(())
}

fn hex4(b: &[u8], at: usize) -> Option<u32> {
    let h = b.get(at..at + 4)?;
    if !h.iter().all(u8::is_ascii_hexdigit) {
        return None;
    }
    u32::from_str_radix(std::str::from_utf8(h).ok()?, 16).ok()
}

#[cfg(test)]
mod tests;
