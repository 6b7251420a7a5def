//! `xyctl top`: a full-screen dashboard over the daemon socket (SPEC §15).
//! Plain threads and the blocking line client, no async runtime: one thread
//! reads the `events` stream, one takes a `list` sample a second (only while
//! `top` runs), one follows the log stream of the selected server(s), one
//! reads the keyboard, one waits for signals; each sends a [`Msg`] to the
//! main thread, which applies it to the pure [`Model`] and redraws. Nothing
//! polls: the main thread sleeps in `recv` until something happens.
//!
//! The terminal is restored on every way out: `q`, Ctrl-C (a key in raw
//! mode), SIGINT/SIGTERM/SIGHUP from outside, an error, and a panic.

use std::io::{self, IsTerminal};
use std::net::Shutdown;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::sync::mpsc::{self, Receiver, Sender};
use std::time::Duration;

use ratatui::crossterm::event::{self, Event, KeyCode, KeyEventKind, KeyModifiers};
use ratatui::crossterm::{cursor, execute, terminal};
use ratatui::{Terminal, backend::CrosstermBackend};
use xy_core::protocol::{
    CallsParams, CallsResult, EventNotification, EventsParams, EventsResult, ListEntry,
    LogNotification, LogsParams, LogsResult, StartResult, StopResult, TargetParams, method,
};

use crate::ctx::{CONTROL_TIMEOUT, Ctx, READ_TIMEOUT};
use crate::daemon_conn;
use crate::error::{Exit, Failure};
use xy_core::client::{Client, ClientError};

pub(crate) mod model;
pub(crate) mod view;

use model::{Effect, Key, Model, Msg, Row, Verb};

/// Time between resource samples (SPEC §15: at most one a second).
const SAMPLE_EVERY: Duration = Duration::from_secs(1);
/// Buffered lines the log pane starts with.
const LOG_TAIL: u32 = 200;

pub(crate) fn run(ctx: &Ctx) -> Result<Exit, Failure> {
    if !io::stdout().is_terminal() || !io::stdin().is_terminal() {
        return Err(Failure::new(
            Exit::Operational,
            "xyctl top needs a terminal; use `xyctl list --json` or `xyctl events --json` in scripts",
        ));
    }
    // Detect-or-spawn once; every other connection goes to the same socket.
    let mut first = daemon_conn::connect(ctx)?;
    let socket = ctx.paths()?.socket;
    let rows = sample(&mut first)?;
    let events = subscribe_events(first)?;

    // Signals are blocked before any thread starts, so every thread
    // inherits the mask and only the signal thread receives them.
    let signals = crate::commands::logs::block_signals()?;
    let (tx, rx) = mpsc::channel();
    spawn_signal_thread(signals, tx.clone());
    spawn_event_thread(events, tx.clone());
    spawn_sampler(socket.clone(), tx.clone());

    let theme = view::Theme {
        color: ctx.out.color,
    };
    let mut term = TermGuard::enter()?;
    spawn_input_thread(tx.clone());
    let result = main_loop(&mut term, Model::new(rows), &rx, &tx, &socket, theme);
    drop(term);
    result
}

fn main_loop(
    term: &mut TermGuard,
    mut model: Model,
    rx: &Receiver<Msg>,
    tx: &Sender<Msg>,
    socket: &Path,
    theme: view::Theme,
) -> Result<Exit, Failure> {
    let mut logs: Option<UnixStream> = None;
    let mut effects = model.start();
    loop {
        for fx in effects.drain(..) {
            match fx {
                Effect::Quit => {
                    stop_logs(&mut logs);
                    return Ok(Exit::Success);
                }
                Effect::Control { verb, name } => spawn_control(socket, verb, name, tx.clone()),
                Effect::Follow { generation, names } => {
                    stop_logs(&mut logs);
                    logs = spawn_logs(socket, generation, names, tx.clone());
                }
                Effect::Unfollow => stop_logs(&mut logs),
            }
        }
        term.draw(&model, theme)?;
        // Sleeps until something happens; then takes whatever else is
        // already waiting, so a burst of log lines costs one redraw.
        let Ok(first) = rx.recv() else {
            return Ok(Exit::Success);
        };
        effects.extend(model.update(first));
        while let Ok(more) = rx.try_recv() {
            effects.extend(model.update(more));
        }
    }
}

/// Raw mode and the alternate screen while alive; the terminal as it was
/// once dropped, and also if the program panics meanwhile.
struct TermGuard {
    term: Terminal<CrosstermBackend<io::Stdout>>,
}

