//! Integration tests of the child programs: each is run as a real process and
//! driven with real signals, pipes and sockets.

mod children;
mod helper;
mod interop;
mod mcp;
