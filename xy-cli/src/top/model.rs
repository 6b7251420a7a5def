//! `top`'s state and its pure update function: what the dashboard shows
//! (rows, selection, filter, log pane, messages) and how each input — a key,
//! an `event`, a `list` sample, a log line — changes it. No I/O: the effects
//! it returns are carried out by `top.rs`, so every rule is unit-tested.

use std::collections::VecDeque;

use xy_core::protocol::{
    EventKind, EventNotification, HealthState, ListEntry, LogNotification, ServerState,
    config_change,
};

/// Log lines kept for the pane.
pub(crate) const LOG_KEEP: usize = 1000;

/// One server's row.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Row {
    pub(crate) name: String,
    pub(crate) state: ServerState,
    pub(crate) health: HealthState,
    pub(crate) pid: Option<u32>,
    pub(crate) port: u16,
    pub(crate) cpu_percent: Option<f64>,
    pub(crate) rss_bytes: Option<u64>,
    pub(crate) restarts: u32,
    pub(crate) uptime_secs: Option<u64>,
    /// Tool count from the MCP probe, when the daemon reports one.
    pub(crate) tools: Option<u64>,
    /// Tools and prompts xy's firewall holds back (SPEC §20).
    pub(crate) held: u32,
    /// Tool calls through xy since the daemon started (SPEC §20), from
    /// `calls`' `totals`; `None` from a daemon without them.
    pub(crate) calls: Option<u64>,
}

impl Row {
    /// From a `list` entry; `tools` is its `tool_count` when present.
    pub(crate) fn from_entry(e: &ListEntry) -> Row {
        Row {
            name: e.name.clone(),
            state: e.state,
            health: e.health.state,
            pid: e.pid,
            port: e.port,
            cpu_percent: e.cpu_percent,
            rss_bytes: e.rss_bytes,
            restarts: e.restart_count,
            uptime_secs: e.uptime_secs,
            tools: e.tool_count.map(u64::from),
            held: e.tools_held,
            calls: None,
        }
    }

    /// A server first seen in an event (added by reload), until the next sample.
    fn new(name: &str) -> Row {
        Row {
            name: name.to_owned(),
            state: ServerState::Stopped,
            health: HealthState::Unknown,
            pid: None,
            port: 0,
            cpu_percent: None,
            rss_bytes: None,
            restarts: 0,
            uptime_secs: None,
            tools: None,
            held: 0,
            calls: None,
        }
    }
}

/// Keys `top` understands, decoupled from the terminal library.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Key {
    Char(char),
    Up,
    Down,
    PageUp,
    PageDown,
    Home,
    End,
    Enter,
    Esc,
    Backspace,
    /// Ctrl-C (raw mode delivers it as a key).
    Interrupt,
}

/// What happened.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Msg {
    Key(Key),
    /// The terminal changed size (the next draw adapts).
    Resize,
    /// A resource sample: every server's `list` row.
    Sample(Vec<Row>),
    Event(EventNotification),
    /// A log line of follow stream `generation`.
    Log {
        generation: u64,
        line: LogNotification,
    },
    /// A start/stop/restart finished: what to tell the user.
    Done(String),
    /// The connection to xyd is gone.
    Lost(String),
    /// SIGTERM/SIGINT/SIGHUP from outside.
    Signal,
}

/// The lifecycle calls the keys make.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Verb {
    Start,
    Stop,
    Restart,
}

impl Verb {
    pub(crate) fn method(self) -> &'static str {
        match self {
            Verb::Start => xy_core::protocol::method::START,
            Verb::Stop => xy_core::protocol::method::STOP,
            Verb::Restart => xy_core::protocol::method::RESTART,
        }
    }

    /// `starting`, … for the message shown while the call runs.
    pub(crate) fn progressive(self) -> &'static str {
        match self {
            Verb::Start => "starting",
            Verb::Stop => "stopping",
            Verb::Restart => "restarting",
        }
    }
}

/// Whose logs the pane follows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum LogTarget {
    None,
    One(String),
    All,
}

/// What `top.rs` must do after an update.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Effect {
    Quit,
    Control {
        verb: Verb,
        name: String,
    },
    /// (Re)start the log stream: tag its lines with `generation`; empty
    /// `names` means every server.
    Follow {
        generation: u64,
        names: Vec<String>,
    },
    /// End the log stream (nothing selected).
    Unfollow,
}

