//! The one sentence for how a child ended (`exited with code 1`, `killed by
//! SIGKILL`), shared by the lifecycle's transition reasons, `explain` and
//! anything else that words an exit.

/// `exited with code <c>`, `killed by <signal>`, or `exited`.
pub fn describe_exit(code: Option<i32>, signal: Option<&str>) -> String {
    match (code, signal) {
        (Some(c), _) => format!("exited with code {c}"),
        (None, Some(s)) => format!("killed by {s}"),
        (None, None) => "exited".to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::describe_exit;

    #[test]
    fn words() {
        assert_eq!(describe_exit(Some(1), None), "exited with code 1");
        assert_eq!(
            describe_exit(Some(0), Some("SIGTERM")),
            "exited with code 0"
        );
        assert_eq!(describe_exit(None, Some("SIGKILL")), "killed by SIGKILL");
        assert_eq!(describe_exit(None, None), "exited");
    }
}
