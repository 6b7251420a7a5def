//! Per-tool call figures since the daemon started (SPEC §20): calls,
//! errors and a fixed log-scale histogram of durations, from which p50 and
//! p99 are read. Fixed size whatever the call count: [`BUCKETS`] counters
//! per tool, and at most [`MAX_TOOLS`] tools per server (a client may call
//! any name, listed or not).

use std::collections::HashMap;

use xy_core::protocol::mcp::{CallOutcome, ToolCallStats};

/// Sub-buckets per power of two: a reported percentile is the midpoint of
/// its bucket, within 1/16 of the true value.
const SUB_BITS: u32 = 3;
const SUB: u64 = 1 << SUB_BITS;
/// Durations are capped here (2^34 µs, over four hours).
const MAX_US: u64 = (1 << 34) - 1;
/// Buckets per histogram: exact below `2 * SUB`, then `SUB` per octave.
pub(crate) const BUCKETS: usize = bucket(MAX_US) + 1;
/// Tools with figures per server; calls to further names are still
/// recorded on disk, only not counted here.
pub(crate) const MAX_TOOLS: usize = 256;

/// The bucket of a duration in microseconds.
const fn bucket(us: u64) -> usize {
    let v = if us > MAX_US { MAX_US } else { us };
    if v < 2 * SUB {
        return v as usize;
    }
    let octave = 63 - v.leading_zeros();
    let shift = octave - SUB_BITS;
    ((shift as u64) * SUB + (v >> shift)) as usize
}

/// The value a bucket stands for: the middle of its range.
fn value(idx: usize) -> u64 {
    let idx = idx as u64;
    if idx < 2 * SUB {
        return idx;
    }
    let shift = idx / SUB - 1;
    let low = (idx % SUB + SUB) << shift;
    low + ((1u64 << shift) >> 1)
}

/// A fixed log-scale histogram of durations.
#[derive(Debug, Clone)]
pub(crate) struct Histogram {
    counts: Box<[u32; BUCKETS]>,
    total: u64,
}

impl Default for Histogram {
    fn default() -> Histogram {
        Histogram {
            counts: Box::new([0; BUCKETS]),
            total: 0,
        }
    }
}

impl Histogram {
    pub(crate) fn add(&mut self, us: u64) {
        let c = &mut self.counts[bucket(us)];
        // A saturated bucket stops counting; the total keeps ranks right
        // for every other bucket (four billion calls of one duration first).
        if *c < u32::MAX {
            *c += 1;
            self.total += 1;
        }
    }

    /// The `q` quantile (0 < q ≤ 1); 0 when empty.
    pub(crate) fn quantile(&self, q: f64) -> u64 {
        if self.total == 0 {
            return 0;
        }
        // Rank of the quantile, 1-based: ceil(q × n), at least 1.
        #[allow(
            clippy::cast_possible_truncation,
            clippy::cast_sign_loss,
            clippy::cast_precision_loss
        )]
        let rank = ((q * self.total as f64).ceil() as u64).clamp(1, self.total);
        let mut seen = 0u64;
        for (i, c) in self.counts.iter().enumerate() {
            seen += u64::from(*c);
            if seen >= rank {
                return value(i).min(MAX_US);
            }
        }
        value(BUCKETS - 1)
    }
}

/// One tool's figures.
#[derive(Debug, Clone, Default)]
pub(crate) struct ToolFigures {
    calls: u64,
    errors: u64,
    /// Durations of the calls a server answered (ok, tool error, JSON-RPC
    /// error): a held-back call or one whose child died says nothing about
    /// how fast the tool is.
    durations: Histogram,
}

impl ToolFigures {
    fn add(&mut self, us: u64, outcome: CallOutcome) {
        self.calls += 1;
        if outcome != CallOutcome::Ok {
            self.errors += 1;
        }
        if matches!(
            outcome,
            CallOutcome::Ok | CallOutcome::ToolError | CallOutcome::RpcError
        ) {
            self.durations.add(us);
        }
    }

