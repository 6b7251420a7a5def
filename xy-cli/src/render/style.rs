//! The one colour gate: whether to emit ANSI styling, decided once from
//! `--color`, `NO_COLOR` and whether the stream is a terminal.

use xy_core::protocol::ServerState;

use crate::cli::ColorChoice;

/// How to style text for one output stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Style {
    /// Emit ANSI colour codes.
    pub(crate) color: bool,
}

/// The few colours xyctl uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Paint {
    Green,
    Yellow,
    Red,
    Cyan,
    Magenta,
    Blue,
    Dim,
    Bold,
}

impl Paint {
    fn code(self) -> &'static str {
        match self {
            Paint::Green => "32",
            Paint::Yellow => "33",
            Paint::Red => "1;31",
            Paint::Cyan => "36",
            Paint::Magenta => "35",
            Paint::Blue => "34",
            Paint::Dim => "2",
            Paint::Bold => "1",
        }
    }

    /// The colour of a state (green running, yellow in transit, red failed).
    pub(crate) fn for_state(state: ServerState) -> Option<Paint> {
        match state {
            ServerState::Running => Some(Paint::Green),
            ServerState::Starting | ServerState::Restarting | ServerState::Stopping => {
                Some(Paint::Yellow)
            }
            ServerState::Failed => Some(Paint::Red),
            ServerState::Stopped => Some(Paint::Dim),
            ServerState::Idle => None,
        }
    }

    /// Colours cycled through for server-name prefixes in `logs`.
    pub(crate) const PREFIXES: [Paint; 5] = [
        Paint::Cyan,
        Paint::Yellow,
        Paint::Green,
        Paint::Magenta,
        Paint::Blue,
    ];
}

impl Style {
    /// Plain text.
    pub(crate) const PLAIN: Style = Style { color: false };
    /// Coloured text.
    #[cfg(test)]
    pub(crate) const COLOR: Style = Style { color: true };

    /// Decides for one stream. `always` wins over `NO_COLOR` (an explicit
    /// flag beats an ambient variable, as no-color.org allows); `auto`
    /// colours only a terminal, and only when `NO_COLOR` is unset or empty.
    pub(crate) fn decide(choice: ColorChoice, is_tty: bool, no_color: Option<&str>) -> Style {
        let no_color = no_color.is_some_and(|v| !v.is_empty());
        Style {
            color: match choice {
                ColorChoice::Always => true,
                ColorChoice::Never => false,
                ColorChoice::Auto => is_tty && !no_color,
            },
        }
    }

    /// `text` in `paint`, or unchanged without colour.
    pub(crate) fn paint(&self, text: &str, paint: Paint) -> String {
        if self.color {
            format!("\x1b[{}m{text}\x1b[0m", paint.code())
        } else {
            text.to_owned()
        }
    }

    /// A state name in its colour.
    pub(crate) fn state(&self, state: ServerState) -> String {
        match Paint::for_state(state) {
            Some(p) => self.paint(state.as_str(), p),
            None => state.as_str().to_owned(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decision_table() {
        use ColorChoice::*;
        let cases = [
            (Auto, true, None, true),
            (Auto, false, None, false),
            (Auto, true, Some("1"), false),
            (Auto, true, Some(""), true),
            (Never, true, None, false),
            (Always, false, None, true),
            (Always, false, Some("1"), true),
        ];
        for (choice, tty, nc, want) in cases {
            assert_eq!(
                Style::decide(choice, tty, nc).color,
                want,
                "{choice:?} tty={tty} NO_COLOR={nc:?}"
            );
        }
    }

    #[test]
    fn paint() {
        assert_eq!(Style::PLAIN.paint("x", Paint::Red), "x");
        assert_eq!(Style::COLOR.paint("x", Paint::Red), "\x1b[1;31mx\x1b[0m");
        assert_eq!(
            Style::COLOR.state(ServerState::Running),
            "\x1b[32mrunning\x1b[0m"
        );
    }
}
