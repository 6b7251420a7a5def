//! Shared plumbing for xy's test child programs (`src/bin/*`): argument
//! parsing, line output flushed at once, the few signal and process calls they
//! need, the minimal HTTP MCP server behind `xy-test-mcp`, and [`locate`], which
//! other crates' tests use to find these programs.

pub mod args;
pub mod locate;
pub mod mcp;
pub mod out;
pub mod sys;