/// Everything on screen.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Model {
    /// Sorted by name.
    pub(crate) rows: Vec<Row>,
    /// The selected server's name (stable while rows come and go).
    pub(crate) selected: Option<String>,
    pub(crate) filter: String,
    pub(crate) editing_filter: bool,
    pub(crate) help: bool,
    /// The log pane takes the whole screen.
    pub(crate) log_view: bool,
    pub(crate) log: VecDeque<LogNotification>,
    pub(crate) log_target: LogTarget,
    /// Follow the selected server (false: every server).
    follow_all: bool,
    pub(crate) log_generation: u64,
    /// The last event or outcome, for the footer.
    pub(crate) message: Option<String>,
    /// Set once xyd is gone; the dashboard stays up with this reason.
    pub(crate) lost: Option<String>,
}

impl Model {
    /// The first view, from the first sample; selects the first server.
    pub(crate) fn new(rows: Vec<Row>) -> Model {
        let mut m = Model {
            rows: Vec::new(),
            selected: None,
            filter: String::new(),
            editing_filter: false,
            help: false,
            log_view: false,
            log: VecDeque::new(),
            log_target: LogTarget::None,
            follow_all: false,
            log_generation: 0,
            message: None,
            lost: None,
        };
        m.set_rows(rows);
        m.selected = m.rows.first().map(|r| r.name.clone());
        m
    }

    /// The effects to run right after [`Model::new`] (the first log stream).
    pub(crate) fn start(&mut self) -> Vec<Effect> {
        self.retarget()
    }

    /// Rows that pass the filter (name or state contains it, any case).
    pub(crate) fn visible(&self) -> Vec<&Row> {
        let f = self.filter.to_lowercase();
        self.rows
            .iter()
            .filter(|r| {
                f.is_empty() || r.name.to_lowercase().contains(&f) || r.state.as_str().contains(&f)
            })
            .collect()
    }

    /// Index of the selected row among the visible ones.
    pub(crate) fn selected_index(&self) -> Option<usize> {
        let sel = self.selected.as_deref()?;
        self.visible().iter().position(|r| r.name == sel)
    }

    pub(crate) fn update(&mut self, msg: Msg) -> Vec<Effect> {
        match msg {
            Msg::Key(k) => self.key(k),
            Msg::Resize => Vec::new(),
            Msg::Sample(rows) => {
                self.set_rows(rows);
                self.reselect()
            }
            Msg::Event(e) => self.event(e),
            Msg::Log { generation, line } => {
                if generation == self.log_generation {
                    if self.log.len() == LOG_KEEP {
                        self.log.pop_front();
                    }
                    self.log.push_back(line);
                }
                Vec::new()
            }
            Msg::Done(text) => {
                self.message = Some(text);
                Vec::new()
            }
            Msg::Lost(why) => {
                self.lost = Some(why);
                Vec::new()
            }
            Msg::Signal => vec![Effect::Quit],
        }
    }

    fn set_rows(&mut self, mut rows: Vec<Row>) {
        rows.sort_by(|a, b| a.name.cmp(&b.name));
        self.rows = rows;
    }

    fn key(&mut self, k: Key) -> Vec<Effect> {
        if k == Key::Interrupt {
            return vec![Effect::Quit];
        }
        if self.editing_filter {
            match k {
                Key::Char(c) => self.filter.push(c),
                Key::Backspace => {
                    self.filter.pop();
                }
                Key::Enter => self.editing_filter = false,
                Key::Esc => {
                    self.filter.clear();
                    self.editing_filter = false;
                }
                _ => {}
            }
            return self.reselect();
        }
        if self.help {
            // Any key closes help; `q` still quits.
            self.help = false;
            return if k == Key::Char('q') {
                vec![Effect::Quit]
            } else {
                Vec::new()
            };
        }
        match k {
            Key::Char('q') => vec![Effect::Quit],
            Key::Char('?' | 'h') => {
                self.help = true;
                Vec::new()
            }
            Key::Up | Key::Char('k') => self.step(-1),
            Key::Down | Key::Char('j') => self.step(1),
            Key::PageUp => self.step(-10),
            Key::PageDown => self.step(10),
            Key::Home | Key::Char('g') => self.step(i64::MIN / 2),
            Key::End | Key::Char('G') => self.step(i64::MAX / 2),
            Key::Char('/') => {
                self.editing_filter = true;
                Vec::new()
            }
            Key::Esc if !self.filter.is_empty() => {
                self.filter.clear();
                self.reselect()
            }
            Key::Esc => {
                self.log_view = false;
                Vec::new()
            }
            Key::Enter | Key::Char('l') => {
                self.log_view = !self.log_view;
                Vec::new()
            }
            Key::Char('a') => {
                self.follow_all = !self.follow_all;
                self.retarget()
            }
            Key::Char('s') => self.control(Verb::Start),
            Key::Char('x') => self.control(Verb::Stop),
            Key::Char('r') => self.control(Verb::Restart),
            _ => Vec::new(),
        }
    }

