//! The child's open tasks, as the bridge sees them pass (SPEC §19; the
//! tasks extension `io.modelcontextprotocol/tasks`, and the 2025-11-25
//! tasks utility): a task is open from the result that created it until a
//! result or notification shows it terminal, or its TTL passes. Open tasks
//! keep an on-demand child from idling out; when the child goes away its
//! open tasks are lost, and clients asking about one are told it failed
//! and why. Pure data on tokio's clock; tasks themselves pass through.

use std::collections::HashMap;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::time::Instant;

/// A task whose creator gave no TTL stays open this long, at most.
const DEFAULT_TTL: Duration = Duration::from_secs(60 * 60);
/// No task is open longer than this, whatever TTL it was given.
const MAX_TTL: Duration = Duration::from_secs(24 * 60 * 60);
/// A lost task is remembered (answered as failed) this long.
const LOST_FOR: Duration = Duration::from_secs(60 * 60);
/// Tasks tracked per endpoint, at most (open and lost each; the oldest go).
const MAX_TASKS: usize = 1024;

/// The methods that name a task by `params.taskId`.
pub(crate) fn names_task(method: &str) -> bool {
    matches!(
        method,
        "tasks/get" | "tasks/result" | "tasks/update" | "tasks/cancel"
    )
}

/// A task's id, status and TTL in a result or notification: the 2026
/// extension's flat `Task` (`taskId`, `status`, `ttlMs`) or the 2025
/// utility's (`{task: {taskId, status, ttl}}` on creation, flat after).
fn task_of(v: &Value) -> Option<(&str, &str, Option<u64>)> {
    let t = v.get("task").filter(|t| t.is_object()).unwrap_or(v);
    let id = t.get("taskId")?.as_str()?;
    let status = t.get("status")?.as_str()?;
    let ttl = t
        .get("ttlMs")
        .or_else(|| t.get("ttl"))
        .and_then(Value::as_u64);
    Some((id, status, ttl))
}

fn terminal(status: &str) -> bool {
    matches!(status, "completed" | "failed" | "cancelled")
}

/// See the module docs.
#[derive(Debug, Default)]
pub(crate) struct Tasks {
    /// Open task id → until when it counts as open.
    open: HashMap<String, Instant>,
    /// Task id → why it was lost, and until when that is said.
    lost: HashMap<String, (String, Instant)>,
}

impl Tasks {
    /// A result or a task notification passed: it may open or end a task.
    pub(crate) fn seen(&mut self, v: &Value, now: Instant) {
        let Some((id, status, ttl)) = task_of(v) else {
            return;
        };
        if terminal(status) {
            self.open.remove(id);
            return;
        }
        let ttl = ttl.map_or(DEFAULT_TTL, Duration::from_millis).min(MAX_TTL);
        self.open.insert(id.to_owned(), now + ttl);
        bound(&mut self.open, |d| *d);
    }

    /// Tasks that keep the child busy.
    pub(crate) fn open(&self) -> usize {
        self.open.len()
    }

    /// The child went away (`why`): its open tasks are lost. Returns them.
    pub(crate) fn child_gone(&mut self, why: &str, now: Instant) -> Vec<String> {
        let gone: Vec<String> = self.open.drain().map(|(id, _)| id).collect();
        for id in &gone {
            self.lost
                .insert(id.clone(), (why.to_owned(), now + LOST_FOR));
        }
        bound(&mut self.lost, |(_, d)| *d);
        gone
    }

    /// Whether any task is remembered as lost.
    pub(crate) fn any_lost(&self) -> bool {
        !self.lost.is_empty()
    }

    /// Why task `id` was lost, if it was.
    pub(crate) fn lost(&self, id: &str) -> Option<&str> {
        self.lost.get(id).map(|(why, _)| why.as_str())
    }

    /// Forgets what is past its time.
    pub(crate) fn expire(&mut self, now: Instant) {
        self.open.retain(|_, d| *d > now);
        self.lost.retain(|_, (_, d)| *d > now);
    }
}

/// Past [`MAX_TASKS`], the entries ending first go.
fn bound<V>(map: &mut HashMap<String, V>, until: impl Fn(&V) -> Instant) {
    while map.len() > MAX_TASKS {
        let Some(k) = map
            .iter()
            .min_by_key(|(_, v)| until(v))
            .map(|(k, _)| k.clone())
        else {
            return;
        };
        map.remove(&k);
    }
}

/// The failed task xy reports for lost task `id` (`why`): what `tasks/get`
/// and a status notification carry (both eras' fields; a 2026 client's
/// result gains `resultType`).
pub(crate) fn failed(id: &str, why: &str) -> Value {
    json!({
        "taskId": id,
        "status": "failed",
        "statusMessage": why,
        "error": {"code": -32603, "message": why},
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_task_is_open_until_terminal_or_its_ttl_and_lost_with_its_child() {
        let mut t = Tasks::default();
        let now = Instant::now();
        // 2026 extension: a CreateTaskResult, then tasks/get results.
        t.seen(
            &json!({"resultType":"task","taskId":"a","status":"working","ttlMs":60000}),
            now,
        );
        // 2025-11-25: the task nested on creation.
        t.seen(
            &json!({"task":{"taskId":"b","status":"working","ttl":null}}),
            now,
        );
        t.seen(&json!({"content": []}), now);
        assert_eq!(t.open(), 2);
        t.seen(&json!({"taskId":"a","status":"input_required"}), now);
        assert_eq!(t.open(), 2, "still open");
        t.seen(&json!({"taskId":"a","status":"completed","result":{}}), now);
        assert_eq!(t.open(), 1);
        t.expire(now + DEFAULT_TTL - Duration::from_secs(1));
        assert_eq!(t.open(), 1);
        t.seen(&json!({"taskId":"c","status":"working","ttlMs":1000}), now);
        t.expire(now + Duration::from_secs(2));
        assert_eq!(t.open(), 1, "c's TTL passed");
        assert_eq!(t.child_gone("restarted", now), vec!["b".to_owned()]);
        assert_eq!(t.open(), 0);
        assert_eq!(t.lost("b"), Some("restarted"));
        assert_eq!(t.lost("a"), None);
        t.expire(now + LOST_FOR);
        assert_eq!(t.lost("b"), None);
    }

    #[test]
    fn tasks_are_bounded() {
        let mut t = Tasks::default();
        let now = Instant::now();
        for i in 0..=MAX_TASKS {
            let ttl = 1000 + i as u64;
            t.seen(
                &json!({"taskId": format!("t{i}"), "status": "working", "ttlMs": ttl}),
                now,
            );
        }
        assert_eq!(t.open(), MAX_TASKS);
        assert_eq!(t.child_gone("x", now).len(), MAX_TASKS);
        assert!(t.lost("t0").is_none(), "the first to end went first");
    }
}
