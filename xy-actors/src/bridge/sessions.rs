//! The 2025 sessions one endpoint has minted (SPEC §18): a session lives
//! until `DELETE`, until [`IDLE`] passes without a request in it, or until
//! it is the least recently used of [`MAX_SESSIONS`] and a new one is
//! minted. Pure data on tokio's clock (a paused clock tests it); the
//! BridgeActor ends the streams of what this drops.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use tokio::time::Instant;

/// A session without a request for this long is gone.
pub(crate) const IDLE: Duration = Duration::from_secs(24 * 60 * 60);
/// Live sessions per endpoint, at most.
pub(crate) const MAX_SESSIONS: usize = 1000;

/// What a 2025 client said of itself in its `initialize`.
#[derive(Debug, Default)]
struct Known {
    /// Its `clientInfo`, named in its call records (SPEC §20).
    client: Option<Arc<str>>,
    /// Its `capabilities`: what a child may ask of it (SPEC §19).
    caps: Option<Arc<Value>>,
}

/// Session id → when it was last used.
#[derive(Debug)]
pub(crate) struct Sessions {
    last_use: HashMap<String, Instant>,
    /// What the client that opened a session said of itself in its
    /// `initialize`. Kept beside `last_use`, keyed alike, dropped with it.
    clients: HashMap<String, Known>,
    /// The 2026 `_meta` envelope (`clientCapabilities`, `clientInfo`) a
    /// session's `initialize` declared, for its requests to a 2026-only
    /// child (SPEC §19). Kept and dropped like `clients`.
    envelopes: HashMap<String, Arc<Value>>,
    idle: Duration,
    cap: usize,
}

impl Default for Sessions {
    fn default() -> Sessions {
        Sessions::new(IDLE, MAX_SESSIONS)
    }
}

impl Sessions {
    pub(crate) fn new(idle: Duration, cap: usize) -> Sessions {
        Sessions {
            last_use: HashMap::new(),
            clients: HashMap::new(),
            envelopes: HashMap::new(),
            idle,
            cap: cap.max(1),
        }
    }

    /// Adds a fresh session; returns the one evicted to make room, if any.
    pub(crate) fn insert(&mut self, id: String, now: Instant) -> Option<String> {
        let evicted = if self.last_use.len() >= self.cap {
            // A full table is rare and small: a scan beats keeping an order.
            let oldest = self
                .last_use
                .iter()
                .min_by_key(|(_, t)| **t)
                .map(|(k, _)| k.clone());
            if let Some(k) = &oldest {
                self.forget(k);
            }
            oldest
        } else {
            None
        };
        self.last_use.insert(id, now);
        evicted
    }

    /// A request in session `id`: whether it is live (then its idle time
    /// starts again). An expired one is forgotten here.
    pub(crate) fn touch(&mut self, id: &str, now: Instant) -> bool {
        let Some(t) = self.last_use.get_mut(id) else {
            return false;
        };
        if now.saturating_duration_since(*t) >= self.idle {
            self.forget(id);
            return false;
        }
        *t = now;
        true
    }

    /// Whether `id` is live, without using it.
    pub(crate) fn contains(&self, id: &str, now: Instant) -> bool {
        self.last_use
            .get(id)
            .is_some_and(|t| now.saturating_duration_since(*t) < self.idle)
    }

    /// Ends `id`; whether it was live.
    pub(crate) fn remove(&mut self, id: &str, now: Instant) -> bool {
        self.forget(id)
            .is_some_and(|t| now.saturating_duration_since(t) < self.idle)
    }

    /// Drops `id` and what is kept beside it; when it was last used.
    fn forget(&mut self, id: &str) -> Option<Instant> {
        self.clients.remove(id);
        self.envelopes.remove(id);
        self.last_use.remove(id)
    }

    /// Forgets the sessions idle for too long; returns them.
    pub(crate) fn expire(&mut self, now: Instant) -> Vec<String> {
        let idle = self.idle;
        let gone: Vec<String> = self
            .last_use
            .iter()
            .filter(|(_, t)| now.saturating_duration_since(**t) >= idle)
            .map(|(k, _)| k.clone())
            .collect();
        for k in &gone {
            self.forget(k);
        }
        gone
    }

