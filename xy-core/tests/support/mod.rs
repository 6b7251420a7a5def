//! The config tests' shared scaffolding: a minimal valid head, and parsing a
//! server file that must succeed, must fail, or must fail exactly once at a
//! given position. Each test binary uses a subset of it.
#![allow(dead_code)]

use std::path::Path;

use xy_core::config::{ConfigDiagnostic, ConfigErrors, ServerConfig, parse_server};
use xy_core::protocol::DiagnosticKind;

/// The two required fields; tests append the block under test.
pub(crate) const HEAD: &str = "command \"/usr/bin/env\"\nport 8421\n";

/// A server name and the file its text claims to come from.
pub(crate) struct Fixture {
    pub(crate) name: &'static str,
    pub(crate) file: &'static str,
}

/// `demo` in `servers/demo.kdl`.
pub(crate) const DEMO: Fixture = Fixture {
    name: "demo",
    file: "servers/demo.kdl",
};

impl Fixture {
    pub(crate) fn parse(&self, src: &str) -> Result<ServerConfig, ConfigErrors> {
        parse_server(self.name, Path::new(self.file), src)
    }

    #[track_caller]
    pub(crate) fn ok(&self, src: &str) -> ServerConfig {
        match self.parse(src) {
            Ok(c) => c,
            Err(e) => panic!("expected a valid config, got:\n{}", e.render(false)),
        }
    }

    #[track_caller]
    pub(crate) fn errors(&self, src: &str) -> Vec<ConfigDiagnostic> {
        match self.parse(src) {
            Ok(c) => panic!("expected errors, got {c:?}"),
            Err(e) => e.diagnostics,
        }
    }

    /// Exactly one diagnostic, checked for kind, file, position and a
    /// message fragment.
    #[track_caller]
    pub(crate) fn one(
        &self,
        src: &str,
        kind: DiagnosticKind,
        line: usize,
        column: usize,
        msg: &str,
    ) -> ConfigDiagnostic {
        let diags = self.errors(src);
        assert_eq!(diags.len(), 1, "expected one diagnostic, got {diags:#?}");
        let d = diags.into_iter().next().unwrap();
        assert_eq!(d.kind, kind, "{d:?}");
        assert_eq!(d.file, Path::new(self.file));
        assert_eq!((d.line, d.column), (line, column), "{d:?}");
        assert!(
            d.message.contains(msg),
            "message {:?} lacks {msg:?}",
            d.message
        );
        d
    }
}

#[track_caller]
pub(crate) fn ok(src: &str) -> ServerConfig {
    DEMO.ok(src)
}

#[track_caller]
pub(crate) fn errors(src: &str) -> Vec<ConfigDiagnostic> {
    DEMO.errors(src)
}
