//! xy's own listing of each child (SPEC §20, §27): after every handshake
//! and every `notifications/tools/list_changed` (or prompts, resources),
//! xy asks `tools/list` — following `nextCursor` — then `prompts/list`,
//! `resources/list`, `resources/templates/list` and `skills/list` for what
//! the child offers, then reads every skill file and app the firewall pins
//! (SPEC §27), and hands the whole [`Listing`] to its ServerActor,
//! which decides the firewall's verdicts. A state machine over the child's
//! answers, like the handshake: the BridgeActor writes what it returns.
//! Bounded: a child that pages forever, or repeats a cursor, ends the
//! listing with what it has plus an error in the log.

use serde_json::{Value, json};

use xy_core::firewall::Kind;

use crate::mcp::listing::{Listing, MAX_ITEMS, MAX_PAGES};
use xy_core::protocol::mcp::wire::{META_PROTOCOL_VERSION, VERSION_2026};

/// One list xy asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Stage {
    Tools,
    Prompts,
    Resources,
    Templates,
    Skills,
}

impl Stage {
    /// The method and the key of its result's items.
    const fn method(self) -> (&'static str, &'static str) {
        match self {
            Self::Tools => ("tools/list", "tools"),
            Self::Prompts => ("prompts/list", "prompts"),
            Self::Resources => ("resources/list", "resources"),
            Self::Templates => ("resources/templates/list", "resourceTemplates"),
            Self::Skills => ("skills/list", "skills"),
        }
    }

    /// The lists a child with these capabilities offers, in the order xy
    /// asks for them.
    pub(crate) fn offered(caps: Option<&Value>) -> Vec<Stage> {
        use crate::mcp::listing::{offers, offers_skills};
        let mut v = Vec::new();
        if offers(caps, "tools") {
            v.push(Self::Tools);
        }
        if offers(caps, "prompts") {
            v.push(Self::Prompts);
        }
        if offers(caps, "resources") {
            v.extend([Self::Resources, Self::Templates]);
        }
        if offers_skills(caps) {
            v.push(Self::Skills);
        }
        v
    }
}

/// One listing in progress.
#[derive(Debug)]
pub(crate) struct Job {
    /// xy's id of the request the job waits on.
    pub(crate) id: u64,
    stage: Stage,
    /// The lists still to ask for after this one.
    rest: std::collections::VecDeque<Stage>,
    /// The child speaks only 2026: requests carry the `_meta` envelope.
    era2026: bool,
    pages: usize,
    cursors: Vec<String>,
    listing: Listing,
    /// The pinned resources still to read, and the one being read.
    reads: std::collections::VecDeque<String>,
    reading: Option<String>,
    /// Another `list_changed` arrived meanwhile: list again when done.
    pub(crate) again: bool,
}

/// What to do next.
#[derive(Debug)]
pub(crate) enum Next {
    /// Write this request (its id is the job's new `id`).
    Ask(Value),
    /// The listing is complete.
    Done(Box<Listing>),
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
    /// Starts a listing of `stages` (not empty): the first request to write.
    pub(crate) fn start(id: u64, base: Listing, era2026: bool, stages: &[Stage]) -> (Job, Value) {
        let mut rest: std::collections::VecDeque<Stage> = stages.iter().copied().collect();
        let stage = rest.pop_front().unwrap_or(Stage::Tools);
        let mut job = Job {
            id,
            stage,
            rest,
            era2026,
            pages: 0,
            cursors: Vec::new(),
            listing: base,
            reads: std::collections::VecDeque::new(),
            reading: None,
            again: false,
        };
        job.open(stage);
        let msg = request(id, stage.method().0, None, era2026);
        (job, msg)
    }

    /// The list of `stage` starts empty (it was asked for).
    fn open(&mut self, stage: Stage) {
        let l = &mut self.listing;
        match stage {
            Stage::Tools => {}
            Stage::Prompts => l.prompts = Some(Vec::new()),
            Stage::Resources => l.resources = Some(Vec::new()),
            Stage::Templates => l.resource_templates = Some(Vec::new()),
            Stage::Skills => l.skills = Some(Vec::new()),
        }
    }

