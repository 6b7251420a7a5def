//! The typed readers of the KDL walk: the per-file state [`Cx`] and what
//! every block uses to read a node — one value, a string, an integer, a
//! duration, a `{ }` block — each reporting its own mistake (wrong type,
//! extra values, properties, duplicates, unknown names with a
//! did-you-mean) as a diagnostic at the offending span.

use std::ops::Range;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use kdl::{KdlEntry, KdlNode, KdlValue};
use miette::SourceSpan;

use crate::config::diagnostic::ConfigDiagnostic;
use crate::protocol::DiagnosticKind;

/// One diagnostic per mistake the KDL parser found.
pub(super) fn syntax_errors(cx: &mut Cx<'_>, err: kdl::KdlError) {
    for d in err.diagnostics {
        let message = d
            .message
            .clone()
            .or_else(|| d.label.clone())
            .unwrap_or_else(|| "invalid KDL".to_owned());
        let mut diag = cx
            .diag(
                DiagnosticKind::Syntax,
                d.span,
                format!("invalid KDL: {message}"),
            )
            .with_help(d.help.unwrap_or_else(|| {
                "see https://kdl.dev for the syntax (v2; v1 also accepted)".to_owned()
            }));
        if let Some(label) = d.label {
            diag = diag.with_label(label);
        }
        cx.diags.push(diag);
    }
}

/// The closest of `candidates` to `name` when close enough to be a typo:
/// `working_dir` → `working-dir`, `comand` → `command`.
pub(super) fn suggest(name: &str, candidates: &[&'static str]) -> Option<&'static str> {
    let norm = name.to_ascii_lowercase().replace(['_', ' '], "-");
    candidates
        .iter()
        .map(|c| (strsim::damerau_levenshtein(&norm, c), *c))
        .filter(|(d, c)| *d <= (c.len() / 3).max(1))
        .min_by_key(|(d, _)| *d)
        .map(|(_, c)| c)
}

/// The byte range of a KDL span.
pub(super) fn range(span: SourceSpan) -> Range<usize> {
    span.offset()..span.offset() + span.len()
}

fn type_name(v: &KdlValue) -> &'static str {
    match v {
        KdlValue::String(_) => "a string",
        KdlValue::Integer(_) => "an integer",
        KdlValue::Float(_) => "a number with a fraction",
        KdlValue::Bool(_) => "a boolean",
        KdlValue::Null => "null",
    }
}

/// The per-file walk state: where we are and what went wrong so far.
pub(super) struct Cx<'f> {
    /// The file walked, named in every diagnostic.
    pub(super) file: &'f Path,
    /// Its text, shared with the diagnostics.
    pub(super) source: Arc<str>,
    /// Every mistake found so far, in document order.
    pub(super) diags: Vec<ConfigDiagnostic>,
}

