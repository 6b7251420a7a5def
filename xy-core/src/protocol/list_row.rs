//! A [`ListEntry`] serialised ahead of time: a large `list` was mostly
//! serde escaping the same rows on every call (D41). A [`ListRow`] holds
//! the row's JSON with its three per-call fields (`uptime_secs`,
//! `cpu_percent`, `rss_bytes`) left open, and writes it byte-for-byte as
//! `serde_json::to_writer(&entry)` would.

use std::io::Write;
use std::sync::Arc;

use serde::Serialize;

use super::ListEntry;

/// One `list` row's JSON, built once from a [`ListEntry`] (its per-call
/// fields ignored); [`ListRow::write`] fills those in. The text is
/// `{…"uptime_secs":` + `…"cpu_percent":` + `…"agent_allow_restart":…`,
/// cut at two offsets; `,"gateway_url":…}` is written after it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListRow {
    text: Box<str>,
    /// End of the part before the uptime, end of the part before the CPU.
    cuts: (usize, usize),
    /// The name as the row's JSON escapes it (`text[NAME_AT..name_end]`),
    /// for the gateway URL. JSON escapes character by character, so the
    /// URL's escaped text is its parts' escaped texts joined.
    name_end: usize,
}

/// Where the escaped name starts in a row: after `{"name":"`.
const NAME_AT: usize = 9;

/// The fields of a row that change without its server's state changing:
/// computed per `list` call.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct PerCall {
    /// [`ListEntry::uptime_secs`].
    pub uptime_secs: Option<u64>,
    /// [`ListEntry::cpu_percent`].
    pub cpu_percent: Option<f64>,
    /// [`ListEntry::rss_bytes`].
    pub rss_bytes: Option<u64>,
    /// The gateway's port, `None` when it is off: [`ListEntry::gateway_url`]
    /// is `http://127.0.0.1:<port>/<name>/mcp` or `null`.
    pub gateway_port: Option<u16>,
}

/// Longest text [`ListRow::write`] adds to a row besides the name it
/// repeats: `,"rss_bytes":` and three numbers (20 digits for a `u64`, 24
/// for an `f64`), and `,"gateway_url":"http://127.0.0.1:65535/` `/mcp"`.
pub const PER_CALL_MAX: usize = 13 + 20 + 24 + 20 + 15 + 23 + 5;

