//! The queue of one HTTP exchange (SPEC §24 "Bounded children"): what the
//! BridgeActor has routed to a client and the client has not read yet.
//! Answers always have room; the child's requests to the client have room
//! or are refused to the child; notifications are queued within a count
//! and a byte budget (per exchange, and per bridge across its exchanges)
//! or dropped and counted (`status`'s `dropped_notifications`); a
//! `list_changed` already waiting in a queue absorbs the next one of its
//! kind. Nothing the child says waits in xyd beyond these bounds.

use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::task::{Context, Poll};

use serde_json::Value;
use tokio::sync::mpsc;

use super::Out;

/// Messages one exchange's queue holds at most.
pub(crate) const OUTBOX: usize = 256;
/// Of those, notifications at most: the rest is kept for requests and
/// answers.
pub(crate) const NOTES: usize = 128;
/// Slots only an answer may take: a request to the client is refused when
/// it would leave fewer.
const ANSWER_ROOM: usize = 8;
/// Bytes of notifications and requests one exchange's queue holds at most
/// (one bigger message is let into an empty queue).
pub(crate) const EXCHANGE_BYTES: usize = 1024 * 1024;
/// Bytes of notifications and requests all exchanges of one bridge hold
/// at most.
pub(crate) const BRIDGE_BYTES: usize = 8 * 1024 * 1024;

/// One bridge's queue totals, shared by its exchanges (its own port and
/// the gateway) and read by its ServerActor for `status`.
#[derive(Debug, Default)]
pub(crate) struct Flow {
    /// Bytes of notifications and requests queued in every exchange.
    queued: AtomicUsize,
    /// Notifications dropped on a full queue since the bridge started.
    dropped: AtomicU64,
}

impl Flow {
    /// Notifications dropped so far.
    pub(crate) fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }

    /// Bytes of notifications queued now.
    #[cfg(test)]
    pub(crate) fn queued(&self) -> usize {
        self.queued.load(Ordering::Relaxed)
    }
}

/// What one exchange's queue holds besides the messages themselves.
#[derive(Debug)]
struct Queue {
    flow: Arc<Flow>,
    /// Notifications and requests queued (answers are not counted).
    notes: AtomicUsize,
    bytes: AtomicUsize,
    /// A `list_changed` of each kind ([`changed_kind`]) waits in the queue.
    changed: [AtomicBool; 3],
}

/// Why a message was not queued.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Refused {
    /// The client went away.
    Closed,
    /// A notification: dropped and counted.
    Dropped,
    /// A request to the client: no room (the child is told).
    Full,
}

/// The sending side of an exchange's queue.
#[derive(Debug, Clone)]
pub(crate) struct Outbox {
    tx: mpsc::Sender<Out>,
    q: Arc<Queue>,
}

/// The receiving side: the HTTP response reads it.
#[derive(Debug)]
pub(crate) struct Inbox {
    rx: mpsc::Receiver<Out>,
    q: Arc<Queue>,
}

/// A new exchange's queue, counted in `flow`.
pub(crate) fn channel(flow: &Arc<Flow>) -> (Outbox, Inbox) {
    let (tx, rx) = mpsc::channel(OUTBOX);
    let q = Arc::new(Queue {
        flow: Arc::clone(flow),
        notes: AtomicUsize::new(0),
        bytes: AtomicUsize::new(0),
        changed: Default::default(),
    });
    (
        Outbox {
            tx,
            q: Arc::clone(&q),
        },
        Inbox { rx, q },
    )
}

/// Which `list_changed` a method is, as an index.
fn changed_kind(method: &str) -> Option<usize> {
    match method {
        "notifications/tools/list_changed" => Some(0),
        "notifications/prompts/list_changed" => Some(1),
        "notifications/resources/list_changed" => Some(2),
        _ => None,
    }
}

