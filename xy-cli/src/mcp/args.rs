//! The arguments of `xyctl mcp`'s tools, checked before anything reaches
//! xyd: a bad call becomes one sentence the agent can act on (a tool
//! error), never a protocol error it cannot see.

use serde_json::{Map, Value};

/// `server_logs` lines when `tail` is not given.
pub(crate) const DEFAULT_TAIL: u32 = 100;
/// The most lines `server_logs` returns; a larger `tail` is capped.
pub(crate) const MAX_TAIL: u32 = 500;
/// Longest log line returned; longer ones are cut (with a marker) so one
/// runaway line cannot flood the agent's context.
pub(crate) const MAX_LINE_CHARS: usize = 2000;
/// Longest `grep` accepted.
pub(crate) const MAX_GREP_CHARS: usize = 200;

/// A checked `server_logs` call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct LogsArgs {
    /// The server.
    pub(crate) name: String,
    /// Lines wanted, `1..=MAX_TAIL`.
    pub(crate) tail: u32,
    /// The `tail` asked for, when it was above [`MAX_TAIL`].
    pub(crate) capped_from: Option<u64>,
    /// Case-insensitive substring every returned line contains.
    pub(crate) grep: Option<String>,
}

/// The `name` every per-server tool takes: a non-empty string.
pub(crate) fn name(args: Option<&Map<String, Value>>) -> Result<String, String> {
    match args.and_then(|a| a.get("name")) {
        None | Some(Value::Null) => {
            Err("missing argument `name`: the server's name (see list_servers)".to_owned())
        }
        Some(Value::String(s)) if s.trim().is_empty() => {
            Err("argument `name` is empty: give a server's name (see list_servers)".to_owned())
        }
        Some(Value::String(s)) => Ok(s.clone()),
        Some(other) => Err(format!(
            "argument `name` must be a string, got {}",
            json_type(other)
        )),
    }
}

/// `server_logs {name, tail?, grep?}`.
pub(crate) fn logs(args: Option<&Map<String, Value>>) -> Result<LogsArgs, String> {
    let name = name(args)?;
    let (tail, capped_from) = match args.and_then(|a| a.get("tail")) {
        None | Some(Value::Null) => (DEFAULT_TAIL, None),
        Some(Value::Number(n)) => match n.as_u64() {
            Some(0) => return Err(format!("`tail` must be at least 1 (at most {MAX_TAIL})")),
            Some(t) if t > u64::from(MAX_TAIL) => (MAX_TAIL, Some(t)),
            // Bounded by MAX_TAIL just above.
            Some(t) => (u32::try_from(t).unwrap_or(MAX_TAIL), None),
            None => {
                return Err(format!(
                    "`tail` must be a whole number of lines from 1 to {MAX_TAIL}, got {n}"
                ));
            }
        },
        Some(other) => {
            return Err(format!(
                "`tail` must be a whole number of lines from 1 to {MAX_TAIL}, got {}",
                json_type(other)
            ));
        }
    };
    let grep = match args.and_then(|a| a.get("grep")) {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) if s.is_empty() => None,
        Some(Value::String(s)) if s.chars().count() > MAX_GREP_CHARS => {
            return Err(format!(
                "`grep` is longer than {MAX_GREP_CHARS} characters; give a shorter substring"
            ));
        }
        Some(Value::String(s)) => Some(s.clone()),
        Some(other) => {
            return Err(format!(
                "`grep` must be a string (a case-insensitive substring), got {}",
                json_type(other)
            ));
        }
    };
    Ok(LogsArgs {
        name,
        tail,
        capped_from,
        grep,
    })
}

/// Whether `line` contains `needle`, ignoring case (Unicode-aware).
pub(crate) fn matches(line: &str, needle: &str) -> bool {
    if needle.is_empty() {
        return true;
    }
    if line.is_ascii() && needle.is_ascii() {
        return line
            .as_bytes()
            .windows(needle.len())
            .any(|w| w.eq_ignore_ascii_case(needle.as_bytes()));
    }
    line.to_lowercase().contains(&needle.to_lowercase())
}

