//! Who may use the console (SPEC §28, D270): one-time codes handed out on
//! the control socket (`console_code`), each exchanged once, within
//! [`CONSOLE_CODE_TTL_SECS`], for a session; a session is two secrets, a
//! cookie (`HttpOnly; SameSite=Strict`, so the page's script never sees
//! it and no other site's request carries it) and a token the page keeps
//! in its tab's `sessionStorage` and sends in a header. Cookies are
//! scoped by host, not port: another local web server the browser visits
//! on `127.0.0.1` receives the cookie; without the token it is useless.
//! Secrets are compared in constant time and kept only as SHA-256 digests.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use base64::Engine as _;
use sha2::{Digest, Sha256};
use xy_core::protocol::CONSOLE_CODE_TTL_SECS;

/// The session cookie's name.
pub(crate) const COOKIE: &str = "xy_console";
/// Codes waiting to be exchanged at once; the oldest goes first past it.
const MAX_CODES: usize = 16;
/// Sessions at once (pages logged in); the least recently used goes first.
const MAX_SESSIONS: usize = 16;
/// A session unused this long is gone (the page asks for `xyctl ui` again).
const SESSION_IDLE: Duration = Duration::from_secs(12 * 3600);

type Hash = [u8; 32];

/// The codes and sessions of one console.
#[derive(Debug)]
pub(crate) struct Sessions {
    inner: Mutex<Inner>,
    /// How long a code may wait ([`code_ttl`]).
    ttl: Duration,
}

impl Default for Sessions {
    fn default() -> Self {
        Sessions {
            inner: Mutex::default(),
            ttl: Duration::from_secs(CONSOLE_CODE_TTL_SECS),
        }
    }
}

/// [`CONSOLE_CODE_TTL_SECS`]; debug builds take `XY_TEST_CONSOLE_CODE_TTL_MS`
/// (lower only), so the attack suite sees a code expire without waiting
/// a minute.
pub(crate) fn code_ttl() -> Duration {
    let full = Duration::from_secs(CONSOLE_CODE_TTL_SECS);
    #[cfg(debug_assertions)]
    if let Some(ms) = std::env::var("XY_TEST_CONSOLE_CODE_TTL_MS")
        .ok()
        .and_then(|v| v.parse::<u64>().ok())
    {
        return Duration::from_millis(ms).min(full);
    }
    full
}

#[derive(Debug, Default)]
struct Inner {
    /// Code digest → when it was issued.
    codes: HashMap<Hash, Instant>,
    /// Cookie digest → the session.
    sessions: HashMap<Hash, Session>,
}

#[derive(Debug)]
struct Session {
    token: Hash,
    used: Instant,
}

/// Why a code was not exchanged.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub(crate) enum CodeError {
    #[error("this code is unknown or was used already: run `xyctl ui` again")]
    Unknown,
    #[error("this code expired (codes live {CONSOLE_CODE_TTL_SECS} s): run `xyctl ui` again")]
    Expired,
}

/// A new session: the cookie's value and the page's token.
#[derive(Debug)]
pub(crate) struct NewSession {
    pub(crate) cookie: String,
    pub(crate) token: String,
}

impl Sessions {
    /// Sessions whose codes live `ttl` (at most [`CONSOLE_CODE_TTL_SECS`]).
    pub(crate) fn new(ttl: Duration) -> Sessions {
        Sessions {
            ttl: ttl.min(Duration::from_secs(CONSOLE_CODE_TTL_SECS)),
            ..Sessions::default()
        }
    }

    /// A fresh one-time code.
    pub(crate) fn issue_code(&self) -> String {
        let code = secret();
        let mut inner = self.lock();
        let now = Instant::now();
        let ttl = self.ttl;
        inner.codes.retain(|_, at| now.duration_since(*at) < ttl);
        if inner.codes.len() >= MAX_CODES
            && let Some(oldest) = inner
                .codes
                .iter()
                .min_by_key(|(_, at)| **at)
                .map(|(k, _)| *k)
        {
            inner.codes.remove(&oldest);
        }
        inner.codes.insert(digest(&code), now);
        code
    }

    /// Exchanges `code` (once) for a session.
    pub(crate) fn exchange(&self, code: &str) -> Result<NewSession, CodeError> {
        let mut inner = self.lock();
        let issued = inner
            .codes
            .remove(&digest(code))
            .ok_or(CodeError::Unknown)?;
        if issued.elapsed() >= self.ttl {
            return Err(CodeError::Expired);
        }
        let (cookie, token) = (secret(), secret());
        let now = Instant::now();
        inner
            .sessions
            .retain(|_, s| now.duration_since(s.used) < SESSION_IDLE);
        if inner.sessions.len() >= MAX_SESSIONS
            && let Some(lru) = inner
                .sessions
                .iter()
                .min_by_key(|(_, s)| s.used)
                .map(|(k, _)| *k)
        {
            inner.sessions.remove(&lru);
        }
        inner.sessions.insert(
            digest(&cookie),
            Session {
                token: digest(&token),
                used: now,
            },
        );
        Ok(NewSession { cookie, token })
    }

    /// Whether `cookie` and `token` are one live session's (and marks it
    /// used).
    pub(crate) fn check(&self, cookie: &str, token: &str) -> bool {
        let mut inner = self.lock();
        let Some(s) = inner.sessions.get_mut(&digest(cookie)) else {
            return false;
        };
        if s.used.elapsed() >= SESSION_IDLE || !same(&s.token, &digest(token)) {
            return false;
        }
        s.used = Instant::now();
        true
    }

    #[cfg(test)]
    fn age_codes(&self, by: Duration) {
        for at in self.lock().codes.values_mut() {
            *at = at.checked_sub(by).expect("the clock is past the age");
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// The value of cookie `name` in a `Cookie` header.
pub(crate) fn cookie_value<'a>(header: &'a str, name: &str) -> Option<&'a str> {
    header.split(';').find_map(|kv| {
        let (k, v) = kv.trim().split_once('=')?;
        (k == name).then_some(v)
    })
}

/// 32 bytes from the kernel, base64url.
fn secret() -> String {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes).expect("the kernel's random source works");
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}

fn digest(s: &str) -> Hash {
    Sha256::digest(s.as_bytes()).into()
}

/// Constant-time equality of two digests.
fn same(a: &Hash, b: &Hash) -> bool {
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_code_works_once_and_makes_a_two_part_session() {
        let s = Sessions::default();
        let code = s.issue_code();
        let session = s.exchange(&code).unwrap();
        assert_eq!(s.exchange(&code).unwrap_err(), CodeError::Unknown);
        assert!(s.check(&session.cookie, &session.token));
        assert!(!s.check(&session.cookie, &session.cookie));
        assert!(!s.check(&session.token, &session.token));
        assert!(!s.check(&session.cookie, ""));
    }

    #[test]
    fn a_code_expires() {
        let s = Sessions::default();
        let code = s.issue_code();
        s.age_codes(Duration::from_secs(CONSOLE_CODE_TTL_SECS));
        assert_eq!(s.exchange(&code).unwrap_err(), CodeError::Expired);
    }

    #[test]
    fn cookies_are_found_by_name() {
        let h = "a=1; xy_console=abc; b=2";
        assert_eq!(cookie_value(h, COOKIE), Some("abc"));
        assert_eq!(cookie_value("xy_consolex=1", COOKIE), None);
    }
}
