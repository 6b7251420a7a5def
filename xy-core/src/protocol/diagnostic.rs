//! The `data` of a `-32003 ConfigInvalid` error (SPEC §6) and of `xyctl
//! config check --json`: every config diagnostic as a record, with its
//! class ([`DiagnosticKind`]) as the wire spells it. `config` builds these
//! from its `ConfigErrors` (`ConfigInvalidData::new` lives there, beside the
//! diagnostics it reads).

use serde::{Deserialize, Serialize};

/// The class of a config mistake.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DiagnosticKind {
    /// Not valid KDL (v2 nor v1).
    Syntax,
    /// A node name we do not know (typo: see `help`).
    UnknownNode,
    /// A node given twice.
    DuplicateNode,
    /// A value of the wrong type (string where an integer belongs, …), the
    /// wrong number of values, a `key=value` property or a `{ … }` block
    /// where none is allowed.
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

impl DiagnosticKind {
    /// The snake_case spelling used in JSON (`unknown_node`).
    pub const fn as_str(self) -> &'static str {
        match self {
            DiagnosticKind::Syntax => "syntax",
            DiagnosticKind::UnknownNode => "unknown_node",
            DiagnosticKind::DuplicateNode => "duplicate_node",
            DiagnosticKind::WrongType => "wrong_type",
            DiagnosticKind::MissingField => "missing_field",
            DiagnosticKind::InvalidValue => "invalid_value",
            DiagnosticKind::BadDuration => "bad_duration",
            DiagnosticKind::BadName => "bad_name",
            DiagnosticKind::DuplicatePort => "duplicate_port",
            DiagnosticKind::Io => "io",
        }
    }
}

/// `data` of `-32003 ConfigInvalid` (and `-32002 PortConflict`) from
/// `reload`: every diagnostic, structured and rendered.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConfigInvalidData {
    /// One per mistake, in file order.
    pub diagnostics: Vec<DiagnosticData>,
    /// The diagnostics as `xyd` renders them (no colour), for display.
    pub rendered: String,
}

/// One config diagnostic on the wire (the JSON of
/// [`crate::config::ConfigErrors::to_json`] and `xyctl config check --json`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DiagnosticData {
    /// The class, snake_case (`unknown_node`, `duplicate_port`, …).
    pub kind: DiagnosticKind,
    /// The file.
    pub file: String,
    /// 1-based line; 0 without a position.
    pub line: usize,
    /// 1-based column in characters; 0 without a position.
    pub column: usize,
    /// One sentence.
    pub message: String,
    /// A hint, if any.
    pub help: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn config_invalid_data_is_the_old_wire_shape_and_reads_back() {
        let errors = crate::config::parse_server(
            "a",
            std::path::Path::new("/cfg/a.kdl"),
            "command \"x\"\nport 1\nworking_dir \"/\"\n",
        )
        .unwrap_err();
        let data = ConfigInvalidData::new(&errors);
        let v = serde_json::to_value(&data).unwrap();
        assert_eq!(v["diagnostics"], errors.to_json());
        assert_eq!(v["diagnostics"][0]["kind"], "unknown_node");
        assert_eq!(v["diagnostics"][0]["file"], "/cfg/a.kdl");
        assert_eq!(v["rendered"], errors.render(false));
        assert_eq!(
            serde_json::from_value::<ConfigInvalidData>(v).unwrap(),
            data
        );
    }
}