    fn control(&mut self, verb: Verb) -> Vec<Effect> {
        let Some(name) = self.selected.clone() else {
            return Vec::new();
        };
        self.message = Some(format!("{} {name}…", verb.progressive()));
        vec![Effect::Control { verb, name }]
    }

    fn step(&mut self, by: i64) -> Vec<Effect> {
        let visible = self.visible();
        if visible.is_empty() {
            return Vec::new();
        }
        let cur = self.selected_index().unwrap_or(0);
        let last = visible.len() - 1;
        let next = i64::try_from(cur)
            .unwrap_or(0)
            .saturating_add(by)
            .clamp(0, i64::try_from(last).unwrap_or(0));
        let next = usize::try_from(next).unwrap_or(0);
        self.selected = Some(visible[next].name.clone());
        self.retarget()
    }

    /// Keeps the selection on a visible row (the first, if it went away).
    fn reselect(&mut self) -> Vec<Effect> {
        if self.selected_index().is_none() {
            self.selected = self.visible().first().map(|r| r.name.clone());
        }
        self.retarget()
    }

    /// Points the log stream at what should be followed, if that changed.
    fn retarget(&mut self) -> Vec<Effect> {
        let want = if self.follow_all {
            LogTarget::All
        } else {
            match &self.selected {
                Some(n) => LogTarget::One(n.clone()),
                None => LogTarget::None,
            }
        };
        if want == self.log_target {
            return Vec::new();
        }
        self.log_target = want;
        self.log.clear();
        self.log_generation += 1;
        match &self.log_target {
            LogTarget::None => vec![Effect::Unfollow],
            LogTarget::One(n) => vec![Effect::Follow {
                generation: self.log_generation,
                names: vec![n.clone()],
            }],
            LogTarget::All => vec![Effect::Follow {
                generation: self.log_generation,
                names: Vec::new(),
            }],
        }
    }

    fn event(&mut self, e: EventNotification) -> Vec<Effect> {
        let to = e.to.as_deref().unwrap_or_default();
        match e.kind {
            EventKind::State => {
                if let Ok(state) = serde_json::from_value(serde_json::Value::from(to)) {
                    let row = self.row_mut(&e.name);
                    row.state = state;
                    if state != ServerState::Running {
                        row.pid = None;
                        row.uptime_secs = None;
                        row.cpu_percent = None;
                        row.rss_bytes = None;
                    }
                    if state == ServerState::Restarting {
                        // The sample will confirm; the policy counted one.
                        row.restarts += 1;
                    }
                }
            }
            EventKind::Health => {
                if let Ok(h) = serde_json::from_value(serde_json::Value::from(to)) {
                    self.row_mut(&e.name).health = h;
                }
            }
            // A count when the listing changed; a state word (`flagged`…)
            // when an item was held back, which the next sample counts.
            EventKind::Tools => {
                if let Ok(n) = to.parse() {
                    self.row_mut(&e.name).tools = Some(n);
                }
            }
            EventKind::Config if to == config_change::REMOVED => {
                self.rows.retain(|r| r.name != e.name);
            }
            EventKind::Config => {
                self.row_mut(&e.name);
            }
        }
        let change = match &e.from {
            Some(from) => format!("{from} → {to}"),
            None => to.to_owned(),
        };
        let clock = crate::render::clock_ms(&e.ts).get(..8).unwrap_or_default();
        let mut text = format!("{clock} {} {} {change}", e.name, e.kind);
        if !e.reason.is_empty() {
            text.push_str(&format!(" ({})", e.reason));
        }
        self.message = Some(text);
        self.reselect()
    }

