//! `xyctl auth status` and the end of `xyctl auth login` (SPEC §23): per
//! server `logged in` (issuer, scopes, expiry), `not logged in` or `login
//! needed` with the command that fixes it. Never a token (the daemon sends
//! none).

use std::fmt::Write as _;

use xy_core::protocol::{AuthGrantInfo, AuthState, AuthStatusResult};

use super::{Paint, Style, date_time, render_rows};

/// The table, then one line per server that needs a login, saying why.
pub(crate) fn render_auth_status(r: &AuthStatusResult, style: &Style) -> String {
    if r.servers.is_empty() {
        return "no server uses OAuth (`auth { oauth }` in a `url` server's config)\n".to_owned();
    }
    let rows: Vec<Vec<String>> = r
        .servers
        .iter()
        .map(|s| {
            let paint = match s.state {
                AuthState::LoggedIn => Paint::Green,
                AuthState::NotLoggedIn => Paint::Dim,
                AuthState::LoginNeeded => Paint::Red,
            };
            let mut state = style.paint(s.state.label(), paint);
            if s.login_pending {
                state.push_str(" (login pending)");
            }
            let g = s.grant.as_ref();
            vec![
                s.name.clone(),
                state,
                g.and_then(|g| g.issuer.clone())
                    .unwrap_or_else(|| "-".into()),
                g.map(scopes).unwrap_or_else(|| "-".into()),
                g.map(expiry).unwrap_or_else(|| "-".into()),
            ]
        })
        .collect();
    let mut out = render_rows(
        &["SERVER", "STATE", "ISSUER", "SCOPES", "EXPIRES"],
        &rows,
        style,
    );
    if let Some(store) = r
        .servers
        .first()
        .map(|s| &s.store)
        .filter(|s| !s.is_empty())
    {
        let _ = writeln!(out, "grants are kept in the {store}");
    }
    for s in &r.servers {
        if s.state == AuthState::LoginNeeded {
            let why = s.reason.as_deref().unwrap_or("the grant no longer works");
            let _ = writeln!(out, "{}: {why}: xyctl auth login {}", s.name, s.name);
        } else if s.state == AuthState::NotLoggedIn {
            let _ = writeln!(
                out,
                "{}: not logged in: xyctl auth login {}",
                s.name, s.name
            );
        }
    }
    out
}

/// The line `auth login` ends with.
pub(crate) fn render_login_done(name: &str, g: &AuthGrantInfo, style: &Style) -> String {
    format!(
        "{} to {name} (issuer {}, scopes {}, access token expires {})\n",
        style.paint("logged in", Paint::Green),
        g.issuer.as_deref().unwrap_or("unknown"),
        scopes(g),
        expiry(g)
    )
}

fn scopes(g: &AuthGrantInfo) -> String {
    if g.scopes.is_empty() {
        "-".into()
    } else {
        g.scopes.join(" ")
    }
}

fn expiry(g: &AuthGrantInfo) -> String {
    let when = g.expires_at.as_deref().map_or_else(
        || "never said".to_owned(),
        |t| format!("{} UTC", date_time(t)),
    );
    if g.refreshable {
        format!("{when}, refreshed ahead")
    } else {
        when
    }
}

#[cfg(test)]
mod tests {
    use xy_core::protocol::AuthStatusEntry;

    use super::*;

    #[test]
    fn states_and_hints() {
        let grant = AuthGrantInfo {
            issuer: Some("https://auth.example".into()),
            scopes: vec!["read".into(), "write".into()],
            expires_at: Some("2026-12-02T10:00:00.000Z".into()),
            refreshable: true,
        };
        let entry = |name: &str, state, grant: Option<AuthGrantInfo>, reason: Option<&str>| {
            AuthStatusEntry {
                name: name.into(),
                url: "https://x/mcp".into(),
                state,
                grant,
                reason: reason.map(str::to_owned),
                missing_scopes: vec![],
                login_pending: false,
                store: "Secret Service (attributes service=xy-oauth account=<server>)".into(),
            }
        };
        let r = AuthStatusResult {
            servers: vec![
                entry("a", AuthState::LoggedIn, Some(grant.clone()), None),
                entry("b", AuthState::NotLoggedIn, None, None),
                entry(
                    "c",
                    AuthState::LoginNeeded,
                    Some(grant),
                    Some("refresh refused"),
                ),
            ],
        };
        let out = render_auth_status(&r, &Style::PLAIN);
        assert!(out.contains("logged in"), "{out}");
        assert!(
            out.contains("grants are kept in the Secret Service (attributes service=xy-oauth"),
            "{out}"
        );
        assert!(out.contains("https://auth.example"), "{out}");
        assert!(out.contains("read write"), "{out}");
        assert!(
            out.contains("b: not logged in: xyctl auth login b"),
            "{out}"
        );
        assert!(
            out.contains("c: refresh refused: xyctl auth login c"),
            "{out}"
        );
        let none = render_auth_status(&AuthStatusResult { servers: vec![] }, &Style::PLAIN);
        assert!(none.contains("no server uses OAuth"));
    }
}