    pub(crate) fn clear(&mut self) {
        self.last_use.clear();
        self.clients.clear();
        self.envelopes.clear();
    }

    /// Keeps the 2026 envelope of a live session's requests.
    pub(crate) fn set_envelope(&mut self, id: &str, envelope: Value) {
        if self.last_use.contains_key(id) {
            self.envelopes.insert(id.to_owned(), Arc::new(envelope));
        }
    }

    /// The 2026 envelope of a session's requests, if it has one.
    pub(crate) fn envelope(&self, id: &str) -> Option<Arc<Value>> {
        self.envelopes.get(id).cloned()
    }

    /// Names the client of a live session.
    pub(crate) fn set_client(&mut self, id: &str, client: Arc<str>) {
        if self.last_use.contains_key(id) {
            self.clients.entry(id.to_owned()).or_default().client = Some(client);
        }
    }

    /// The client of a session, if it named itself.
    pub(crate) fn client(&self, id: &str) -> Option<&Arc<str>> {
        self.clients.get(id).and_then(|k| k.client.as_ref())
    }

    /// Keeps the capabilities a live session's client declared.
    pub(crate) fn set_caps(&mut self, id: &str, caps: Value) {
        if self.last_use.contains_key(id) {
            self.clients.entry(id.to_owned()).or_default().caps = Some(Arc::new(caps));
        }
    }

    /// The capabilities a session's client declared (`None`: unknown).
    pub(crate) fn caps(&self, id: &str) -> Option<Arc<Value>> {
        self.clients.get(id).and_then(|k| k.caps.clone())
    }

    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.last_use.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_session_expires_after_a_day_without_a_request() {
        let mut s = Sessions::default();
        s.insert("a".into(), Instant::now());
        s.insert("b".into(), Instant::now());
        tokio::time::advance(IDLE - Duration::from_secs(1)).await;
        assert!(s.touch("a", Instant::now()), "used just in time");
        tokio::time::advance(Duration::from_secs(1)).await;
        assert!(!s.contains("b", Instant::now()), "b idled a day");
        assert_eq!(s.expire(Instant::now()), vec!["b".to_owned()]);
        tokio::time::advance(IDLE - Duration::from_secs(2)).await;
        assert!(s.touch("a", Instant::now()), "a's day started again");
        tokio::time::advance(IDLE).await;
        assert!(!s.touch("a", Instant::now()));
        assert_eq!(s.len(), 0, "an expired session is forgotten when used");
    }

    #[tokio::test(start_paused = true)]
    async fn the_least_recently_used_goes_first_when_full() {
        let mut s = Sessions::new(IDLE, 3);
        for id in ["a", "b", "c"] {
            assert_eq!(s.insert(id.into(), Instant::now()), None);
            tokio::time::advance(Duration::from_secs(1)).await;
        }
        // `a` is the oldest minted, but used last.
        assert!(s.touch("a", Instant::now()));
        tokio::time::advance(Duration::from_secs(1)).await;
        assert_eq!(s.insert("d".into(), Instant::now()), Some("b".into()));
        assert_eq!(s.insert("e".into(), Instant::now()), Some("c".into()));
        assert_eq!(s.len(), 3);
        let now = Instant::now();
        assert!(s.contains("a", now) && s.contains("d", now) && s.contains("e", now));
        assert!(!s.remove("b", now), "an evicted session is unknown");
        s.set_client("a", "c 1".into());
        s.set_client("gone", "c 1".into());
        assert_eq!(s.client("a").map(|c| &**c), Some("c 1"));
        assert_eq!(s.client("gone"), None, "only a live session has a client");
        assert!(s.remove("a", now));
        assert_eq!(s.client("a"), None, "dropped with its session");
    }

    #[test]
    fn a_full_default_table_holds_a_thousand() {
        let mut s = Sessions::default();
        let now = Instant::now();
        for i in 0..MAX_SESSIONS {
            assert_eq!(s.insert(format!("s{i}"), now), None);
        }
        assert!(s.insert("new".into(), now).is_some());
        assert_eq!(s.len(), MAX_SESSIONS);
    }
}