    /// The list of `stage` failed: the listing says it has none.
    fn close(&mut self, stage: Stage) {
        let l = &mut self.listing;
        match stage {
            Stage::Tools => {}
            Stage::Prompts => l.prompts = None,
            Stage::Resources => l.resources = None,
            Stage::Templates => l.resource_templates = None,
            Stage::Skills => l.skills = None,
        }
    }

    /// The next list to ask for, the next pinned resource to read, or the
    /// whole listing.
    fn next_stage(&mut self, next_id: impl FnOnce() -> u64) -> Next {
        let Some(stage) = self.rest.pop_front() else {
            if self.reading.is_none() {
                self.reads = crate::mcp::pinned::uris(&self.listing).into();
            }
            return self.next_read(next_id);
        };
        self.stage = stage;
        self.pages = 0;
        self.cursors.clear();
        self.open(stage);
        self.id = next_id();
        Next::Ask(request(self.id, stage.method().0, None, self.era2026))
    }

    /// Reads the next pinned resource, or ends the listing.
    fn next_read(&mut self, next_id: impl FnOnce() -> u64) -> Next {
        let Some(uri) = self.reads.pop_front() else {
            self.reading = None;
            return Next::Done(Box::new(std::mem::take(&mut self.listing)));
        };
        self.id = next_id();
        let mut msg = request(self.id, "resources/read", None, self.era2026);
        msg["params"]["uri"] = json!(uri);
        self.reading = Some(uri);
        Next::Ask(msg)
    }