impl Outbox {
    /// Queues one message: an answer always (its room is kept), a request
    /// while room is left for answers, a notification within the budgets.
    pub(crate) fn try_send(&self, out: Out) -> Result<(), Refused> {
        let (kind, has_id) = match &out {
            Out::Msg(v) => (
                v.get("method").and_then(Value::as_str).map(changed_kind),
                v.get("id").is_some(),
            ),
            Out::Answer(_) | Out::Note { .. } => (None, true),
        };
        let Some(kind) = kind else {
            return self.tx.try_send(out).map_err(|_| Refused::Closed);
        };
        if has_id {
            if self.tx.is_closed() {
                return Err(Refused::Closed);
            }
            if self.tx.capacity() <= ANSWER_ROOM {
                return Err(Refused::Full);
            }
            let bytes = out.into_bytes();
            if !self.q.has_room(bytes.len()) {
                return Err(Refused::Full);
            }
            return self.queue(bytes, None);
        }
        self.note(kind, out)
    }

    /// Queues `bytes` (a notification, or a request to the client), counted.
    fn queue(&self, bytes: bytes::Bytes, changed: Option<usize>) -> Result<(), Refused> {
        let q = &self.q;
        let len = bytes.len();
        q.notes.fetch_add(1, Ordering::AcqRel);
        q.bytes.fetch_add(len, Ordering::AcqRel);
        q.flow.queued.fetch_add(len, Ordering::AcqRel);
        if let Some(k) = changed {
            q.changed[k].store(true, Ordering::Release);
        }
        if let Err(e) = self.tx.try_send(Out::Note { bytes, changed }) {
            // Not queued after all (closed meanwhile): not counted either.
            q.taken(&e.into_inner());
            return Err(Refused::Closed);
        }
        Ok(())
    }

    fn note(&self, kind: Option<usize>, out: Out) -> Result<(), Refused> {
        if self.tx.is_closed() {
            return Err(Refused::Closed);
        }
        let q = &self.q;
        // One waiting `list_changed` says all the next ones would: the
        // client lists again once, whenever it reads.
        if let Some(k) = kind
            && q.changed[k].load(Ordering::Acquire)
        {
            return Ok(());
        }
        let drop = || {
            q.flow.dropped.fetch_add(1, Ordering::Relaxed);
            Err(Refused::Dropped)
        };
        // A full queue drops before anything is serialised: a flood costs
        // little past that point.
        if q.notes.load(Ordering::Acquire) >= NOTES || self.tx.capacity() <= ANSWER_ROOM {
            return drop();
        }
        let bytes = out.into_bytes();
        if !q.has_room(bytes.len()) {
            return drop();
        }
        self.queue(bytes, kind)
    }

    /// Whether the client went away.
    pub(crate) fn is_closed(&self) -> bool {
        self.tx.is_closed()
    }
}

impl Queue {
    /// Whether `len` more bytes fit the exchange's and the bridge's
    /// budgets (one message of any size fits an empty exchange queue
    /// while the bridge has room).
    fn has_room(&self, len: usize) -> bool {
        let mine = self.bytes.load(Ordering::Acquire);
        (mine == 0 || mine + len <= EXCHANGE_BYTES)
            && self.flow.queued.load(Ordering::Acquire) + len <= BRIDGE_BYTES
    }

    /// `out` left the queue: its notification no longer counts.
    fn taken(&self, out: &Out) {
        if let Out::Note { bytes, changed } = out {
            self.notes.fetch_sub(1, Ordering::AcqRel);
            self.bytes.fetch_sub(bytes.len(), Ordering::AcqRel);
            self.flow.queued.fetch_sub(bytes.len(), Ordering::AcqRel);
            if let Some(k) = changed {
                self.changed[*k].store(false, Ordering::Release);
            }
        }
    }
}

impl Inbox {
    /// The next message, as [`mpsc::Receiver::poll_recv`].
    pub(crate) fn poll_recv(&mut self, cx: &mut Context<'_>) -> Poll<Option<Out>> {
        let r = Pin::new(&mut self.rx).poll_recv(cx);
        if let Poll::Ready(Some(out)) = &r {
            self.q.taken(out);
        }
        r
    }

