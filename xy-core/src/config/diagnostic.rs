//! Config diagnostics: what went wrong, where (file, line, column), the
//! offending source line, and a hint. Rendered miette-style for humans and as
//! JSON for the `data` of a `-32003` error.

use std::path::PathBuf;

/// The class of a config mistake.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum DiagnosticKind {
    /// Not valid KDL (v2 nor v1).
    Syntax,
    /// A node name we do not know (typo: see `help`).
    UnknownNode,
    /// A node given twice.
    DuplicateNode,
    /// A value of the wrong type (string where an integer belongs, …).
    WrongType,
    /// A required node is absent.
    MissingField,
    /// A value outside its allowed set or range (policy, port, …).
    InvalidValue,
    /// A duration humantime cannot parse.
    BadDuration,
    /// The file stem is not a valid server name.
    BadName,
    /// Two files declare the same port.
    DuplicatePort,
    /// The file or directory could not be read.
    Io,
}

/// One config error with its location.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigDiagnostic {
    /// What kind of mistake.
    pub kind: DiagnosticKind,
    /// The file.
    pub file: PathBuf,
    /// 1-based line (0 when the error has no position, e.g. I/O).
    pub line: usize,
    /// 1-based column, in characters.
    pub column: usize,
    /// One sentence.
    pub message: String,
    /// A hint (`did you mean working-dir?`).
    pub help: Option<String>,
}

/// Every error found in a config directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigErrors {
    /// In file order, then position order.
    pub diagnostics: Vec<ConfigDiagnostic>,
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
