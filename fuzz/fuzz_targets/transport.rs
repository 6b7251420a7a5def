//! Fuzzes xyd's line framing and JSON-RPC dispatch over an in-memory stream.
#![no_main]

use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;

#[path = "../harness.rs"]
#[allow(dead_code)]
mod harness;

fuzz_target!(|data: &[u8]| {
    static T: OnceLock<harness::Transport> = OnceLock::new();
    T.get_or_init(harness::Transport::new).run(data);
});
