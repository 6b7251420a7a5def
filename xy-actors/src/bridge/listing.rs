//! xy's own listing of each child (SPEC §20): after every handshake and
//! every `notifications/tools/list_changed` (or prompts), xy asks
//! `tools/list` — following `nextCursor` — and `prompts/list` when the
//! child has prompts, and hands the whole [`Listing`] to its ServerActor,
//! which decides the firewall's verdicts. A state machine over the child's
//! answers, like the handshake: the BridgeActor writes what it returns.
//! Bounded: a child that pages forever, or repeats a cursor, ends the
//! listing with what it has plus an error in the log.

use serde_json::{Value, json};

use xy_core::firewall::Kind;

use crate::mcp::listing::{Listing, MAX_ITEMS, MAX_PAGES};
use xy_core::protocol::mcp::wire::{META_PROTOCOL_VERSION, VERSION_2026};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stage {
    Tools,
    Prompts,
}

/// One listing in progress.
#[derive(Debug)]
pub(crate) struct Job {
    /// xy's id of the request the job waits on.
    pub(crate) id: u64,
    stage: Stage,
    /// The child speaks only 2026: requests carry the `_meta` envelope.
    era2026: bool,
    with_prompts: bool,
    pages: usize,
    cursors: Vec<String>,
    listing: Listing,
    /// Another `list_changed` arrived meanwhile: list again when done.
    pub(crate) again: bool,
}

/// What to do next.
#[derive(Debug)]
pub(crate) enum Next {
    /// Write this request (its id is the job's new `id`).
    Ask(Value),
    /// The listing is complete.
    Done(Listing),
    /// Listing tools failed; nothing is reported.
    Failed(String),
}

fn request(id: u64, method: &str, cursor: Option<&str>, era2026: bool) -> Value {
    let mut params = json!({});
    if let Some(c) = cursor {
        params["cursor"] = json!(c);
    }
    if era2026 {
        params["_meta"] = json!({
            META_PROTOCOL_VERSION: VERSION_2026,
            // As a 2025 child is initialised (D112): xy lists what the
            // child offers any client, not what it offers a client with none.
            "io.modelcontextprotocol/clientCapabilities": super::mrtr::all_client_capabilities(),
            "io.modelcontextprotocol/clientInfo": {"name": "xy", "version": xy_core::VERSION},
        });
    }
    json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params})
}

impl Job {
    /// Starts a listing: the first `tools/list` to write.
    pub(crate) fn start(id: u64, base: Listing, era2026: bool, with_prompts: bool) -> (Job, Value) {
        let job = Job {
            id,
            stage: Stage::Tools,
            era2026,
            with_prompts,
            pages: 0,
            cursors: Vec::new(),
            listing: base,
            again: false,
        };
        let msg = request(id, "tools/list", None, era2026);
        (job, msg)
    }

