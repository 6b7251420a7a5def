//! Health probes (SPEC §10): a task per running child that probes
//! `127.0.0.1:<port>` (TCP connect, HTTP GET, or MCP in either era) and
//! reports each result to its ServerActor by message, and the pure
//! [`Tracker`] that turns results into `healthy`/`unhealthy`/`starting`.
//!
//! The same task carries out xy's own listing of an HTTP or remote server
//! (SPEC §20, [`listing`]): one task, and one MCP session, per spawn, so
//! the child sees one `initialize` and one `tools/list` whether it has an
//! `mcp` probe or not (the probe's findings no longer list tools: the
//! ledger takes xy's listing).
//!
//! The ServerActor starts the task when its child is spawned and stops it
//! when the child exits or is being stopped; without a `health` block it
//! only lists (a stdio server's bridge lists its own child, so there is no
//! task then). Stopping lets the task end its MCP session (`DELETE`).
//!
//! Every text a report carries comes from the server (a JSON-RPC error's
//! message, its self-description) and goes on to `daemon.log`, `status`,
//! events and hooks, so it leaves the task through [`scrub`]: the child's
//! secret values redacted (SPEC §16), then cut to [`MAX_TEXT`](crate::log_router::redact::MAX_TEXT).

use std::time::{Duration, Instant, SystemTime};

use std::sync::Arc;

use tokio::sync::oneshot;
use xy_core::config::{HealthConfig, ProbeKind};
use xy_core::protocol::{Health, HealthState};

pub(crate) mod http;
pub(crate) mod listing;
pub(crate) mod mcp;

/// The first probe comes this soon after the spawn (or after `interval`,
/// if shorter), so `list` has a verdict early.
const FIRST_PROBE: Duration = Duration::from_secs(1);

use crate::log_router::redact::{Redactor, scrub};
use crate::mcp::report::{McpInfo, McpReport};

impl ProbeReport {
    /// Every text of the report through [`scrub`].
    fn scrubbed(self, r: Option<&Redactor>) -> ProbeReport {
        let opt = |s: Option<String>| s.map(|s| scrub(s, r));
        ProbeReport {
            outcome: match self.outcome {
                Ok(note) => Ok(scrub(note, r)),
                Err(why) => Err(scrub(why, r)),
            },
            mcp: self.mcp.map(|m| McpReport {
                info: McpInfo {
                    protocol_version: scrub(m.info.protocol_version, r),
                    server_name: opt(m.info.server_name),
                    server_version: opt(m.info.server_version),
                    era: m.info.era,
                    capabilities: m.info.capabilities,
                },
            }),
            ..self
        }
    }
}

/// One probe's outcome.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ProbeReport {
    /// `Ok(note)` or `Err(why)`.
    pub(crate) outcome: Result<String, String>,
    /// How long it took.
    pub(crate) latency: Duration,
    /// When it finished.
    pub(crate) at: SystemTime,
    /// An `mcp` probe's findings when it succeeded.
    pub(crate) mcp: Option<McpReport>,
}

/// A running probe task. Dropping it stops the task (which still ends its
/// MCP session in the background); [`ProbeTask::stop`] also waits for that.
#[derive(Debug)]
pub(crate) struct ProbeTask {
    stop: Option<oneshot::Sender<()>>,
    done: Option<oneshot::Receiver<()>>,
    /// Wakes the task for a probe before its interval is up.
    now: Arc<tokio::sync::Notify>,
}

impl ProbeTask {
    /// Starts probing with `cfg` (none: listing only) and, given a
    /// `listing` duty, listing; `report` gets every probe's result, its
    /// texts through [`scrub`] with `redactor` (the child's,
    /// [`Redactor::for_spawn`]), and returns false once nobody listens (the
    /// actor is gone), which ends the task. A listing's failure goes
    /// through [`scrub`] too.
    pub(crate) fn spawn(
        cfg: Option<HealthConfig>,
        port: u16,
        remote: Option<Arc<crate::remote::Upstream>>,
        redactor: Option<Arc<Redactor>>,
        report: impl Fn(ProbeReport) -> bool + Send + 'static,
        listing: Option<listing::Duty>,
    ) -> ProbeTask {
        let (stop_tx, stop_rx) = oneshot::channel();
        let (done_tx, done_rx) = oneshot::channel();
        let listing = listing.map(|duty| {
            let r = redactor.clone();
            let send = duty.send;
            listing::Duty {
                send: Box::new(move |l: Result<_, String>| {
                    send(l.map_err(|why| scrub(why, r.as_deref())))
                }),
                ..duty
            }
        });
        let report = move |r: ProbeReport| report(r.scrubbed(redactor.as_deref()));
        let now = Arc::new(tokio::sync::Notify::new());
        let wake = Arc::clone(&now);
        let chan = Chan {
            stop: stop_rx,
            done: done_tx,
            wake,
        };
        tokio::spawn(run(cfg, port, remote, listing, report, chan));
        ProbeTask {
            stop: Some(stop_tx),
            done: Some(done_rx),
            now,
        }
    }

