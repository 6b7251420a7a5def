//! Durations and timestamps as xy shows them: humantime parsing for configs,
//! RFC 3339 UTC with milliseconds on the wire and in log files, and compact
//! human durations (`2h 3m`) for tables.

use std::time::{Duration, SystemTime};

/// Parses a humantime duration (`"1s"`, `"250ms"`, `"1m 30s"`).
pub fn parse_duration(s: &str) -> Result<Duration, humantime::DurationError> {
    humantime::parse_duration(s)
}

/// RFC 3339 UTC with millisecond precision: `2026-11-30T05:04:54.123Z`.
pub fn rfc3339_ms(t: SystemTime) -> String {
    humantime::format_rfc3339_millis(t).to_string()
}

/// The current time as [`rfc3339_ms`].
pub fn now_rfc3339() -> String {
    rfc3339_ms(SystemTime::now())
}

/// Whole milliseconds of a duration, saturating.
pub fn as_millis_u64(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// Compact human duration with the two largest units: `45s`, `3m 12s`,
/// `2h 3m`, `4d 1h`.
pub fn human_secs(secs: u64) -> String {
    const MIN: u64 = 60;
    const HOUR: u64 = 60 * MIN;
    const DAY: u64 = 24 * HOUR;
    let two = |big: u64, big_u: &str, small: u64, small_u: &str| {
        if small == 0 {
            format!("{big}{big_u}")
        } else {
            format!("{big}{big_u} {small}{small_u}")
        }
    };
    if secs >= DAY {
        two(secs / DAY, "d", (secs % DAY) / HOUR, "h")
    } else if secs >= HOUR {
        two(secs / HOUR, "h", (secs % HOUR) / MIN, "m")
    } else if secs >= MIN {
        two(secs / MIN, "m", secs % MIN, "s")
    } else {
        format!("{secs}s")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn human() {
        assert_eq!(human_secs(0), "0s");
        assert_eq!(human_secs(59), "59s");
        assert_eq!(human_secs(60), "1m");
        assert_eq!(human_secs(192), "3m 12s");
        assert_eq!(human_secs(2 * 3600 + 3 * 60 + 9), "2h 3m");
        assert_eq!(human_secs(3600), "1h");
        assert_eq!(human_secs(4 * 86400 + 3600 + 5), "4d 1h");
    }

    #[test]
    fn rfc3339() {
        let t = SystemTime::UNIX_EPOCH + Duration::from_millis(1_700_000_000_123);
        assert_eq!(rfc3339_ms(t), "2023-11-14T22:13:20.123Z");
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration("1s").unwrap(), Duration::from_secs(1));
        assert_eq!(parse_duration("250ms").unwrap(), Duration::from_millis(250));
        assert!(parse_duration("soon").is_err());
        assert_eq!(as_millis_u64(Duration::from_secs(10)), 10_000);
    }
}
