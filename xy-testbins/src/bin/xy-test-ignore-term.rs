//! `xy-test-ignore-term`: a child that ignores SIGTERM (`SIG_IGN`) and sleeps
//! forever, so only the supervisor's SIGKILL after the grace period stops it.

use xy_testbins::args::Args;
use xy_testbins::out::out;
use xy_testbins::sys;

const USAGE: &str = "xy-test-ignore-term";

fn main() {
    let mut args = Args::from_env(USAGE);
    if let Some(flag) = args.next_flag() {
        args.unknown(&flag);
    }
    sys::ignore_sigterm();
    out(&format!("ignoring SIGTERM pid={}", std::process::id()));
    sys::sleep_forever();
}
