//! SPEC §10: the `health { … }` block — both KDL versions, defaults, every
//! mistake reported with its position, and its place in the settings reload compares.

use std::time::Duration;

mod support;

use support::{HEAD, errors, ok};
use xy_core::config::{
    DEFAULT_HEALTH_FAILURES, DEFAULT_HEALTH_INTERVAL, DEFAULT_HEALTH_START_PERIOD,
    DEFAULT_HEALTH_TIMEOUT, HealthConfig, ProbeKind,
};
use xy_core::protocol::DiagnosticKind;

fn health(src: &str) -> HealthConfig {
    ok(&format!("{HEAD}{src}")).health.expect("health parsed")
}

#[test]
fn full_block_kdl_v2() {
    let h = health(
        "health {\n  mcp \"/mcp\"\n  interval \"5s\"\n  timeout \"1s\"\n  failures 2\n  \
         start-period \"20s\"\n  restart-on-failure #true\n}\n",
    );
    assert_eq!(
        h,
        HealthConfig {
            probe: ProbeKind::Mcp("/mcp".into()),
            interval: Duration::from_secs(5),
            timeout: Duration::from_secs(1),
            failures: 2,
            start_period: Duration::from_secs(20),
            restart_on_failure: true,
        }
    );
}

#[test]
fn v1_booleans_load_too() {
    // `true` without `#` is KDL v1; the parser falls back to v1 for the file.
    let h = health("health {\n  http \"/healthz\"\n  restart-on-failure true\n}\n");
    assert_eq!(h.probe, ProbeKind::Http("/healthz".into()));
    assert!(h.restart_on_failure);
    let h = health("health {\n  tcp\n  restart-on-failure false\n}\n");
    assert!(!h.restart_on_failure);
}

#[test]
fn defaults_and_bare_probes() {
    let h = health("health {\n  tcp\n}\n");
    assert_eq!(h.probe, ProbeKind::Tcp);
    assert_eq!(h.interval, DEFAULT_HEALTH_INTERVAL);
    assert_eq!(h.timeout, DEFAULT_HEALTH_TIMEOUT);
    assert_eq!(h.failures, DEFAULT_HEALTH_FAILURES);
    assert_eq!(h.start_period, DEFAULT_HEALTH_START_PERIOD);
    assert!(!h.restart_on_failure);
    assert_eq!(
        health("health {\n  mcp\n}\n").probe,
        ProbeKind::Mcp("/mcp".into())
    );
    assert_eq!(
        health("health {\n  http\n}\n").probe,
        ProbeKind::Http("/".into())
    );
    assert!(ok(HEAD).health.is_none());
    let s = health("health {\n  mcp\n}\n").settings();
    assert_eq!((s.probe.as_str(), s.path.as_deref()), ("mcp", Some("/mcp")));
}

#[test]
fn mistakes_are_reported_with_positions() {
    let src = format!(
        "{HEAD}health {{\n  mcp \"/mcp\"\n  tcp\n  failures 0\n  restart-on-failure \"yes\"\n  \
         intervall \"1s\"\n  timeout \"0s\"\n}}\n"
    );
    let diags = errors(&src);
    let got: Vec<(DiagnosticKind, usize, &str)> = diags
        .iter()
        .map(|d| (d.kind, d.line, d.message.as_str()))
        .collect();
    assert_eq!(diags.len(), 5, "{got:#?}");
    assert!(
        got[0].2.contains("exactly one probe") && got[0].1 == 5,
        "{got:?}"
    );
    assert!(got[1].2.contains("at least 1") && got[1].1 == 6, "{got:?}");
    assert!(
        got[2].2.contains("expects a boolean") && got[2].1 == 7,
        "{got:?}"
    );
    assert_eq!(got[3].0, DiagnosticKind::UnknownNode);
    assert_eq!(diags[3].help.as_deref(), Some("did you mean interval?"));
    assert!(
        got[4].2.contains("longer than zero") && got[4].1 == 9,
        "{got:?}"
    );
}

#[test]
fn missing_probe_and_bad_paths() {
    let d = errors(&format!("{HEAD}health {{\n  interval \"1s\"\n}}\n"));
    assert_eq!(d.len(), 1, "{d:#?}");
    assert_eq!(d[0].kind, DiagnosticKind::MissingField);
    assert!(d[0].message.contains("needs a probe"), "{d:?}");
    let d = errors(&format!("{HEAD}health {{\n  http \"healthz\"\n}}\n"));
    assert!(d[0].message.contains("must start with `/`"), "{d:?}");
    let d = errors(&format!("{HEAD}health {{\n  tcp 8421\n}}\n"));
    assert!(d[0].message.contains("takes no value"), "{d:?}");
    // A probe at the top level points to its home.
    let d = errors(&format!("{HEAD}failures 3\n"));
    assert_eq!(
        d[0].help.as_deref(),
        Some("`failures` belongs inside `health { }`")
    );
}

#[test]
fn health_is_part_of_the_settings() {
    let none = ok(HEAD);
    let tcp = ok(&format!("{HEAD}health {{\n  tcp\n}}\n"));
    let tcp_fast = ok(&format!("{HEAD}health {{\n  tcp\n  interval \"1s\"\n}}\n"));
    let mcp = ok(&format!("{HEAD}health {{\n  mcp\n}}\n"));
    assert!(none.settings() != tcp.settings());
    assert!(tcp.settings() != tcp_fast.settings());
    assert!(tcp.settings() != mcp.settings());
    // Formatting alone changes nothing.
    let tcp2 = ok(&format!("{HEAD}\nhealth {{ tcp; }}\n"));
    assert!(tcp.settings() == tcp2.settings());
}
