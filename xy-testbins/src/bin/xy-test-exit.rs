//! `xy-test-exit`: a child that fails at once, either with an exit code
//! (`--code N`, default 1) or by killing itself with a signal (`--signal NAME`),
//! for restart-policy and `last_exit` tests.

use xy_testbins::args::Args;
use xy_testbins::out::err;
use xy_testbins::sys;

const USAGE: &str = "xy-test-exit [--code N] [--signal NAME]";

fn main() {
    let mut args = Args::from_env(USAGE);
    let mut code: i32 = 1;
    let mut signal = None;
    while let Some(flag) = args.next_flag() {
        match flag.as_str() {
            "--code" => code = args.value(&flag),
            "--signal" => {
                let name: String = args.value(&flag);
                match sys::parse_signal(&name) {
                    Some(sig) => signal = Some(sig),
                    None => args.fail(&format!("unknown signal {name:?}")),
                }
            }
            _ => args.unknown(&flag),
        }
    }
    if let Some(signal) = signal {
        err(&format!("killing self with {}", signal.as_str()));
        sys::die_by_signal(signal);
    }
    err(&format!("exiting with code {code}"));
    std::process::exit(code);
}