    /// The child's answer to the job's request; `line` is its text as the
    /// child wrote it, when the bridge has it (the items' texts are kept).
    pub(crate) fn on_answer(
        &mut self,
        answer: &Value,
        line: Option<(&[u8], &std::ops::Range<usize>)>,
        next_id: impl FnOnce() -> u64,
    ) -> Next {
        if let Some(uri) = self.reading.clone() {
            // Kept whole (a result or an error): the pinned object says which.
            let mut kept = answer.clone();
            if let Some(m) = kept.as_object_mut() {
                m.retain(|k, _| k == "result" || k == "error");
            }
            self.listing.reads.push((uri, kept));
            return self.next_read(next_id);
        }
        let (method, key) = self.stage.method();
        let Some(result) = answer.get("result") else {
            let why = answer
                .pointer("/error/message")
                .and_then(Value::as_str)
                .unwrap_or("no result")
                .to_owned();
            if self.stage == Stage::Tools {
                return Next::Failed(format!("{method}: {why}"));
            }
            tracing::debug!("{method} failed: {why}");
            self.close(self.stage);
            return self.next_stage(next_id);
        };
        let items = result.get(key).and_then(Value::as_array);
        let kind = match self.stage {
            Stage::Tools => Some(Kind::Tool),
            Stage::Prompts => Some(Kind::Prompt),
            _ => None,
        };
        let texts =
            kind.and_then(|k| line.and_then(|(l, _)| crate::mcp::verdicts::raw_items(l, k)));
        if let (Some(k), Some((l, at))) = (kind, line) {
            self.listing.pages.push((k, l.into(), at.clone()));
        }
        let l = &mut self.listing;
        let (list, raw) = match self.stage {
            Stage::Tools => (&mut l.tools, Some(&mut l.raw_tools)),
            Stage::Prompts => (
                l.prompts.get_or_insert_with(Vec::new),
                Some(&mut l.raw_prompts),
            ),
            Stage::Resources => (l.resources.get_or_insert_with(Vec::new), None),
            Stage::Templates => (l.resource_templates.get_or_insert_with(Vec::new), None),
            Stage::Skills => (l.skills.get_or_insert_with(Vec::new), None),
        };
        let mut raw = raw;
        for (i, item) in items.into_iter().flatten().enumerate() {
            if list.len() >= MAX_ITEMS {
                break;
            }
            list.push(item.clone());
            // Aligned with `list`; a missing text only costs the fast path.
            if let Some(raw) = raw.as_deref_mut() {
                raw.push(
                    texts
                        .as_ref()
                        .and_then(|t| t.get(i))
                        .map(|t| Box::<str>::from(*t))
                        .unwrap_or_default(),
                );
            }
        }
        let count = list.len();
        self.pages += 1;
        let cursor = result.get("nextCursor").and_then(Value::as_str);
        if let Some(c) = cursor
            && self.pages < MAX_PAGES
            && count < MAX_ITEMS
            && !self.cursors.iter().any(|x| x == c)
        {
            self.cursors.push(c.to_owned());
            self.id = next_id();
            return Next::Ask(request(self.id, method, Some(c), self.era2026));
        }
        if cursor.is_some() {
            tracing::warn!(
                "{method}: stopped following nextCursor after {} pages and {count} items",
                self.pages,
            );
        }
        self.next_stage(next_id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pages_are_followed_then_prompts_are_listed() {
        let (mut job, first) = Job::start(
            1,
            Listing::default(),
            false,
            &[Stage::Tools, Stage::Prompts],
        );
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
        let (mut job, first) = Job::start(1, Listing::default(), true, &[Stage::Tools]);
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
        let (mut job, _) = Job::start(1, Listing::default(), false, &[Stage::Tools]);
        let err = json!({"id": 1, "error": {"code": -32601, "message": "no tools"}});
        assert!(
            matches!(job.on_answer(&err, None, || 2), Next::Failed(e) if e.contains("no tools"))
        );
    }

    #[test]
    fn resources_templates_and_skills_follow_and_a_failed_one_is_none() {
        let caps = json!({"resources": {}, "extensions": {"io.modelcontextprotocol/skills": {}}});
        let stages = Stage::offered(Some(&caps));
        assert_eq!(stages, [Stage::Resources, Stage::Templates, Stage::Skills]);
        let (mut job, first) = Job::start(1, Listing::default(), false, &stages);
        assert_eq!(first["method"], "resources/list");
        let mut ids = 2..;
        let r = json!({"id": 1, "result": {"resources": [{"uri": "ui://a", "name": "a"}]}});
        let Next::Ask(m) = job.on_answer(&r, None, || ids.next().unwrap()) else {
            panic!("wants templates");
        };
        assert_eq!(m["method"], "resources/templates/list");
        let err = json!({"id": 2, "error": {"code": -32601, "message": "none"}});
        let Next::Ask(m) = job.on_answer(&err, None, || ids.next().unwrap()) else {
            panic!("wants skills");
        };
        assert_eq!(m["method"], "skills/list");
        let sk = json!({"id": 3, "result": {"skills": [{"uri": "skill://a/SKILL.md",
            "resources": [{"uri": "skill://a/SKILL.md"}]}]}});
        let Next::Ask(m) = job.on_answer(&sk, None, || ids.next().unwrap()) else {
            panic!("reads the skill file");
        };
        assert_eq!(
            (m["method"].clone(), m["params"]["uri"].clone()),
            (json!("resources/read"), json!("skill://a/SKILL.md"))
        );
        let read =
            json!({"id": 4, "result": {"contents": [{"uri": "skill://a/SKILL.md", "text": "x"}]}});
        let Next::Ask(m) = job.on_answer(&read, None, || ids.next().unwrap()) else {
            panic!("reads the app");
        };
        assert_eq!(m["params"]["uri"], "ui://a");
        let err = json!({"id": 5, "error": {"code": -32002, "message": "gone"}});
        let Next::Done(l) = job.on_answer(&err, None, || 99) else {
            panic!("done");
        };
        assert_eq!(l.reads.len(), 2);
        assert_eq!(l.reads[1].1["error"]["message"], "gone");
        assert!(l.tools.is_empty());
        assert_eq!(l.resources.map(|r| r.len()), Some(1));
        assert!(l.resource_templates.is_none(), "a failed list is none");
        assert_eq!(l.skills.map(|r| r.len()), Some(1));
    }
}
