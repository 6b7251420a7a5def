//! Config diagnostics: what went wrong, where (file, line, column), the
//! offending source line, and a hint. Rendered miette-style for humans and,
//! as `protocol`'s [`DiagnosticData`] and [`ConfigInvalidData`], as the
//! `data` of a `-32003` error.

use std::fmt;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use miette::{
    Diagnostic, GraphicalReportHandler, GraphicalTheme, LabeledSpan, NamedSource, SourceCode,
};

use crate::protocol::{ConfigInvalidData, DiagnosticData, DiagnosticKind};

/// One config error with its location.
///
/// `source_text` and `span` carry what [`ConfigErrors::render`] needs to show
/// the offending line; both are `None` for errors without a position (I/O,
/// bad file name).
#[derive(Clone, PartialEq, Eq)]
pub struct ConfigDiagnostic {
    /// What kind of mistake.
    pub kind: DiagnosticKind,
    /// The file.
    pub file: PathBuf,
    /// 1-based line (0 when the error has no position, e.g. I/O).
    pub line: usize,
    /// 1-based column, in characters (0 when the error has no position).
    pub column: usize,
    /// One sentence.
    pub message: String,
    /// A hint (`did you mean working-dir?`).
    pub help: Option<String>,
    /// A short note shown under the caret (`expected an integer`).
    pub label: Option<String>,
    /// The whole text of `file`, shared by all its diagnostics.
    pub source_text: Option<Arc<str>>,
    /// Byte range of the offending text within `source_text`.
    pub span: Option<Range<usize>>,
}

/// The source text is left out: it may hold secrets (`env` values) and would
/// flood logs.
impl fmt::Debug for ConfigDiagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ConfigDiagnostic")
            .field("kind", &self.kind)
            .field("file", &self.file)
            .field("line", &self.line)
            .field("column", &self.column)
            .field("message", &self.message)
            .field("help", &self.help)
            .field("label", &self.label)
            .field("span", &self.span)
            .finish_non_exhaustive()
    }
}

impl ConfigDiagnostic {
    /// A diagnostic without a position (I/O, bad file name).
    pub fn new(kind: DiagnosticKind, file: &Path, message: impl Into<String>) -> Self {
        ConfigDiagnostic {
            kind,
            file: file.to_path_buf(),
            line: 0,
            column: 0,
            message: message.into(),
            help: None,
            label: None,
            source_text: None,
            span: None,
        }
    }

    /// Points the diagnostic at `span` (bytes) of `source`, computing the
    /// 1-based line and character column.
    pub fn at(mut self, source: &Arc<str>, span: Range<usize>) -> Self {
        let (line, column) = line_col(source, span.start);
        self.line = line;
        self.column = column;
        self.source_text = Some(Arc::clone(source));
        self.span = Some(span);
        self
    }

    /// Adds a hint.
    pub fn with_help(mut self, help: impl Into<String>) -> Self {
        self.help = Some(help.into());
        self
    }

    /// Adds the note shown under the caret.
    pub fn with_label(mut self, label: impl Into<String>) -> Self {
        self.label = Some(label.into());
        self
    }

    /// The line of `source_text` the diagnostic points at, if any.
    pub fn source_line(&self) -> Option<&str> {
        let src = self.source_text.as_deref()?;
        let start = self.span.as_ref()?.start.min(src.len());
        let begin = src[..start].rfind('\n').map_or(0, |i| i + 1);
        let end = src[begin..].find('\n').map_or(src.len(), |i| begin + i);
        Some(src[begin..end].trim_end_matches('\r'))
    }

    /// `file:line:col` (or just `file` without a position).
    pub fn location(&self) -> String {
        if self.line == 0 {
            self.file.display().to_string()
        } else {
            format!("{}:{}:{}", self.file.display(), self.line, self.column)
        }
    }

    fn sort_key(&self) -> (&Path, usize, usize) {
        (&self.file, self.line, self.column)
    }
}

/// `file:line:col: message (help)`.
impl fmt::Display for ConfigDiagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.location(), self.message)?;
        if let Some(help) = &self.help {
            write!(f, " ({help})")?;
        }
        Ok(())
    }
}

/// 1-based line and character column of byte `offset` in `src`.
pub(crate) fn line_col(src: &str, offset: usize) -> (usize, usize) {
    let mut offset = offset.min(src.len());
    while !src.is_char_boundary(offset) {
        offset -= 1;
    }
    let before = &src[..offset];
    let line = before.matches('\n').count() + 1;
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    let column = before[line_start..].chars().count() + 1;
    (line, column)
}

/// Every error found in a config directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigErrors {
    /// In file order, then position order.
    pub diagnostics: Vec<ConfigDiagnostic>,
}

impl ConfigErrors {
    /// Wraps `diagnostics`, sorted by file, then line, then column.
    pub fn new(mut diagnostics: Vec<ConfigDiagnostic>) -> Self {
        diagnostics.sort_by(|a, b| a.sort_key().cmp(&b.sort_key()));
        ConfigErrors { diagnostics }
    }

