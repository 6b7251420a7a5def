//! `xyctl start|stop|restart <name...|--all>`: one name is sent as `{name}`,
//! several as `{names}`, `--all` as `{all: true}`. `start` and `restart`
//! then wait for each server's outcome (SPEC §25, [`super::outcome`]).

use std::time::Duration;

use xy_core::protocol::{RestartResult, StartResult, StopResult, TargetParams, method};

use super::outcome;
use crate::cli::Targets;
use crate::ctx::{CONTROL_TIMEOUT, Ctx};
use crate::error::{Exit, Failure};
use crate::{daemon_conn, output, render};

#[derive(Debug, Clone, Copy)]
pub(crate) enum Action {
    Start,
    Stop,
    Restart,
}

/// The params for a target selection.
pub(crate) fn params(t: &Targets) -> TargetParams {
    if t.all {
        TargetParams::all()
    } else if let [one] = t.names.as_slice() {
        TargetParams::one(one.clone())
    } else {
        TargetParams::many(t.names.clone())
    }
}

pub(crate) fn run(ctx: &Ctx, action: Action, t: &Targets, wait: Duration) -> Result<Exit, Failure> {
    let mut client = daemon_conn::connect(ctx)?;
    let p = params(t);
    let mut exit = Exit::Success;
    let text = match action {
        Action::Start => {
            let r: StartResult = client.call(method::START, Some(&p), CONTROL_TIMEOUT)?;
            // A start a stop overtook did not do what was asked.
            if !r.cancelled.is_empty() {
                exit = Exit::Operational;
            }
            if wait.is_zero() {
                render::render_start(&r, &ctx.out)
            } else {
                let names: Vec<String> = r
                    .started
                    .iter()
                    .chain(&r.already_running)
                    .cloned()
                    .collect();
                let (text, e) = outcomes(&mut client, &names, wait, &ctx.out)?;
                if e != Exit::Success {
                    exit = e;
                }
                text + &render::render_start(
                    &StartResult {
                        cancelled: r.cancelled,
                        ..StartResult::default()
                    },
                    &ctx.out,
                )
            }
        }
        Action::Stop => {
            let r: StopResult = client.call(method::STOP, Some(&p), CONTROL_TIMEOUT)?;
            render::render_stop(&r, &ctx.out)
        }
        Action::Restart => {
            let r: RestartResult = client.call(method::RESTART, Some(&p), CONTROL_TIMEOUT)?;
            if !r.cancelled.is_empty() {
                exit = Exit::Operational;
            }
            if wait.is_zero() {
                render::render_restart(&r, &ctx.out)
            } else {
                let (text, e) = outcomes(&mut client, &r.restarted, wait, &ctx.out)?;
                if e != Exit::Success {
                    exit = e;
                }
                text + &render::render_restart(
                    &RestartResult {
                        cancelled: r.cancelled,
                        ..RestartResult::default()
                    },
                    &ctx.out,
                )
            }
        }
    };
    if text.is_empty() && t.all {
        output::stdout("no servers configured\n");
    } else {
        output::stdout(&text);
    }
    Ok(exit)
}

/// `name: running, 3 tools (0 held back)` for each server, and the exit
/// its outcomes make.
fn outcomes(
    client: &mut xy_core::client::Client,
    names: &[String],
    wait: Duration,
    style: &render::Style,
) -> Result<(String, Exit), Failure> {
    let found = outcome::wait(client, names, wait)?;
    let text = found
        .iter()
        .map(|(name, o, _)| outcome::line(name, o, wait, style))
        .collect();
    Ok((text, outcome::exit_of(found.iter().map(|(_, o, _)| o))))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn target_params_shapes() {
        let t = |names: &[&str], all| Targets {
            names: names.iter().map(|s| (*s).to_owned()).collect(),
            all,
        };
        assert_eq!(
            serde_json::to_string(&params(&t(&["a"], false))).unwrap(),
            r#"{"name":"a"}"#
        );
        assert_eq!(
            serde_json::to_string(&params(&t(&["a", "b"], false))).unwrap(),
            r#"{"names":["a","b"]}"#
        );
        assert_eq!(
            serde_json::to_string(&params(&t(&[], true))).unwrap(),
            r#"{"all":true}"#
        );
    }
}