impl Cx<'_> {
    pub(super) fn diag(
        &self,
        kind: DiagnosticKind,
        span: SourceSpan,
        message: impl Into<String>,
    ) -> ConfigDiagnostic {
        ConfigDiagnostic::new(kind, self.file, message).at(&self.source, range(span))
    }

    pub(super) fn push(&mut self, d: ConfigDiagnostic) {
        self.diags.push(d);
    }

    pub(super) fn line_of(&self, span: SourceSpan) -> usize {
        crate::config::diagnostic::line_col(&self.source, span.offset()).0
    }

    pub(super) fn unknown_node(&mut self, node: &KdlNode, known: &[&'static str], place: &str) {
        let key = node.name().value();
        let help = if let Some(s) = suggest(key, known) {
            format!("did you mean {s}?")
        } else if let Some(home) = super::nested_home(key) {
            format!("`{key}` belongs inside `{home} {{ }}`")
        } else {
            format!("known here: {}", known.join(", "))
        };
        let d = self
            .diag(
                DiagnosticKind::UnknownNode,
                node.name().span(),
                format!("unknown node `{key}` {place}"),
            )
            .with_label("unknown node")
            .with_help(help);
        self.push(d);
    }

    /// Reports a second occurrence of `node`'s name; true means skip it.
    pub(super) fn duplicate<'n>(
        &mut self,
        node: &'n KdlNode,
        seen: &mut Vec<(&'n str, usize)>,
    ) -> bool {
        let key = node.name().value();
        if let Some((_, first)) = seen.iter().find(|(k, _)| *k == key) {
            let d = self
                .diag(
                    DiagnosticKind::DuplicateNode,
                    node.name().span(),
                    format!("`{key}` is given twice (first on line {first})"),
                )
                .with_label("duplicate")
                .with_help(format!("keep one `{key}`; a value can be given only once"));
            self.push(d);
            return true;
        }
        seen.push((key, self.line_of(node.name().span())));
        false
    }

    /// Every `key=value` property is an error: no node takes properties.
    pub(super) fn no_props(&mut self, node: &KdlNode) {
        for e in node.entries() {
            if let Some(name) = e.name() {
                let d = self
                    .diag(
                        DiagnosticKind::WrongType,
                        e.span(),
                        format!(
                            "`{}` does not take properties (found `{}=…`)",
                            node.name().value(),
                            name.value()
                        ),
                    )
                    .with_label("property")
                    .with_help("xy configs use plain values, e.g. `port 8421`, not `key=value`");
                self.push(d);
            }
        }
    }

    pub(super) fn no_children(&mut self, node: &KdlNode) {
        if let Some(children) = node.children() {
            let d = self
                .diag(
                    DiagnosticKind::WrongType,
                    children.span(),
                    format!("`{}` does not take a `{{ … }}` block", node.name().value()),
                )
                .with_label("unexpected block")
                .with_help("remove the braces and what is inside them");
            self.push(d);
        }
    }

    /// The child nodes of a block node (`env`, `restart`, `stop`), which
    /// takes no values itself.
    pub(super) fn block<'n>(&mut self, node: &'n KdlNode) -> &'n [KdlNode] {
        self.no_props(node);
        let args: Vec<&KdlEntry> = node
            .entries()
            .iter()
            .filter(|e| e.name().is_none())
            .collect();
        if let (Some(first), Some(last)) = (args.first(), args.last()) {
            let key = node.name().value();
            let span =
                SourceSpan::from(first.span().offset()..last.span().offset() + last.span().len());
            let d = self
                .diag(
                    DiagnosticKind::WrongType,
                    span,
                    format!("`{key}` takes a `{{ … }}` block, not values"),
                )
                .with_label("unexpected value")
                .with_help(format!("write the settings inside braces: {key} {{ … }}"));
            self.push(d);
        }
        node.children().map_or(&[], |c| c.nodes())
    }

    /// The one value of a leaf node; errors for none, extras, properties
    /// and blocks. Extras are reported but the first value is still checked.
    pub(super) fn single<'n>(&mut self, node: &'n KdlNode, example: &str) -> Option<&'n KdlEntry> {
        self.no_props(node);
        self.no_children(node);
        let key = node.name().value();
        let args: Vec<&KdlEntry> = node
            .entries()
            .iter()
            .filter(|e| e.name().is_none())
            .collect();
        match args.as_slice() {
            // A lone property was reported by `no_props` already.
            [] if node.entries().iter().any(|e| e.name().is_some()) => None,
            [] => {
                let d = self
                    .diag(
                        DiagnosticKind::WrongType,
                        node.name().span(),
                        format!("`{key}` needs a value"),
                    )
                    .with_label("no value")
                    .with_help(format!("e.g. {example}"));
                self.push(d);
                None
            }
            [one] => Some(one),
            [first, extra @ ..] => {
                let (second, last) = (extra[0], extra[extra.len() - 1]);
                let span = SourceSpan::from(
                    second.span().offset()..last.span().offset() + last.span().len(),
                );
                let d = self
                    .diag(
                        DiagnosticKind::WrongType,
                        span,
                        format!("`{key}` takes exactly one value, found {}", args.len()),
                    )
                    .with_label("extra value")
                    .with_help(format!("e.g. {example}"));
                self.push(d);
                Some(first)
            }
        }
    }

    pub(super) fn wrong_type(
        &mut self,
        node: &KdlNode,
        e: &KdlEntry,
        expected: &str,
        help: String,
    ) {
        let key = node.name().value();
        let d = self
            .diag(
                DiagnosticKind::WrongType,
                e.span(),
                format!("`{key}` expects {expected}, found {}", type_name(e.value())),
            )
            .with_label(format!("expected {expected}"))
            .with_help(help);
        self.push(d);
    }

    pub(super) fn string(&mut self, node: &KdlNode, e: &KdlEntry, example: &str) -> Option<String> {
        match e.value() {
            KdlValue::String(s) => Some(s.clone()),
            v => {
                let help = match v {
                    KdlValue::Integer(n) => format!("quote it: \"{n}\" (e.g. {example})"),
                    KdlValue::Float(f) => format!("quote it: \"{f}\" (e.g. {example})"),
                    KdlValue::Bool(b) => format!("quote it: \"{b}\" (e.g. {example})"),
                    _ => format!("e.g. {example}"),
                };
                self.wrong_type(node, e, "a string", help);
                None
            }
        }
    }

    pub(super) fn integer(&mut self, node: &KdlNode, e: &KdlEntry, example: &str) -> Option<i128> {
        match e.value() {
            KdlValue::Integer(n) => Some(*n),
            KdlValue::String(s) if s.trim().parse::<i128>().is_ok() => {
                let help = format!("remove the quotes: {} {}", node.name().value(), s.trim());
                self.wrong_type(node, e, "an integer", help);
                None
            }
            _ => {
                self.wrong_type(node, e, "an integer", format!("e.g. {example}"));
                None
            }
        }
    }

    /// A leaf node holding one humantime duration string.
    pub(super) fn duration_node(&mut self, node: &KdlNode) -> Option<(Duration, SourceSpan)> {
        let key = node.name().value();
        let example = format!("{key} \"10s\"");
        let e = self.single(node, &example)?;
        let s = match e.value() {
            KdlValue::String(s) => s,
            KdlValue::Integer(n) => {
                let help = format!("add a unit and quotes: {key} \"{n}s\"");
                self.wrong_type(node, e, "a duration string", help);
                return None;
            }
            _ => {
                self.wrong_type(node, e, "a duration string", format!("e.g. {example}"));
                return None;
            }
        };
        match crate::time::parse_duration(s) {
            Ok(d) => Some((d, e.span())),
            Err(err) => {
                let d = self
                    .diag(
                        DiagnosticKind::BadDuration,
                        e.span(),
                        format!("invalid duration {s:?} for `{key}`: {err}"),
                    )
                    .with_label("not a duration")
                    .with_help("write a duration like \"500ms\", \"10s\" or \"1m 30s\"");
                self.push(d);
                None
            }
        }
    }

    /// Strings that end up in `execve` cannot hold NUL.
    pub(super) fn no_nul(&mut self, e: &KdlEntry, s: &str, what: &str) -> bool {
        if !s.contains('\0') {
            return true;
        }
        let d = self
            .diag(
                DiagnosticKind::InvalidValue,
                e.span(),
                format!("{what} contains a NUL character"),
            )
            .with_label("NUL")
            .with_help("remove the \\0: processes cannot receive it");
        self.push(d);
        false
    }
}
