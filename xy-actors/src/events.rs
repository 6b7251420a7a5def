//! The engine's event bus (SPEC §15): one broadcast channel the engine
//! creates, which ServerActors publish to when they record a transition or a
//! health change and `reload` publishes config changes to. Subscribers read
//! it through [`EventSubscription`]; nothing polls to produce an event.

use std::sync::Arc;

use tokio::sync::broadcast;
use xy_core::protocol::EventKind;

/// Events a subscriber may fall behind before it is dropped (`Lagged`).
pub(crate) const DEFAULT_EVENT_BUFFER: usize = 1024;

/// One change of one server, as the engine saw it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EngineEvent {
    /// The server that changed.
    pub name: Arc<str>,
    /// What kind of change.
    pub kind: EventKind,
    /// When (RFC 3339 UTC, ms): for state and health changes the very string
    /// recorded in the server's history, so `status` and the stream agree.
    pub ts: String,
    /// The value before, if there is one.
    pub from: Option<String>,
    /// The value after.
    pub to: Option<String>,
    /// Why.
    pub reason: String,
}

/// The publishing side; cloned into every ServerActor. Publishing never
/// waits: with no subscriber it costs a counter read, and a slow subscriber
/// only loses its own place in the ring.
#[derive(Debug, Clone)]
pub(crate) struct EventBus {
    tx: broadcast::Sender<Arc<EngineEvent>>,
}

impl EventBus {
    pub(crate) fn new(capacity: usize) -> EventBus {
        let (tx, _) = broadcast::channel(capacity.max(1));
        EventBus { tx }
    }

    pub(crate) fn publish(&self, ev: EngineEvent) {
        if self.tx.receiver_count() > 0 {
            // An error only means the last subscriber left meanwhile.
            let _ = self.tx.send(Arc::new(ev));
        }
    }

    pub(crate) fn subscribe(&self, names: Vec<String>) -> EventSubscription {
        EventSubscription {
            rx: self.tx.subscribe(),
            names,
        }
    }
}

/// Announces what a `reload` is about to do: one `config` event per added,
/// removed and changed server, before any of them is stopped or started, so
/// a stream reads "config changed" and then the state changes it caused.
pub(crate) fn publish_reload(bus: &EventBus, diff: &crate::config_actor::ConfigDiff) {
    use xy_core::protocol::config_change::{ADDED, CHANGED, REMOVED};
    let ts = xy_core::time::now_rfc3339();
    let event = |name: &str, to: &str, reason: String| EngineEvent {
        name: name.into(),
        kind: EventKind::Config,
        ts: ts.clone(),
        from: None,
        to: Some(to.to_owned()),
        reason,
    };
    for cfg in &diff.added {
        let file = cfg.source.display();
        bus.publish(event(&cfg.name, ADDED, format!("reload: {file} added")));
    }
    for name in &diff.removed {
        bus.publish(event(
            name,
            REMOVED,
            "reload: config file removed".to_owned(),
        ));
    }
    for cfg in &diff.changed {
        let file = cfg.source.display();
        bus.publish(event(&cfg.name, CHANGED, format!("reload: {file} changed")));
    }
}

/// What [`EventSubscription::recv`] yields.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EventItem {
    /// The next event for the subscribed servers.
    Event(Arc<EngineEvent>),
    /// The subscriber fell more than the bus's capacity behind; it has been
    /// dropped and nothing follows.
    Lagged,
}

/// A live event stream, filtered by server name. Dropping it unsubscribes.
#[derive(Debug)]
pub struct EventSubscription {
    rx: broadcast::Receiver<Arc<EngineEvent>>,
    /// Empty: every server.
    names: Vec<String>,
}

impl EventSubscription {
    /// The next event of a subscribed server; `None` once the engine is gone.
    /// Cancel-safe (an event is never lost by dropping the future).
    pub async fn recv(&mut self) -> Option<EventItem> {
        loop {
            match self.rx.recv().await {
                Ok(ev) if self.wants(&ev.name) => return Some(EventItem::Event(ev)),
                Ok(_) => {}
                Err(broadcast::error::RecvError::Lagged(_)) => return Some(EventItem::Lagged),
                Err(broadcast::error::RecvError::Closed) => return None,
            }
        }
    }

    /// An event that is already waiting, without waiting for one (to drain
    /// the stream at shutdown).
    pub fn try_recv(&mut self) -> Option<EventItem> {
        loop {
            match self.rx.try_recv() {
                Ok(ev) if self.wants(&ev.name) => return Some(EventItem::Event(ev)),
                Ok(_) => {}
                Err(broadcast::error::TryRecvError::Lagged(_)) => return Some(EventItem::Lagged),
                Err(_) => return None,
            }
        }
    }

    /// The names this stream is limited to (empty: every server).
    pub fn names(&self) -> &[String] {
        &self.names
    }

    fn wants(&self, name: &str) -> bool {
        self.names.is_empty() || self.names.iter().any(|n| n == name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(name: &str, to: &str) -> EngineEvent {
        EngineEvent {
            name: name.into(),
            kind: EventKind::State,
            ts: "2026-11-30T05:04:54.123Z".into(),
            from: Some("starting".into()),
            to: Some(to.into()),
            reason: String::new(),
        }
    }

    #[tokio::test]
    async fn filters_by_name_in_order() {
        let bus = EventBus::new(16);
        let mut all = bus.subscribe(Vec::new());
        let mut only_b = bus.subscribe(vec!["b".into()]);
        bus.publish(ev("a", "running"));
        bus.publish(ev("b", "running"));
        bus.publish(ev("b", "stopping"));
        for want in [("a", "running"), ("b", "running"), ("b", "stopping")] {
            match all.recv().await {
                Some(EventItem::Event(e)) => {
                    assert_eq!((&*e.name, e.to.as_deref()), (want.0, Some(want.1)));
                }
                other => panic!("{other:?}"),
            }
        }
        for want in ["running", "stopping"] {
            match only_b.recv().await {
                Some(EventItem::Event(e)) => assert_eq!(e.to.as_deref(), Some(want)),
                other => panic!("{other:?}"),
            }
        }
    }

    #[tokio::test]
    async fn a_slow_subscriber_lags_without_blocking_the_publisher() {
        let bus = EventBus::new(4);
        let mut slow = bus.subscribe(Vec::new());
        let mut fast = bus.subscribe(Vec::new());
        for i in 0..10 {
            bus.publish(ev("a", &i.to_string()));
            // The fast one keeps up.
            assert!(matches!(fast.recv().await, Some(EventItem::Event(_))));
        }
        assert_eq!(slow.recv().await, Some(EventItem::Lagged));
    }

    #[tokio::test]
    async fn closed_bus_ends_the_stream() {
        let bus = EventBus::new(4);
        let mut sub = bus.subscribe(Vec::new());
        drop(bus);
        assert_eq!(sub.recv().await, None);
    }

    #[test]
    fn publishing_without_subscribers_is_free() {
        let bus = EventBus::new(4);
        bus.publish(ev("a", "running"));
        let mut sub = bus.subscribe(Vec::new());
        // Nothing from before the subscription.
        assert!(sub.rx.try_recv().is_err());
    }
}