    /// Probes as soon as the probe in flight, if any, is done (a login
    /// completed: the verdict need not wait for the interval).
    pub(crate) fn probe_now(&self) {
        self.now.notify_one();
    }

    /// Stops the task; resolves once it has ended (its session closed),
    /// which is bounded by the probe timeout.
    pub(crate) fn stop(mut self) -> impl Future<Output = ()> + Send + 'static {
        drop(self.stop.take());
        let done = self.done.take();
        async move {
            if let Some(done) = done {
                let _ = done.await;
            }
        }
    }
}

/// The task's ends of its [`ProbeTask`].
struct Chan {
    stop: oneshot::Receiver<()>,
    /// Dropped when the task has ended.
    done: oneshot::Sender<()>,
    wake: Arc<tokio::sync::Notify>,
}

/// What the task does next.
enum Work {
    Probe,
    List,
    Relist,
}

/// Sleeps until `at`; never wakes without one.
async fn until(at: Option<tokio::time::Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

async fn run(
    cfg: Option<HealthConfig>,
    port: u16,
    remote: Option<Arc<crate::remote::Upstream>>,
    duty: Option<listing::Duty>,
    report: impl Fn(ProbeReport) -> bool + Send + 'static,
    chan: Chan,
) {
    let Chan {
        mut stop,
        done,
        wake,
    } = chan;
    let client = |path: &str| match &remote {
        Some(up) => mcp::McpClient::remote(port, Arc::clone(up)),
        None => mcp::McpClient::new(port, path.to_owned()),
    };
    // A remote server is probed at its upstream, whatever the block says.
    let mut mcp = match cfg.as_ref().map(|c| &c.probe) {
        Some(_) if remote.is_some() => Some(client("")),
        Some(ProbeKind::Mcp(path)) => Some(client(path)),
        _ => None,
    };
    // The listing shares the probe's session when both ask the same endpoint.
    let shared = mcp.is_some()
        && duty.as_ref().is_some_and(|d| {
            remote.is_some()
                || matches!(cfg.as_ref().map(|c| &c.probe), Some(ProbeKind::Mcp(p)) if *p == d.path)
        });
    let mut lister = duty.as_ref().filter(|_| !shared).map(|d| client(&d.path));
    let as_mcp = ProbeKind::Mcp(String::new());
    let start = tokio::time::Instant::now();
    let mut next_probe = cfg.as_ref().map(|c| start + c.interval.min(FIRST_PROBE));
    let mut phase = cfg.as_ref().map(|c| phase(port, c.interval));
    let mut list = duty
        .as_ref()
        .map(|_| listing::State::Due(listing::Retry::starting(start)));
    loop {
        let idle = matches!(
            list,
            Some(listing::State::Listed(_) | listing::State::GaveUp)
        );
        let work = tokio::select! {
            _ = &mut stop => break,
            () = until(next_probe) => Work::Probe,
            () = wake.notified(), if cfg.is_some() => Work::Probe,
            () = until(list.and_then(listing::State::due)) => Work::List,
            () = async {
                match &duty {
                    Some(d) => d.relist.notified().await,
                    None => std::future::pending().await,
                }
            }, if idle => Work::Relist,
        };
        let now = tokio::time::Instant::now();
        match work {
            Work::Relist => list = list.map(|l| l.woken(now)),
            Work::List => {
                let (Some(d), Some(state)) = (&duty, list) else {
                    continue;
                };
                let client = if shared {
                    mcp.as_mut()
                } else {
                    lister.as_mut()
                };
                let Some(client) = client else {
                    continue;
                };
                match listing::step(client, !shared, state, d, &mut stop).await {
                    Some(next) => list = Some(next),
                    None => break,
                }
            }
            Work::Probe => {
                let Some(cfg) = &cfg else {
                    continue;
                };
                let interval = cfg.interval + phase.take().unwrap_or_default();
                let started = Instant::now();
                // Boxed: the exchange's state (hyper's connection, buffers) lives
                // only while a probe runs, not in every idle probe task.
                let probe = tokio::time::timeout(
                    cfg.timeout,
                    Box::pin(probe_once(
                        if mcp.is_some() { &as_mcp } else { &cfg.probe },
                        port,
                        mcp.as_mut(),
                    )),
                );
                // Not cut short by a stop: an `initialize` in flight may already
                // have opened a session the server will keep unless we learn its id
                // and end it (the exchange is bounded by the timeout anyway).
                let outcome = match probe.await {
                    Ok(outcome) => outcome,
                    Err(_) => Err(format!(
                        "no answer within {}",
                        humantime::format_duration(cfg.timeout)
                    )),
                };
                if listing::stopped(&mut stop) {
                    break;
                }
                // The interval runs from the end of a probe.
                next_probe = Some(tokio::time::Instant::now() + interval);
                let latency = started.elapsed();
                let at = SystemTime::now();
                let found = outcome
                    .is_ok()
                    .then(|| mcp.as_ref().and_then(|c| c.info().cloned()))
                    .flatten()
                    .map(|info| McpReport { info });
                if found.is_some() && shared {
                    // The session answers: the listing need not wait.
                    list = list.map(|l| l.answered(tokio::time::Instant::now()));
                }
                let r = ProbeReport {
                    outcome,
                    latency,
                    at,
                    mcp: found,
                };
                if !report(r) {
                    break;
                }
            }
        }
    }
    for client in [mcp.as_mut(), lister.as_mut()].into_iter().flatten() {
        let timeout = cfg.as_ref().map_or(listing::ATTEMPT_TIMEOUT, |c| c.timeout);
        if let Ok(Err(e)) = tokio::time::timeout(timeout, client.close()).await {
            // Only the HTTP status or a transport error: no server text.
            tracing::debug!(port, error = %e, "ending the probe's MCP session failed");
        }
    }
    drop(done);
}

/// Where in its interval a server's probes fall: servers started together
/// (every server at boot) would otherwise probe in lock-step, 200 probes and
/// 200 log writes in the same millisecond, every interval. The second probe
/// comes this much later than the interval, a fraction of it picked by the
/// port (Knuth's multiplicative hash: neighbouring ports land far apart).
fn phase(port: u16, interval: Duration) -> Duration {
    let fraction = f64::from(port.wrapping_mul(40_503)) / 65_536.0;
    interval.mul_f64(fraction)
}

async fn probe_once(
    kind: &ProbeKind,
    port: u16,
    mcp: Option<&mut mcp::McpClient>,
) -> Result<String, String> {
    match (kind, mcp) {
        (ProbeKind::Mcp(_), Some(client)) => client.probe().await,
        (ProbeKind::Http(path), _) => {
            let r = http::request(port, "GET", path, &[], None, &|_| false).await?;
            if (200..300).contains(&r.status) {
                Ok(format!("HTTP {}", r.status))
            } else {
                Err(format!("GET {path} answered HTTP {}", r.status))
            }
        }
        _ => tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .map(|_| "connected".to_owned())
            .map_err(|e| format!("connect to 127.0.0.1:{port}: {e}")),
    }
}

/// A health change: from, to, and the probe's finding.
pub(crate) type Change = (HealthState, HealthState, String);

/// Turns probe results into a verdict (pure; the caller passes `now`).
#[derive(Debug, Clone)]
pub(crate) struct Tracker {
    failures: u32,
    start_period: Duration,
    started: Instant,
    consecutive: u32,
    healthy_once: bool,
    health: Health,
}

impl Tracker {
    /// A fresh child: `starting`.
    pub(crate) fn new(cfg: &HealthConfig, now: Instant) -> Tracker {
        Tracker {
            failures: cfg.failures.max(1),
            start_period: cfg.start_period,
            started: now,
            consecutive: 0,
            healthy_once: false,
            health: Health {
                state: HealthState::Starting,
                ..Health::default()
            },
        }
    }

    /// What `list` shows.
    pub(crate) fn health(&self) -> &Health {
        &self.health
    }

    /// Consecutive failures so far.
    pub(crate) fn consecutive(&self) -> u32 {
        self.consecutive
    }

    /// `unhealthy` now, for `why` (a remote's credentials failed: waiting
    /// for probes to count would only delay what is already known).
    pub(crate) fn fail_now(&mut self, why: &str, at: SystemTime) -> Option<Change> {
        let from = self.health.state;
        self.consecutive = self.consecutive.max(self.failures);
        self.health.error = Some(why.to_owned());
        self.health.checked_at = Some(xy_core::time::rfc3339_ms(at));
        self.health.state = HealthState::Unhealthy;
        (from != HealthState::Unhealthy).then(|| (from, HealthState::Unhealthy, why.to_owned()))
    }

    /// Takes one result; returns the change of verdict, if any. Failures
    /// inside the start period, before the first success, do not count.
    pub(crate) fn observe(&mut self, r: &ProbeReport, now: Instant) -> Option<Change> {
        let from = self.health.state;
        self.health.latency_ms = Some(xy_core::time::as_millis_u64(r.latency));
        self.health.checked_at = Some(xy_core::time::rfc3339_ms(r.at));
        let (to, reason) = match &r.outcome {
            Ok(note) => {
                self.consecutive = 0;
                self.healthy_once = true;
                self.health.error = None;
                (
                    HealthState::Healthy,
                    format!("{note} in {} ms", self.health.latency_ms.unwrap_or(0)),
                )
            }
            Err(e) => {
                self.health.error = Some(e.clone());
                let grace = !self.healthy_once
                    && now.saturating_duration_since(self.started) < self.start_period;
                if grace {
                    (from, e.clone())
                } else {
                    self.consecutive += 1;
                    if self.consecutive >= self.failures {
                        let n = self.consecutive;
                        let s = if n == 1 { "" } else { "s" };
                        (HealthState::Unhealthy, format!("{n} failed probe{s}: {e}"))
                    } else {
                        (from, e.clone())
                    }
                }
            }
        };
        self.health.state = to;
        (to != from).then_some((from, to, reason))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::log_router::redact::MAX_TEXT;

    // Issue 26: a probe's error text reached daemon.log, status and events
    // with the child's secret in it, and without a length bound.
    #[test]
    fn every_report_text_is_redacted_then_bounded() {
        let r = Redactor::new([("TOKEN", "tok-7Hq2-Zr9v")]).unwrap();
        let report = ProbeReport {
            outcome: Err(format!(
                "ping failed: bad token tok-7Hq2-Zr9v {}",
                "x".repeat(400)
            )),
            latency: Duration::ZERO,
            at: SystemTime::UNIX_EPOCH,
            mcp: None,
        }
        .scrubbed(Some(&r));
        let why = report.outcome.unwrap_err();
        assert!(
            why.starts_with("ping failed: bad token [redacted:TOKEN] xxx"),
            "{why}"
        );
        assert_eq!(why.chars().count(), MAX_TEXT);
        assert!(why.ends_with('…'));
        // A cut never leaves the start of a value: redaction comes first.
        let near_end = format!("{}tok-7Hq2-Zr9v", "y".repeat(MAX_TEXT - 5));
        assert!(!scrub(near_end, Some(&r)).contains("tok-"));
        assert_eq!(scrub("short".into(), None), "short");
    }

    #[test]
    fn consecutive_ports_spread_their_probes_over_the_interval() {
        let interval = Duration::from_secs(2);
        let mut tenths = [0u32; 10];
        for port in 24_000..24_200 {
            let p = phase(port, interval);
            assert!(p < interval, "{port}: {p:?}");
            tenths[(p.as_secs_f64() / 0.2) as usize] += 1;
        }
        // 200 servers, 10 slices of 200 ms: about 20 each, none crowded.
        assert!(tenths.iter().all(|&n| (10..=30).contains(&n)), "{tenths:?}");
    }

    fn cfg(failures: u32, start_period: Duration) -> HealthConfig {
        HealthConfig {
            failures,
            start_period,
            ..HealthConfig::new(ProbeKind::Tcp)
        }
    }

    fn ok() -> ProbeReport {
        ProbeReport {
            outcome: Ok("ping answered".into()),
            latency: Duration::from_millis(3),
            at: SystemTime::UNIX_EPOCH,
            mcp: None,
        }
    }

    fn fail() -> ProbeReport {
        ProbeReport {
            outcome: Err("refused".into()),
            latency: Duration::from_millis(1),
            at: SystemTime::UNIX_EPOCH,
            mcp: None,
        }
    }

    #[test]
    fn start_period_then_failures_then_recovery() {
        let t0 = Instant::now();
        let mut t = Tracker::new(&cfg(2, Duration::from_secs(10)), t0);
        assert_eq!(t.health().state, HealthState::Starting);
        // Inside the start period: failures do not count.
        assert_eq!(t.observe(&fail(), t0 + Duration::from_secs(1)), None);
        assert_eq!(t.consecutive(), 0);
        assert_eq!(t.health().error.as_deref(), Some("refused"));
        // After it: two failures make it unhealthy.
        let late = t0 + Duration::from_secs(11);
        assert_eq!(t.observe(&fail(), late), None);
        assert_eq!(t.health().state, HealthState::Starting);
        let change = t.observe(&fail(), late).unwrap();
        assert_eq!(
            change,
            (
                HealthState::Starting,
                HealthState::Unhealthy,
                "2 failed probes: refused".into()
            )
        );
        // Staying unhealthy is no change; a success is.
        assert_eq!(t.observe(&fail(), late), None);
        let change = t.observe(&ok(), late).unwrap();
        assert_eq!(change.1, HealthState::Healthy);
        assert_eq!(change.2, "ping answered in 3 ms");
        let h = t.health();
        assert_eq!((h.latency_ms, h.error.as_deref()), (Some(3), None));
        assert_eq!(h.checked_at.as_deref(), Some("1970-01-01T00:00:00.000Z"));
    }

    #[test]
    fn once_healthy_the_start_period_no_longer_shields() {
        let t0 = Instant::now();
        let mut t = Tracker::new(&cfg(1, Duration::from_secs(60)), t0);
        assert_eq!(t.observe(&ok(), t0).unwrap().1, HealthState::Healthy);
        let change = t.observe(&fail(), t0 + Duration::from_secs(1)).unwrap();
        assert_eq!(change.1, HealthState::Unhealthy);
        assert_eq!(change.2, "1 failed probe: refused");
    }

    #[tokio::test]
    async fn probe_now_does_not_wait_for_the_interval() {
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = l.local_addr().unwrap().port();
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let mut c = HealthConfig::new(ProbeKind::Tcp);
        c.interval = Duration::from_secs(3600);
        let task = ProbeTask::spawn(Some(c), port, None, None, move |r| tx.send(r).is_ok(), None);
        // The first probe comes within FIRST_PROBE; the next would take an hour.
        let first = tokio::time::timeout(
            xy_testbins::wait::scaled(Duration::from_secs(10)),
            rx.recv(),
        )
        .await;
        assert!(first.unwrap().is_some());
        task.probe_now();
        let second = tokio::time::timeout(
            xy_testbins::wait::scaled(Duration::from_secs(10)),
            rx.recv(),
        )
        .await;
        assert_eq!(second.unwrap().unwrap().outcome, Ok("connected".into()));
        task.stop().await;
    }

    #[tokio::test]
    async fn tcp_probe_and_stop() {
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = l.local_addr().unwrap().port();
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let mut c = HealthConfig::new(ProbeKind::Tcp);
        c.interval = Duration::from_millis(20);
        let task = ProbeTask::spawn(
            Some(c.clone()),
            port,
            None,
            None,
            move |r| tx.send(r).is_ok(),
            None,
        );
        let r = rx.recv().await.unwrap();
        assert_eq!(r.outcome, Ok("connected".into()));
        task.stop().await;
        drop(l);
        // A closed port fails.
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let task = ProbeTask::spawn(Some(c), port, None, None, move |r| tx.send(r).is_ok(), None);
        let r = rx.recv().await.unwrap();
        assert!(r.outcome.unwrap_err().contains("connect to 127.0.0.1"));
        drop(task);
        // Dropping the handle ends the task: the channel closes.
        assert!(
            tokio::time::timeout(xy_testbins::wait::scaled(Duration::from_secs(5)), async {
                while rx.recv().await.is_some() {}
            })
            .await
            .is_ok()
        );
    }
}
