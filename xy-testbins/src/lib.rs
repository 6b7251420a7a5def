//! Shared plumbing for xy's test child programs (`src/bin/*`): argument
//! parsing, line output flushed at once, the few signal and process calls they
//! need, the rmcp-based MCP server behind `xy-test-mcp` ([`mcp`]), the
//! installer of the official Python/TypeScript SDK servers for interop tests
//! ([`interop`]), the real servers of the compatibility corpus and what
//! installing them offline needs ([`corpus`]), and [`locate`], which other crates' tests use to find these
//! programs, [`oauth`], the OAuth fixture (a Python authorization server
//! and protected resource) the OAuth tests start, and [`wait`], the test
//! deadlines every crate's tests poll with (scaled by
//! `XY_TEST_TIMEOUT_FACTOR`).

pub mod args;
pub mod corpus;
pub mod interop;
pub mod locate;
pub mod mcp;
pub mod oauth;
pub mod out;
pub mod sys;
pub mod wait;