/// `line`, cut to [`MAX_LINE_CHARS`] characters with a note of how much
/// was dropped.
pub(crate) fn clip(line: &str) -> String {
    let total = line.chars().count();
    if total <= MAX_LINE_CHARS {
        return line.to_owned();
    }
    let kept: String = line.chars().take(MAX_LINE_CHARS).collect();
    format!("{kept}… [{} more characters]", total - MAX_LINE_CHARS)
}

fn json_type(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn obj(v: Value) -> Map<String, Value> {
        v.as_object().cloned().unwrap()
    }

    #[test]
    fn name_must_be_a_non_empty_string() {
        assert_eq!(name(Some(&obj(json!({"name": "web"})))), Ok("web".into()));
        assert!(name(None).unwrap_err().contains("missing argument `name`"));
        assert!(
            name(Some(&obj(json!({"name": "  "}))))
                .unwrap_err()
                .contains("empty")
        );
        assert_eq!(
            name(Some(&obj(json!({"name": 3})))).unwrap_err(),
            "argument `name` must be a string, got a number"
        );
    }

    #[test]
    fn tail_defaults_caps_and_rejects() {
        let a = logs(Some(&obj(json!({"name": "web"})))).unwrap();
        assert_eq!((a.tail, a.capped_from, a.grep), (DEFAULT_TAIL, None, None));
        let a = logs(Some(&obj(json!({"name": "web", "tail": 7})))).unwrap();
        assert_eq!(a.tail, 7);
        let a = logs(Some(&obj(json!({"name": "web", "tail": 500})))).unwrap();
        assert_eq!((a.tail, a.capped_from), (500, None));
        let a = logs(Some(&obj(json!({"name": "web", "tail": 100_000})))).unwrap();
        assert_eq!((a.tail, a.capped_from), (MAX_TAIL, Some(100_000)));
        for bad in [json!(0), json!(-1), json!(2.5), json!("10"), json!([1])] {
            let e = logs(Some(&obj(json!({"name": "web", "tail": bad})))).unwrap_err();
            assert!(e.starts_with("`tail` must"), "{bad}: {e}");
        }
    }

    #[test]
    fn grep_is_a_bounded_string() {
        let a = logs(Some(&obj(json!({"name": "web", "grep": "ERROR"})))).unwrap();
        assert_eq!(a.grep.as_deref(), Some("ERROR"));
        let a = logs(Some(&obj(json!({"name": "web", "grep": ""})))).unwrap();
        assert_eq!(a.grep, None);
        let long = "x".repeat(MAX_GREP_CHARS + 1);
        assert!(
            logs(Some(&obj(json!({"name": "web", "grep": long}))))
                .unwrap_err()
                .contains("longer than")
        );
        assert!(
            logs(Some(&obj(json!({"name": "web", "grep": 1}))))
                .unwrap_err()
                .contains("must be a string")
        );
        // The name is checked first.
        assert!(logs(Some(&obj(json!({"grep": "x"})))).is_err());
    }

    #[test]
    fn grep_ignores_case() {
        assert!(matches("Error: missing API_TOKEN", "api_token"));
        assert!(matches("Fehler: ÜBEL", "übel"));
        assert!(!matches("all good", "error"));
        assert!(matches("x", ""));
        assert!(!matches("", "x"));
    }

    #[test]
    fn long_lines_are_clipped() {
        assert_eq!(clip("short"), "short");
        let long = "é".repeat(MAX_LINE_CHARS + 5);
        let c = clip(&long);
        assert!(
            c.ends_with("… [5 more characters]"),
            "{}",
            &c[c.len() - 40..]
        );
        assert_eq!(c.chars().filter(|&ch| ch == 'é').count(), MAX_LINE_CHARS);
    }
}