impl TermGuard {
    fn enter() -> Result<TermGuard, Failure> {
        let fail = |e: io::Error| {
            restore();
            Failure::new(
                Exit::Operational,
                format!("cannot set up the terminal: {e}"),
            )
        };
        let hook = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            restore();
            hook(info);
        }));
        terminal::enable_raw_mode().map_err(fail)?;
        execute!(io::stdout(), terminal::EnterAlternateScreen, cursor::Hide).map_err(fail)?;
        let term = Terminal::new(CrosstermBackend::new(io::stdout())).map_err(fail)?;
        Ok(TermGuard { term })
    }

    fn draw(&mut self, m: &Model, theme: view::Theme) -> Result<(), Failure> {
        // `draw` resizes to the terminal first: a resize redraws everything.
        self.term
            .draw(|f| view::draw(f, m, theme))
            .map(|_| ())
            .map_err(|e| Failure::new(Exit::Operational, format!("cannot draw: {e}")))
    }
}

impl Drop for TermGuard {
    fn drop(&mut self) {
        restore();
    }
}

/// Leaves the alternate screen, shows the cursor, ends raw mode. Safe to
/// call more than once.
fn restore() {
    let _ = execute!(io::stdout(), terminal::LeaveAlternateScreen, cursor::Show);
    let _ = terminal::disable_raw_mode();
}

fn sample(c: &mut Client) -> Result<Vec<Row>, ClientError> {
    let entries: Vec<ListEntry> = c.call::<(), _>(method::LIST, None, READ_TIMEOUT)?;
    let mut rows: Vec<Row> = entries.iter().map(Row::from_entry).collect();
    // The CALLS column: counts only (no record is read). A daemon from
    // before call records refuses the method: the column shows `-`.
    let totals = CallsParams {
        limit: Some(0),
        ..CallsParams::default()
    };
    match c.call::<_, CallsResult>(method::CALLS, Some(&totals), READ_TIMEOUT) {
        Ok(r) => {
            for row in &mut rows {
                row.calls = r.totals.get(&row.name).copied();
            }
        }
        Err(ClientError::Rpc(_)) => {}
        Err(e) => return Err(e),
    }
    Ok(rows)
}

fn subscribe_events(mut c: Client) -> Result<(Client, u64), ClientError> {
    let sub: EventsResult = c.call(method::EVENTS, Some(&EventsParams::default()), READ_TIMEOUT)?;
    Ok((c, sub.subscription_id))
}

fn spawn_event_thread((mut c, sub): (Client, u64), tx: Sender<Msg>) {
    std::thread::spawn(move || {
        loop {
            let msg = match c.next_notification(None) {
                Ok(n) if n.method == method::EVENT => match n.decode::<EventNotification>() {
                    Ok(e) if e.subscription_id == sub => Msg::Event(e),
                    Ok(_) => continue,
                    Err(e) => Msg::Lost(e.to_string()),
                },
                Ok(n) if n.method == method::EVENT_END => {
                    Msg::Lost("xyd ended the event stream".to_owned())
                }
                Ok(_) => continue,
                Err(e) => Msg::Lost(e.to_string()),
            };
            let lost = matches!(msg, Msg::Lost(_));
            if tx.send(msg).is_err() || lost {
                return;
            }
        }
    });
}

/// One `list` a second while `top` runs; ends when the main loop is gone.
fn spawn_sampler(socket: PathBuf, tx: Sender<Msg>) {
    std::thread::spawn(move || {
        let mut client = None;
        loop {
            std::thread::sleep(SAMPLE_EVERY);
            let c = match client.as_mut() {
                Some(c) => c,
                None => match Client::connect(&socket, READ_TIMEOUT) {
                    Ok(c) => client.insert(c),
                    Err(_) => continue,
                },
            };
            let msg = match sample(c) {
                Ok(rows) => Msg::Sample(rows),
                Err(e) => {
                    client = None;
                    Msg::Lost(e.to_string())
                }
            };
            if tx.send(msg).is_err() {
                return;
            }
        }
    });
}