impl ListRow {
    /// Serialises `entry`, except its per-call fields, in [`ListEntry`]'s
    /// field order.
    pub fn new(entry: &ListEntry) -> ListRow {
        // No `..`: a new field of `ListEntry` fails to compile here until it
        // is written below (and the equivalence tests check where).
        let ListEntry {
            name,
            state,
            pid,
            port,
            transport,
            url,
            uptime_secs: _,
            restart_count,
            last_exit,
            health,
            cpu_percent: _,
            rss_bytes: _,
            tool_count,
            tools_held,
            agent_allow_restart,
            remote_url,
            gateway_url: _,
        } = entry;
        let mut w = Vec::with_capacity(256 + name.len() + url.len());
        field(&mut w, '{', "name", name);
        let name_end = w.len() - 1;
        field(&mut w, ',', "state", state);
        field(&mut w, ',', "pid", pid);
        field(&mut w, ',', "port", port);
        field(&mut w, ',', "transport", transport);
        field(&mut w, ',', "url", url);
        w.extend_from_slice(br#","uptime_secs":"#);
        let first = w.len();
        field(&mut w, ',', "restart_count", restart_count);
        field(&mut w, ',', "last_exit", last_exit);
        field(&mut w, ',', "health", health);
        w.extend_from_slice(br#","cpu_percent":"#);
        let second = w.len();
        field(&mut w, ',', "tool_count", tool_count);
        field(&mut w, ',', "tools_held", tools_held);
        field(&mut w, ',', "agent_allow_restart", agent_allow_restart);
        field(&mut w, ',', "remote_url", remote_url);
        let text = String::from_utf8(w)
            .expect("serde_json writes UTF-8")
            .into_boxed_str();
        ListRow {
            text,
            cuts: (first, second),
            name_end,
        }
    }

    /// Bytes [`ListRow::write`] writes at most.
    pub fn max_len(&self) -> usize {
        self.text.len() + PER_CALL_MAX + (self.name_end - NAME_AT)
    }

    /// Appends the row with `now`'s per-call fields: the bytes
    /// `serde_json::to_writer` writes for the [`ListEntry`] this row was
    /// built from with those fields set.
    pub fn write(&self, out: &mut Vec<u8>, now: PerCall) {
        let (first, second) = self.cuts;
        let text = self.text.as_bytes();
        out.extend_from_slice(&text[..first]);
        value(out, &now.uptime_secs);
        out.extend_from_slice(&text[first..second]);
        value(out, &now.cpu_percent);
        out.extend_from_slice(br#","rss_bytes":"#);
        value(out, &now.rss_bytes);
        out.extend_from_slice(&text[second..]);
        out.extend_from_slice(br#","gateway_url":"#);
        match now.gateway_port {
            Some(port) => {
                let _ = write!(out, "\"http://127.0.0.1:{port}/");
                out.extend_from_slice(&text[NAME_AT..self.name_end]);
                out.extend_from_slice(b"/mcp\"");
            }
            None => out.extend_from_slice(b"null"),
        }
        out.push(b'}');
    }
}

/// A whole `list` result: each row with its per-call fields, in order.
#[derive(Debug, Clone, Default)]
pub struct ListRows(pub Vec<(Arc<ListRow>, PerCall)>);

impl ListRows {
    /// Bytes [`ListRows::write`] writes at most.
    pub fn max_len(&self) -> usize {
        2 + self.0.iter().map(|(r, _)| r.max_len() + 1).sum::<usize>()
    }

    /// Appends the JSON array of the rows: what `serde_json::to_writer`
    /// writes for the `Vec<ListEntry>` they stand for.
    pub fn write(&self, out: &mut Vec<u8>) {
        out.push(b'[');
        for (i, (row, now)) in self.0.iter().enumerate() {
            if i > 0 {
                out.push(b',');
            }
            row.write(out, *now);
        }
        out.push(b']');
    }
}

/// `{"key":value` or `,"key":value`; `key` needs no escaping.
fn field<T: Serialize + ?Sized>(w: &mut Vec<u8>, sep: char, key: &str, v: &T) {
    debug_assert!(!key.contains(['"', '\\']));
    let _ = write!(w, "{sep}\"{key}\":");
    value(w, v);
}

fn value<T: Serialize + ?Sized>(w: &mut Vec<u8>, v: &T) {
    // The protocol types serialise infallibly (no maps with non-string
    // keys, no failing `Serialize` impls); writing to a `Vec` cannot fail.
    serde_json::to_writer(w, v).expect("a protocol value serialises");
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::{Health, HealthState, LastExit, ServerState, Transport};

    fn serde_bytes(e: &ListEntry) -> Vec<u8> {
        serde_json::to_vec(e).unwrap()
    }

    /// The per-call fields of `e`; its gateway URL must be one the row can
    /// write (of its own name).
    fn per_call(e: &ListEntry) -> PerCall {
        let gateway_port = e.gateway_url.as_ref().map(|u| {
            let port = u
                .strip_prefix("http://127.0.0.1:")
                .and_then(|r| r.split('/').next())
                .and_then(|p| p.parse().ok())
                .expect("a gateway URL");
            assert_eq!(*u, crate::config::gateway_url(port, &e.name));
            port
        });
        PerCall {
            uptime_secs: e.uptime_secs,
            cpu_percent: e.cpu_percent,
            rss_bytes: e.rss_bytes,
            gateway_port,
        }
    }

    fn cached_bytes(e: &ListEntry) -> Vec<u8> {
        let row = ListRow::new(e);
        let mut out = Vec::new();
        row.write(&mut out, per_call(e));
        assert!(
            out.len() <= row.max_len(),
            "{} > {}",
            out.len(),
            row.max_len()
        );
        out
    }

    const ODD: [&str; 7] = [
        "",
        "plain",
        "quote\"back\\slash",
        "ctl\u{1}\u{1f}\n\t\r",
        "ünïcødé ☃ 𝄞",
        "</script>\u{7f}\u{2028}",
        "{\"uptime_secs\":1,\"cpu_percent\":2}",
    ];

    /// Every combination of the fields that shape a row, odd strings and
    /// extreme numbers included, written byte-for-byte as serde writes it.
    #[test]
    fn a_cached_row_is_what_serde_writes() {
        let states = [
            ServerState::Stopped,
            ServerState::Starting,
            ServerState::Running,
            ServerState::Restarting,
            ServerState::Stopping,
            ServerState::Idle,
            ServerState::Failed,
        ];
        let exits = [
            None,
            Some(LastExit {
                code: Some(-1),
                signal: None,
                ts: "2026-12-01T05:00:00Z".into(),
            }),
            Some(LastExit {
                code: None,
                signal: Some("SIGKILL".into()),
                ts: ODD[3].into(),
            }),
        ];
        let healths = [
            Health::default(),
            Health {
                state: HealthState::Unhealthy,
                latency_ms: Some(u64::MAX),
                error: Some(ODD[2].into()),
                checked_at: Some("2026-12-01T05:00:00.123Z".into()),
            },
        ];
        let per_call = [
            (None, None, None),
            (Some(0), Some(0.0), Some(0)),
            (Some(u64::MAX), Some(12.3), Some(u64::MAX)),
            (Some(7), Some(f64::MAX), Some(1)),
            (Some(7), Some(-0.1), Some(4096)),
            (Some(1), Some(f64::NAN), None),
            (None, Some(f64::INFINITY), Some(5)),
            (Some(3), Some(1e-7), Some(3)),
        ];
        let mut checked = 0;
        for (i, name) in ODD.iter().enumerate() {
            for state in states {
                for exit in &exits {
                    for health in &healths {
                        for &(uptime_secs, cpu_percent, rss_bytes) in &per_call {
                            let e = ListEntry {
                                name: (*name).to_owned(),
                                state,
                                pid: (i % 2 == 0).then_some(u32::MAX - i as u32),
                                port: [0, 1, u16::MAX][i % 3],
                                transport: [Transport::Http, Transport::Stdio][i % 2],
                                url: format!("http://127.0.0.1:8080/{}", ODD[(i + 3) % 7]),
                                uptime_secs,
                                restart_count: [0, u32::MAX][i % 2],
                                last_exit: exit.clone(),
                                health: health.clone(),
                                cpu_percent,
                                rss_bytes,
                                tool_count: [None, Some(0), Some(u32::MAX)][i % 3],
                                tools_held: 0,
                                agent_allow_restart: i % 2 == 1,
                                remote_url: None,
                                gateway_url: [
                                    None,
                                    Some(crate::config::gateway_url(8399, name)),
                                    Some(crate::config::gateway_url(u16::MAX, name)),
                                ][(i + usize::from(uptime_secs.is_some())) % 3]
                                    .clone(),
                            };
                            let want = serde_bytes(&e);
                            let got = cached_bytes(&e);
                            assert_eq!(
                                String::from_utf8_lossy(&got),
                                String::from_utf8_lossy(&want)
                            );
                            checked += 1;
                        }
                    }
                }
            }
        }
        assert_eq!(checked, 7 * 7 * 3 * 2 * 8);
    }

    #[test]
    fn rows_are_what_serde_writes_for_the_entries() {
        let entries: Vec<ListEntry> = (0..4)
            .map(|i| ListEntry {
                name: ODD[i].into(),
                state: ServerState::Running,
                pid: Some(i as u32),
                port: 8080,
                transport: Transport::Http,
                url: ODD[i + 1].into(),
                uptime_secs: Some(i as u64),
                restart_count: 0,
                last_exit: None,
                health: Health::default(),
                cpu_percent: (i > 1).then_some(0.5),
                rss_bytes: Some(1000),
                tool_count: None,
                tools_held: 0,
                agent_allow_restart: false,
                remote_url: None,
                gateway_url: (i % 2 == 1).then(|| crate::config::gateway_url(1, ODD[i])),
            })
            .collect();
        for n in 0..=entries.len() {
            let rows = ListRows(
                entries[..n]
                    .iter()
                    .map(|e| (Arc::new(ListRow::new(e)), per_call(e)))
                    .collect(),
            );
            let mut out = Vec::new();
            rows.write(&mut out);
            assert!(out.len() <= rows.max_len());
            assert_eq!(out, serde_json::to_vec(&entries[..n]).unwrap());
        }
    }

    #[test]
    fn a_row_reads_back_as_its_entry() {
        let e = ListEntry {
            name: ODD[2].into(),
            state: ServerState::Running,
            pid: Some(42),
            port: 8080,
            transport: Transport::Stdio,
            url: ODD[4].into(),
            uptime_secs: Some(9),
            restart_count: 2,
            last_exit: None,
            health: Health::default(),
            cpu_percent: Some(1.5),
            rss_bytes: Some(1 << 20),
            tool_count: Some(3),
            tools_held: 0,
            agent_allow_restart: true,
            remote_url: None,
            gateway_url: Some(crate::config::gateway_url(8399, ODD[2])),
        };
        let back: ListEntry = serde_json::from_slice(&cached_bytes(&e)).unwrap();
        assert_eq!(back, e);
    }
}
