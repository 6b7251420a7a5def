//! Shared plumbing for xy's test child programs (`src/bin/*`): argument
//! parsing, line output flushed at once, the few signal and process calls they
//! need, and the minimal HTTP MCP server behind `xy-test-mcp`.

pub mod args;
pub mod mcp;
pub mod out;
pub mod sys;
