//! End-to-end tests of the real `xyd` binary: raw socket lines (as socat
//! sends them), real child processes from `xy-testbins`, real signals.

mod helper;

mod aggregate;
mod attack;
mod auth;
mod boot;
mod conformance;
mod conformance_auth;
mod console_browser;
mod crash;
mod docs;
mod edge;
mod era_matrix;
mod events;
mod fault;
mod fuzz_corpus;
mod gateway;
mod hostile;
mod logs;
mod mcp;
mod peer;
mod reload;
mod remote;
mod rpc;
mod sandbox;
mod secret_store;
mod secrets;
pub(crate) mod stdio;