/// Follows `names` (empty: all); returns a handle whose shutdown ends it.
fn spawn_logs(
    socket: &Path,
    generation: u64,
    names: Vec<String>,
    tx: Sender<Msg>,
) -> Option<UnixStream> {
    let mut c = Client::connect(socket, READ_TIMEOUT).ok()?;
    let handle = c.try_clone_stream().ok()?;
    let params = LogsParams {
        names: (!names.is_empty()).then_some(names),
        tail: Some(LOG_TAIL),
        follow: true,
        ..LogsParams::default()
    };
    std::thread::spawn(move || {
        let Ok(sub) = c.call::<_, LogsResult>(method::LOGS, Some(&params), READ_TIMEOUT) else {
            return;
        };
        while let Ok(n) = c.next_notification(None) {
            if n.method != method::LOG {
                if n.method == method::LOG_END {
                    return;
                }
                continue;
            }
            let Ok(line) = n.decode::<LogNotification>() else {
                return;
            };
            if line.subscription_id == sub.subscription_id
                && tx.send(Msg::Log { generation, line }).is_err()
            {
                return;
            }
        }
    });
    Some(handle)
}

/// Ends the current log stream: its thread reads EOF and exits.
fn stop_logs(logs: &mut Option<UnixStream>) {
    if let Some(s) = logs.take() {
        let _ = s.shutdown(Shutdown::Both);
    }
}

/// Runs start/stop/restart off the main thread (a stop waits for the grace
/// period); the outcome becomes the footer message.
fn spawn_control(socket: &Path, verb: Verb, name: String, tx: Sender<Msg>) {
    let socket = socket.to_path_buf();
    std::thread::spawn(move || {
        let params = TargetParams::one(name.clone());
        let outcome = Client::connect(&socket, READ_TIMEOUT)
            .and_then(|mut c| c.call_raw(verb.method(), Some(&params), CONTROL_TIMEOUT));
        let text = match outcome {
            Ok(raw) => summarize(verb, &name, raw.get()),
            Err(e) => format!("{} {name} failed: {e}", verb.method()),
        };
        let _ = tx.send(Msg::Done(text));
    });
}

/// `restarted web`, `web was not running`, …
fn summarize(verb: Verb, name: &str, raw: &str) -> String {
    let has = |names: &[String]| names.iter().any(|n| n == name);
    match verb {
        Verb::Start => match serde_json::from_str::<StartResult>(raw) {
            Ok(r) if has(&r.already_running) => format!("{name} is already running"),
            _ => format!("started {name}"),
        },
        Verb::Stop => match serde_json::from_str::<StopResult>(raw) {
            Ok(r) if has(&r.not_running) => format!("{name} was not running"),
            _ => format!("stopped {name}"),
        },
        Verb::Restart => format!("restarted {name}"),
    }
}

fn spawn_input_thread(tx: Sender<Msg>) {
    std::thread::spawn(move || {
        loop {
            let msg = match event::read() {
                Ok(Event::Key(k)) if k.kind != KeyEventKind::Release => {
                    let ctrl = k.modifiers.contains(KeyModifiers::CONTROL);
                    let key = match k.code {
                        KeyCode::Char('c') if ctrl => Key::Interrupt,
                        KeyCode::Char(c) => Key::Char(c),
                        KeyCode::Up => Key::Up,
                        KeyCode::Down => Key::Down,
                        KeyCode::PageUp => Key::PageUp,
                        KeyCode::PageDown => Key::PageDown,
                        KeyCode::Home => Key::Home,
                        KeyCode::End => Key::End,
                        KeyCode::Enter => Key::Enter,
                        KeyCode::Esc => Key::Esc,
                        KeyCode::Backspace => Key::Backspace,
                        _ => continue,
                    };
                    Msg::Key(key)
                }
                Ok(Event::Resize(..)) => Msg::Resize,
                Ok(_) => continue,
                Err(_) => Msg::Signal,
            };
            if tx.send(msg).is_err() {
                return;
            }
        }
    });
}

fn spawn_signal_thread(set: nix::sys::signal::SigSet, tx: Sender<Msg>) {
    std::thread::spawn(move || {
        if set.wait().is_ok() {
            let _ = tx.send(Msg::Signal);
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn outcomes_in_words() {
        assert_eq!(
            summarize(Verb::Restart, "web", r#"{"restarted":["web"]}"#),
            "restarted web"
        );
        assert_eq!(
            summarize(
                Verb::Start,
                "web",
                r#"{"started":[],"already_running":["web"]}"#
            ),
            "web is already running"
        );
        assert_eq!(
            summarize(Verb::Stop, "web", r#"{"stopped":[],"not_running":["web"]}"#),
            "web was not running"
        );
        assert_eq!(
            summarize(Verb::Stop, "web", r#"{"stopped":["web"],"not_running":[]}"#),
            "stopped web"
        );
    }
}
