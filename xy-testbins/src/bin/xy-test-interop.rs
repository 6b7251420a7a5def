//! `xy-test-interop install`: installs the pinned Python SDK,
//! server-everything, the conformance suite, the reference servers and the
//! compatibility corpus into the interop cache (`xy_testbins::interop`,
//! `xy_testbins::corpus`), so CI
//! pays for it once up front. Exit 0 installed, 0 with a loud message when
//! skipped (no python3/npm, registry unreachable), non-zero on a real failure.

use xy_testbins::args::Args;
use xy_testbins::corpus;
use xy_testbins::interop::{self, Interop};
use xy_testbins::out::out;

const USAGE: &str = "xy-test-interop install";

fn main() {
    let mut args = Args::from_env(USAGE);
    if let Some(flag) = args.next_flag() {
        args.unknown(&flag);
    }
    match args.trailing() {
        [] => {}
        _ => args.fail("unexpected arguments"),
    }
    out(&format!(
        "interop cache: {}",
        interop::cache_dir().display()
    ));
    match interop::python_sdk() {
        Interop::Ready(sdk) => out(&format!(
            "python mcp {}: {}",
            interop::PYTHON_MCP_VERSION,
            sdk.python.display()
        )),
        Interop::Skip(skip) => skip.announce("install python mcp"),
    }
    match interop::server_everything() {
        Interop::Ready(se) => out(&format!(
            "server-everything {}: {}",
            interop::SERVER_EVERYTHING_VERSION,
            se.entry.display()
        )),
        Interop::Skip(skip) => skip.announce("install server-everything"),
    }
    match interop::conformance() {
        Interop::Ready(c) => out(&format!(
            "conformance {} (node {}, sdk {}): {}",
            interop::CONFORMANCE_VERSION,
            interop::NODE22_VERSION,
            interop::TS_SDK_VERSION,
            c.cli.display()
        )),
        Interop::Skip(skip) => skip.announce("install the conformance suite"),
    }
    match interop::ts_client() {
        Interop::Ready(c) => out(&format!(
            "typescript client sdk {}: {}",
            interop::TS_CLIENT_VERSION,
            c.script.display()
        )),
        Interop::Skip(skip) => skip.announce("install the typescript client sdk"),
    }
    for (package, version) in interop::REFERENCE_SERVERS {
        match interop::npm_server(package, version) {
            Interop::Ready(s) => out(&format!("{package} {version}: {}", s.entry.display())),
            Interop::Skip(skip) => skip.announce(&format!("install {package}")),
        }
    }
    match corpus::corpus() {
        Interop::Ready(c) => out(&format!(
            "compatibility corpus ({} npm, {} PyPI servers, uv {}): {}",
            corpus::NPM.len(),
            corpus::PYPI.len(),
            corpus::UV_VERSION,
            c.dir.display()
        )),
        Interop::Skip(skip) => skip.announce("install the compatibility corpus"),
    }
}