    /// True when every diagnostic is a duplicate port (`reload` answers
    /// `-32002 PortConflict` then, `-32003 ConfigInvalid` otherwise).
    pub fn only_port_conflicts(&self) -> bool {
        !self.diagnostics.is_empty()
            && self
                .diagnostics
                .iter()
                .all(|d| d.kind == DiagnosticKind::DuplicatePort)
    }

    /// Miette-style report of every diagnostic: header, `file:line:col`, the
    /// offending line with an underline, and the help line. `color` adds ANSI
    /// styling; without it the output is plain Unicode text.
    pub fn render(&self, color: bool) -> String {
        let theme = if color {
            GraphicalTheme::unicode()
        } else {
            GraphicalTheme::unicode_nocolor()
        };
        let handler = GraphicalReportHandler::new_themed(theme)
            .with_width(100)
            .with_links(false)
            .without_syntax_highlighting();
        let mut out = String::new();
        for (i, d) in self.diagnostics.iter().enumerate() {
            if i > 0 {
                out.push('\n');
            }
            let report = Report::new(d);
            if handler.render_report(&mut out, &report).is_err() {
                // Rendering into a String only fails if a Display impl does;
                // fall back to the one-line form rather than lose the error.
                out.push_str(&d.to_string());
                out.push('\n');
            }
        }
        out
    }

    /// `[{kind, file, line, column, message, help}]`, the `data` of a
    /// `-32003` error and `xyctl config check --json`.
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::to_value(self.data()).unwrap_or_default()
    }

    /// The diagnostics as their wire type.
    pub fn data(&self) -> Vec<DiagnosticData> {
        self.diagnostics
            .iter()
            .map(|d| DiagnosticData {
                kind: d.kind,
                file: d.file.display().to_string(),
                line: d.line,
                column: d.column,
                message: d.message.clone(),
                help: d.help.clone(),
            })
            .collect()
    }
}

impl ConfigInvalidData {
    /// The data for `errors`.
    pub fn new(errors: &ConfigErrors) -> ConfigInvalidData {
        ConfigInvalidData {
            diagnostics: errors.data(),
            rendered: errors.render(false),
        }
    }
}

/// One line per diagnostic: `file:line:col: message (help)`.
impl fmt::Display for ConfigErrors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, d) in self.diagnostics.iter().enumerate() {
            if i > 0 {
                writeln!(f)?;
            }
            write!(f, "{d}")?;
        }
        Ok(())
    }
}

impl std::error::Error for ConfigErrors {}

/// One diagnostic as miette sees it.
struct Report<'a> {
    diag: &'a ConfigDiagnostic,
    source: Option<NamedSource<Arc<str>>>,
    code: String,
}

impl<'a> Report<'a> {
    fn new(diag: &'a ConfigDiagnostic) -> Self {
        // An empty file has no line to point at; miette would print an empty
        // snippet box.
        let source = match (&diag.source_text, &diag.span) {
            (Some(src), Some(_)) if !src.is_empty() => Some(NamedSource::new(
                diag.file.display().to_string(),
                Arc::clone(src),
            )),
            _ => None,
        };
        Report {
            diag,
            source,
            code: format!("config::{}", diag.kind.as_str()),
        }
    }
}

impl fmt::Debug for Report<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.diag, f)
    }
}

impl fmt::Display for Report<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let file = self.diag.file.display().to_string();
        if self.source.is_some() || (self.diag.line == 0 && self.diag.message.contains(&file)) {
            f.write_str(&self.diag.message)
        } else {
            // No snippet header will name the file: say it here.
            write!(f, "{}: {}", self.diag.location(), self.diag.message)
        }
    }
}

impl std::error::Error for Report<'_> {}

impl Diagnostic for Report<'_> {
    fn code<'b>(&'b self) -> Option<Box<dyn fmt::Display + 'b>> {
        Some(Box::new(&self.code))
    }

    fn help<'b>(&'b self) -> Option<Box<dyn fmt::Display + 'b>> {
        self.diag
            .help
            .as_ref()
            .map(|h| Box::new(h) as Box<dyn fmt::Display>)
    }

    fn source_code(&self) -> Option<&dyn SourceCode> {
        self.source.as_ref().map(|s| s as &dyn SourceCode)
    }

    fn labels(&self) -> Option<Box<dyn Iterator<Item = LabeledSpan> + '_>> {
        self.source.as_ref()?;
        let span = self.diag.span.clone()?;
        let label = LabeledSpan::new_primary_with_span(
            self.diag.label.clone(),
            (span.start, span.end.saturating_sub(span.start)),
        );
        Some(Box::new(std::iter::once(label)))
    }
}

/// A non-fatal finding (command missing or not executable).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigWarning {
    /// The file.
    pub file: PathBuf,
    /// The server.
    pub name: String,
    /// One sentence.
    pub message: String,
}

/// `file: message`.
impl fmt::Display for ConfigWarning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.file.display(), self.message)
    }
}