    /// The child's answer to the job's request; `line` is its text as the
    /// child wrote it, when the bridge has it (the items' texts are kept).
    pub(crate) fn on_answer(
        &mut self,
        answer: &Value,
        line: Option<(&[u8], &std::ops::Range<usize>)>,
        next_id: impl FnOnce() -> u64,
    ) -> Next {
        let (method, key) = match self.stage {
            Stage::Tools => ("tools/list", "tools"),
            Stage::Prompts => ("prompts/list", "prompts"),
        };
        let Some(result) = answer.get("result") else {
            let why = answer
                .pointer("/error/message")
                .and_then(Value::as_str)
                .unwrap_or("no result")
                .to_owned();
            return match self.stage {
                Stage::Tools => Next::Failed(format!("{method}: {why}")),
                Stage::Prompts => {
                    self.listing.prompts = None;
                    Next::Done(std::mem::take(&mut self.listing))
                }
            };
        };
        let items = result.get(key).and_then(Value::as_array);
        let kind = match self.stage {
            Stage::Tools => Kind::Tool,
            Stage::Prompts => Kind::Prompt,
        };
        let texts = line.and_then(|(l, _)| crate::mcp::verdicts::raw_items(l, kind));
        if let Some((l, at)) = line {
            self.listing.pages.push((kind, l.into(), at.clone()));
        }
        let (list, raw) = match self.stage {
            Stage::Tools => (&mut self.listing.tools, &mut self.listing.raw_tools),
            Stage::Prompts => (
                self.listing.prompts.get_or_insert_with(Vec::new),
                &mut self.listing.raw_prompts,
            ),
        };
        for (i, item) in items.into_iter().flatten().enumerate() {
            if list.len() >= MAX_ITEMS {
                break;
            }
            list.push(item.clone());
            // Aligned with `list`; a missing text only costs the fast path.
            raw.push(
                texts
                    .as_ref()
                    .and_then(|t| t.get(i))
                    .map(|t| Box::<str>::from(*t))
                    .unwrap_or_default(),
            );
        }
        self.pages += 1;
        let cursor = result.get("nextCursor").and_then(Value::as_str);
        if let Some(c) = cursor
            && self.pages < MAX_PAGES
            && list.len() < MAX_ITEMS
            && !self.cursors.iter().any(|x| x == c)
        {
            self.cursors.push(c.to_owned());
            self.id = next_id();
            return Next::Ask(request(self.id, method, Some(c), self.era2026));
        }
        if cursor.is_some() {
            tracing::warn!(
                "{method}: stopped following nextCursor after {} pages and {} items",
                self.pages,
                list.len()
            );
        }
        if self.stage == Stage::Tools && self.with_prompts {
            self.stage = Stage::Prompts;
            self.pages = 0;
            self.cursors.clear();
            self.listing.prompts = Some(Vec::new());
            self.id = next_id();
            return Next::Ask(request(self.id, "prompts/list", None, self.era2026));
        }
        Next::Done(std::mem::take(&mut self.listing))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pages_are_followed_then_prompts_are_listed() {
        let (mut job, first) = Job::start(1, Listing::default(), false, true);
        assert_eq!(first["method"], "tools/list");
        assert!(first["params"].get("cursor").is_none());
        let mut ids = 1..;
        ids.next();
        let page1 = json!({"id": 1, "result": {"tools": [{"name": "a"}], "nextCursor": "c2"}});
        let Next::Ask(m) = job.on_answer(&page1, None, || ids.next().unwrap()) else {
            panic!("wants page 2");
        };
        assert_eq!(
            (m["params"]["cursor"].clone(), m["id"].clone()),
            (json!("c2"), json!(2))
        );
        let page2 = json!({"id": 2, "result": {"tools": [{"name": "b"}]}});
        let Next::Ask(m) = job.on_answer(&page2, None, || ids.next().unwrap()) else {
            panic!("wants prompts");
        };
        assert_eq!(m["method"], "prompts/list");
        let prompts = json!({"id": 3, "result": {"prompts": [{"name": "p"}]}});
        let Next::Done(l) = job.on_answer(&prompts, None, || 99) else {
            panic!("done");
        };
        assert_eq!(l.tools.len(), 2);
        assert_eq!(l.prompts.unwrap().len(), 1);
    }

    #[test]
    fn a_repeated_cursor_ends_the_listing_and_a_2026_child_gets_the_envelope() {
        let (mut job, first) = Job::start(1, Listing::default(), true, false);
        assert_eq!(
            first["params"]["_meta"][META_PROTOCOL_VERSION],
            VERSION_2026
        );
        let page = json!({"id": 1, "result": {"tools": [{"name": "a"}], "nextCursor": "same"}});
        assert!(matches!(job.on_answer(&page, None, || 2), Next::Ask(_)));
        let Next::Done(l) = job.on_answer(&page, None, || 3) else {
            panic!("a repeated cursor ends it");
        };
        assert_eq!(l.tools.len(), 2);
        assert!(l.prompts.is_none());
        let (mut job, _) = Job::start(1, Listing::default(), false, false);
        let err = json!({"id": 1, "error": {"code": -32601, "message": "no tools"}});
        assert!(
            matches!(job.on_answer(&err, None, || 2), Next::Failed(e) if e.contains("no tools"))
        );
    }
}