    pub(crate) fn stats(&self) -> ToolCallStats {
        ToolCallStats {
            calls: self.calls,
            errors: self.errors,
            p50_us: self.durations.quantile(0.50),
            p99_us: self.durations.quantile(0.99),
        }
    }
}

/// One server's figures: per tool, bounded.
#[derive(Debug, Default)]
pub(crate) struct ServerFigures {
    tools: HashMap<String, ToolFigures>,
    /// Calls recorded since the daemon started (every tool, counted or not).
    pub(crate) total: u64,
}

impl ServerFigures {
    pub(crate) fn add(&mut self, tool: &str, us: u64, outcome: CallOutcome) {
        self.total += 1;
        if let Some(f) = self.tools.get_mut(tool) {
            f.add(us, outcome);
        } else if self.tools.len() < MAX_TOOLS {
            self.tools
                .entry(tool.to_owned())
                .or_default()
                .add(us, outcome);
        }
    }

    pub(crate) fn get(&self, tool: &str) -> Option<ToolCallStats> {
        self.tools.get(tool).map(ToolFigures::stats)
    }

    #[cfg(test)]
    pub(crate) fn tools(&self) -> usize {
        self.tools.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_are_continuous_and_values_fall_in_their_bucket() {
        let mut last = 0;
        for us in 0..100_000u64 {
            let b = bucket(us);
            assert!(b == last || b == last + 1, "{us}: {last} → {b}");
            last = b;
        }
        for us in [
            0,
            1,
            15,
            16,
            17,
            100,
            1000,
            12_345,
            1 << 20,
            7_777_777,
            MAX_US,
        ] {
            let v = value(bucket(us));
            assert_eq!(bucket(v), bucket(us), "{us} → {v}");
            let err = v.abs_diff(us) as f64 / us.max(1) as f64;
            assert!(err <= 1.0 / 16.0, "{us} reported as {v}");
        }
        assert_eq!(bucket(u64::MAX), BUCKETS - 1, "capped");
        const { assert!(BUCKETS < 300) };
    }

    #[test]
    fn quantiles_of_a_known_spread() {
        let mut h = Histogram::default();
        assert_eq!(h.quantile(0.5), 0, "empty");
        for us in 1..=1000u64 {
            h.add(us * 100);
        }
        let p50 = h.quantile(0.50);
        let p99 = h.quantile(0.99);
        assert!(p50.abs_diff(50_000) <= 50_000 / 16, "p50 {p50}");
        assert!(p99.abs_diff(99_000) <= 99_000 / 16, "p99 {p99}");
        let mut one = Histogram::default();
        one.add(7);
        assert_eq!((one.quantile(0.5), one.quantile(0.99)), (7, 7));
    }

    #[test]
    fn errors_count_and_only_answered_calls_have_durations() {
        let mut s = ServerFigures::default();
        s.add("t", 1000, CallOutcome::Ok);
        s.add("t", 1000, CallOutcome::ToolError);
        s.add("t", 3_000_000, CallOutcome::HeldBack);
        s.add("t", 3_000_000, CallOutcome::ChildGone);
        let st = s.get("t").unwrap();
        assert_eq!((st.calls, st.errors), (4, 3));
        assert_eq!(
            (st.p50_us, st.p99_us),
            (value(bucket(1000)), value(bucket(1000)))
        );
        assert_eq!(s.get("other"), None);
    }

    #[test]
    fn tools_beyond_the_cap_are_counted_in_the_total_only() {
        let mut s = ServerFigures::default();
        for i in 0..(MAX_TOOLS + 100) {
            s.add(&format!("tool-{i}"), 5, CallOutcome::Ok);
        }
        assert_eq!(s.tools(), MAX_TOOLS);
        assert_eq!(s.total, (MAX_TOOLS + 100) as u64);
        // A tool counted already keeps counting.
        s.add("tool-0", 5, CallOutcome::Ok);
        assert_eq!(s.get("tool-0").unwrap().calls, 2);
    }
}