    fn row_mut(&mut self, name: &str) -> &mut Row {
        let i = match self.rows.binary_search_by(|r| r.name.as_str().cmp(name)) {
            Ok(i) => i,
            Err(i) => {
                self.rows.insert(i, Row::new(name));
                i
            }
        };
        &mut self.rows[i]
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use xy_core::protocol::LogStream;

    pub(crate) fn row(name: &str, state: ServerState) -> Row {
        Row {
            name: name.into(),
            state,
            health: HealthState::Unknown,
            pid: (state == ServerState::Running).then_some(4242),
            port: 8421,
            cpu_percent: Some(0.5),
            rss_bytes: Some(12 << 20),
            restarts: 0,
            uptime_secs: Some(125),
            tools: None,
            held: 0,
            calls: None,
        }
    }

    fn event(name: &str, kind: EventKind, from: Option<&str>, to: &str) -> Msg {
        Msg::Event(EventNotification {
            subscription_id: 1,
            name: name.into(),
            kind,
            ts: "2026-11-30T05:04:54.123Z".into(),
            from: from.map(str::to_owned),
            to: Some(to.into()),
            reason: "why".into(),
        })
    }

    fn line(name: &str, text: &str) -> LogNotification {
        LogNotification {
            subscription_id: 1,
            name: name.into(),
            stream: LogStream::Stdout,
            line: text.into(),
            ts: "2026-11-30T05:04:54.123Z".into(),
        }
    }

    fn model() -> Model {
        let mut m = Model::new(vec![
            row("web", ServerState::Running),
            row("api", ServerState::Running),
            row("db", ServerState::Failed),
        ]);
        assert_eq!(
            m.start(),
            [Effect::Follow {
                generation: 1,
                names: vec!["api".into()]
            }]
        );
        m
    }

    #[test]
    fn rows_are_sorted_and_the_first_is_selected() {
        let m = model();
        let names: Vec<_> = m.rows.iter().map(|r| r.name.as_str()).collect();
        assert_eq!(names, ["api", "db", "web"]);
        assert_eq!(m.selected.as_deref(), Some("api"));
    }

    #[test]
    fn moving_the_selection_follows_the_new_server() {
        let mut m = model();
        assert_eq!(
            m.update(Msg::Key(Key::Down)),
            [Effect::Follow {
                generation: 2,
                names: vec!["db".into()]
            }]
        );
        assert_eq!(m.update(Msg::Key(Key::Char('j'))).len(), 1);
        // At the bottom: no change, no new stream.
        assert!(m.update(Msg::Key(Key::Down)).is_empty());
        assert_eq!(m.selected.as_deref(), Some("web"));
        m.update(Msg::Key(Key::Home));
        assert_eq!(m.selected.as_deref(), Some("api"));
    }

    #[test]
    fn log_lines_of_an_old_stream_are_ignored() {
        let mut m = model();
        m.update(Msg::Log {
            generation: 1,
            line: line("api", "one"),
        });
        m.update(Msg::Key(Key::Down));
        m.update(Msg::Log {
            generation: 1,
            line: line("api", "late"),
        });
        assert!(m.log.is_empty(), "switching clears and ignores old lines");
        m.update(Msg::Log {
            generation: 2,
            line: line("db", "two"),
        });
        assert_eq!(m.log.len(), 1);
        for i in 0..LOG_KEEP + 5 {
            m.update(Msg::Log {
                generation: 2,
                line: line("db", &i.to_string()),
            });
        }
        assert_eq!(m.log.len(), LOG_KEEP);
    }

    #[test]
    fn keys_make_calls_on_the_selected_server() {
        let mut m = model();
        assert_eq!(
            m.update(Msg::Key(Key::Char('r'))),
            [Effect::Control {
                verb: Verb::Restart,
                name: "api".into()
            }]
        );
        assert_eq!(m.message.as_deref(), Some("restarting api…"));
        assert_eq!(
            m.update(Msg::Key(Key::Char('x'))),
            [Effect::Control {
                verb: Verb::Stop,
                name: "api".into()
            }]
        );
        assert_eq!(
            m.update(Msg::Key(Key::Char('s'))),
            [Effect::Control {
                verb: Verb::Start,
                name: "api".into()
            }]
        );
        assert_eq!(m.update(Msg::Key(Key::Char('q'))), [Effect::Quit]);
        assert_eq!(m.update(Msg::Key(Key::Interrupt)), [Effect::Quit]);
        assert_eq!(m.update(Msg::Signal), [Effect::Quit]);
    }

    #[test]
    fn filter_narrows_rows_and_moves_the_selection() {
        let mut m = model();
        m.update(Msg::Key(Key::Char('/')));
        assert!(m.editing_filter);
        // Typing `q` while filtering does not quit.
        assert_eq!(
            m.update(Msg::Key(Key::Char('w'))),
            [Effect::Follow {
                generation: 2,
                names: vec!["web".into()]
            }]
        );
        let names: Vec<_> = m.visible().iter().map(|r| r.name.clone()).collect();
        assert_eq!(names, ["web"]);
        m.update(Msg::Key(Key::Enter));
        assert!(!m.editing_filter);
        assert_eq!(m.filter, "w");
        // By state too.
        m.update(Msg::Key(Key::Esc));
        m.update(Msg::Key(Key::Char('/')));
        for c in "fail".chars() {
            m.update(Msg::Key(Key::Char(c)));
        }
        assert_eq!(m.selected.as_deref(), Some("db"));
        m.update(Msg::Key(Key::Esc));
        assert_eq!(m.visible().len(), 3);
        assert!(!m.editing_filter);
    }

    #[test]
    fn help_opens_and_any_key_closes_it() {
        let mut m = model();
        m.update(Msg::Key(Key::Char('?')));
        assert!(m.help);
        assert!(
            m.update(Msg::Key(Key::Char('r'))).is_empty(),
            "no restart from help"
        );
        assert!(!m.help);
        m.update(Msg::Key(Key::Char('?')));
        assert_eq!(m.update(Msg::Key(Key::Char('q'))), [Effect::Quit]);
    }

    #[test]
    fn log_view_and_follow_all() {
        let mut m = model();
        m.update(Msg::Key(Key::Char('l')));
        assert!(m.log_view);
        m.update(Msg::Key(Key::Esc));
        assert!(!m.log_view);
        assert_eq!(
            m.update(Msg::Key(Key::Char('a'))),
            [Effect::Follow {
                generation: 2,
                names: vec![]
            }]
        );
        assert_eq!(m.log_target, LogTarget::All);
        // Moving does not change an all-servers stream.
        assert!(m.update(Msg::Key(Key::Down)).is_empty());
    }

    #[test]
    fn events_update_rows_before_the_next_sample() {
        let mut m = model();
        m.update(event(
            "web",
            EventKind::State,
            Some("running"),
            "restarting",
        ));
        let web = m.rows.iter().find(|r| r.name == "web").unwrap();
        assert_eq!(web.state, ServerState::Restarting);
        assert_eq!((web.pid, web.restarts), (None, 1));
        assert_eq!(
            m.message.as_deref(),
            Some("05:04:54 web state running → restarting (why)")
        );
        m.update(event("web", EventKind::Health, Some("starting"), "healthy"));
        assert_eq!(m.rows[2].health, HealthState::Healthy);
        m.update(event("web", EventKind::Tools, Some("3"), "4"));
        assert_eq!(m.rows[2].tools, Some(4));
        // A held-back item's event names its state: the count stays.
        m.update(event("web", EventKind::Tools, None, "flagged"));
        assert_eq!(m.rows[2].tools, Some(4));

        // Reload: a new server appears, a removed one goes (and the
        // selection moves off it).
        m.update(event("new", EventKind::Config, None, "added"));
        assert!(m.rows.iter().any(|r| r.name == "new"));
        let fx = m.update(event("api", EventKind::Config, None, "removed"));
        assert!(m.rows.iter().all(|r| r.name != "api"));
        assert_eq!(m.selected.as_deref(), Some("db"));
        assert_eq!(
            fx,
            [Effect::Follow {
                generation: 2,
                names: vec!["db".into()]
            }]
        );
    }

    #[test]
    fn a_sample_replaces_rows_and_keeps_the_selection() {
        let mut m = model();
        m.update(Msg::Key(Key::Down));
        let mut db = row("db", ServerState::Running);
        db.restarts = 3;
        assert!(
            m.update(Msg::Sample(vec![row("api", ServerState::Running), db]))
                .is_empty()
        );
        assert_eq!(m.selected.as_deref(), Some("db"));
        assert_eq!(m.rows[1].restarts, 3);
        // The selected server vanished: the first one is selected.
        let fx = m.update(Msg::Sample(vec![row("api", ServerState::Running)]));
        assert_eq!(m.selected.as_deref(), Some("api"));
        assert_eq!(fx.len(), 1);
        // Nothing left.
        assert_eq!(m.update(Msg::Sample(vec![])), [Effect::Unfollow]);
        assert_eq!(m.selected, None);
        assert!(m.update(Msg::Key(Key::Char('r'))).is_empty());
    }
}