    /// The next message if one is queued.
    #[cfg(test)]
    pub(crate) fn try_recv(&mut self) -> Result<Out, mpsc::error::TryRecvError> {
        let out = self.rx.try_recv()?;
        self.q.taken(&out);
        Ok(out)
    }

    /// The next message.
    pub(crate) async fn recv(&mut self) -> Option<Out> {
        std::future::poll_fn(|cx| self.poll_recv(cx)).await
    }
}

impl Drop for Inbox {
    // What the client never read leaves the bridge's total with it.
    fn drop(&mut self) {
        self.rx.close();
        while let Ok(out) = self.rx.try_recv() {
            self.q.taken(&out);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn note(method: &str) -> Out {
        Out::Msg(json!({"jsonrpc": "2.0", "method": method, "params": {}}))
    }

    #[tokio::test]
    async fn notifications_drop_past_the_budget_and_answers_still_fit() {
        let flow = Arc::new(Flow::default());
        let (tx, mut rx) = channel(&flow);
        let mut queued = 0;
        for _ in 0..1000 {
            if tx.try_send(note("notifications/message")).is_ok() {
                queued += 1;
            }
        }
        assert_eq!(queued, NOTES);
        assert_eq!(flow.dropped(), (1000 - NOTES) as u64);
        let ask = json!({"jsonrpc": "2.0", "id": "s", "method": "roots/list"});
        let mut asked = 0;
        while tx.try_send(Out::Msg(ask.clone())).is_ok() {
            asked += 1;
        }
        assert_eq!(asked, OUTBOX - NOTES - ANSWER_ROOM);
        assert_eq!(
            tx.try_send(Out::Msg(ask)),
            Err(Refused::Full),
            "a request is refused, not dropped"
        );
        tx.try_send(Out::Msg(json!({"jsonrpc": "2.0", "id": 1, "result": {}})))
            .expect("the answer has room");
        let mut got = 0;
        while let Ok(Some(_)) =
            tokio::time::timeout(std::time::Duration::from_millis(10), rx.recv()).await
        {
            got += 1;
        }
        assert_eq!(got, NOTES + asked + 1);
        assert_eq!(flow.queued(), 0, "read notifications leave the total");
    }

    #[tokio::test]
    async fn a_waiting_list_changed_absorbs_the_next_ones() {
        let flow = Arc::new(Flow::default());
        let (tx, mut rx) = channel(&flow);
        for _ in 0..10 {
            tx.try_send(note("notifications/tools/list_changed"))
                .unwrap();
            tx.try_send(note("notifications/prompts/list_changed"))
                .unwrap();
        }
        assert!(rx.recv().await.is_some());
        assert!(rx.recv().await.is_some());
        tx.try_send(note("notifications/tools/list_changed"))
            .unwrap();
        assert!(
            rx.recv().await.is_some(),
            "one more once the first was read"
        );
        assert!(
            tokio::time::timeout(std::time::Duration::from_millis(10), rx.recv())
                .await
                .is_err()
        );
        assert_eq!(flow.dropped(), 0, "absorbed, not dropped");
    }

    #[tokio::test]
    async fn the_bridge_total_bounds_many_exchanges() {
        let flow = Arc::new(Flow::default());
        let big = "x".repeat(EXCHANGE_BYTES / 2);
        let msg = Out::Msg(json!({"jsonrpc": "2.0", "method": "notifications/message",
            "params": {"data": big}}));
        let mut boxes = Vec::new();
        for _ in 0..64 {
            let (tx, rx) = channel(&flow);
            let _ = tx.try_send(Out::Msg(match &msg {
                Out::Msg(v) => v.clone(),
                _ => unreachable!(),
            }));
            boxes.push((tx, rx));
        }
        assert!(flow.queued() <= BRIDGE_BYTES);
        assert!(flow.dropped() > 0);
        drop(boxes);
        assert_eq!(
            flow.queued(),
            0,
            "a closed exchange's queue leaves the total"
        );
    }
}
