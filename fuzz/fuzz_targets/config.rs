//! Fuzzes the KDL server-config parser and its diagnostics rendering.
#![no_main]

use libfuzzer_sys::fuzz_target;

#[path = "../harness.rs"]
#[allow(dead_code)]
mod harness;

fuzz_target!(|data: &[u8]| harness::config(data));
