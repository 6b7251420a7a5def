//! The tools a 2025-era child offers only to clients of some capability
//! (SPEC §19, §24, D210): which capabilities xy's listing probes declare,
//! how their listings become each tool's needs ([`Gates::learn`]), and how
//! a client's declared capabilities decide what it is shown and may call.
//! A 2025 child is initialised once, declaring every capability a client
//! can have (D112), so its listing is that of the most capable client;
//! these gates make each client's listing that of its own capabilities.
//! Pure: the probes themselves run in `server/probe.rs`.

use std::collections::{BTreeSet, HashMap};

use serde_json::{Value, json};
use xy_core::protocol::mcp::{GATES_MAX, ServedGates};

/// One capability (or sub-capability) a client may declare, as far as a
/// server can tell them apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) enum Atom {
    Roots,
    Sampling,
    SamplingTools,
    SamplingContext,
    Elicitation,
    ElicitationForm,
    ElicitationUrl,
}

/// The capabilities a client's `initialize` (or `_meta`) can declare.
pub(crate) const TOP: [Atom; 3] = [Atom::Roots, Atom::Sampling, Atom::Elicitation];

impl Atom {
    /// The sub-capabilities of a top-level one.
    pub(crate) fn parts(self) -> &'static [Atom] {
        match self {
            Atom::Sampling => &[Atom::SamplingTools, Atom::SamplingContext],
            Atom::Elicitation => &[Atom::ElicitationForm, Atom::ElicitationUrl],
            _ => &[],
        }
    }

    /// Whether a client that declared `caps` has it. An empty
    /// `elicitation` object means form mode (2025-11-25).
    pub(crate) fn declared_in(self, caps: &Value) -> bool {
        let has = |p: &str| caps.pointer(p).is_some_and(Value::is_object);
        match self {
            Atom::Roots => has("/roots"),
            Atom::Sampling => has("/sampling"),
            Atom::SamplingTools => has("/sampling/tools"),
            Atom::SamplingContext => has("/sampling/context"),
            Atom::Elicitation => has("/elicitation"),
            Atom::ElicitationForm => {
                has("/elicitation/form")
                    || caps
                        .get("elicitation")
                        .and_then(Value::as_object)
                        .is_some_and(serde_json::Map::is_empty)
            }
            Atom::ElicitationUrl => has("/elicitation/url"),
        }
    }

    /// Its name in a ledger (`sampling.tools`).
    fn word(self) -> &'static str {
        match self {
            Atom::Roots => "roots",
            Atom::Sampling => "sampling",
            Atom::SamplingTools => "sampling.tools",
            Atom::SamplingContext => "sampling.context",
            Atom::Elicitation => "elicitation",
            Atom::ElicitationForm => "elicitation.form",
            Atom::ElicitationUrl => "elicitation.url",
        }
    }

    /// The atom a ledger names `word`.
    fn of_word(word: &str) -> Option<Atom> {
        TOP.iter()
            .flat_map(|t| std::iter::once(*t).chain(t.parts().iter().copied()))
            .find(|a| a.word() == word)
    }

    /// Where it sits in a capabilities object.
    fn path(self) -> (&'static str, Option<&'static str>) {
        match self {
            Atom::Roots => ("roots", None),
            Atom::Sampling => ("sampling", None),
            Atom::SamplingTools => ("sampling", Some("tools")),
            Atom::SamplingContext => ("sampling", Some("context")),
            Atom::Elicitation => ("elicitation", None),
            Atom::ElicitationForm => ("elicitation", Some("form")),
            Atom::ElicitationUrl => ("elicitation", Some("url")),
        }
    }
}

/// Every capability a client can have: what xy declares to a 2025 child
/// (D112), and its first listing probe.
pub(crate) fn everything() -> Value {
    json!({
        "roots": {"listChanged": true},
        "sampling": {"tools": {}, "context": {}},
        "elicitation": {"form": {}, "url": {}},
    })
}

/// [`everything`] without `atom`: a top-level one goes with its parts; a
/// part leaves its parent and the other parts declared.
pub(crate) fn everything_but(atom: Atom) -> Value {
    let mut caps = everything();
    let Some(all) = caps.as_object_mut() else {
        return caps;
    };
    match atom.path() {
        (top, None) => {
            all.remove(top);
        }
        (top, Some(part)) => {
            if let Some(o) = all.get_mut(top).and_then(Value::as_object_mut) {
                o.remove(part);
            }
        }
    }
    caps
}

/// The listing probes to run once the bare listing (nothing declared)
/// lacks tools of the full one: each top-level capability left out, then
/// the parts of each top-level one whose absence hid a tool.
pub(crate) fn second_round(
    full: &BTreeSet<String>,
    without: &[(Atom, BTreeSet<String>)],
) -> Vec<Atom> {
    TOP.iter()
        .filter(|a| {
            without
                .iter()
                .find(|(w, _)| w == *a)
                .is_none_or(|(_, l)| !full.is_subset(l))
        })
        .flat_map(|a| a.parts().iter().copied())
        .collect()
}

/// What a child gates, learnt from its listings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Gates {
    /// `false` while xy has not learnt them for the current child: a
    /// client that lacks any capability waits rather than be shown what
    /// it may not call.
    pub(crate) known: bool,
    /// Tool name → the capabilities a client must have declared.
    pub(crate) needs: HashMap<String, Vec<Atom>>,
    /// Why they could not be learnt, when they could not (all is shown).
    pub(crate) failed: Option<String>,
    /// Kept in the ledger for a listing of these tools and not yet
    /// confirmed by the current child's listing (D280): they decide a
    /// call of one of these tools at once; a client that lacks a
    /// capability waits to list, or to call another tool.
    pub(crate) provisional: Option<BTreeSet<String>>,
}

impl Default for Gates {
    fn default() -> Gates {
        Gates::none()
    }
}

impl Gates {
    /// Nothing gated (a 2026 child answers each client for itself; a
    /// child with no tools).
    pub(crate) fn none() -> Gates {
        Gates {
            known: true,
            needs: HashMap::new(),
            failed: None,
            provisional: None,
        }
    }

    /// Not learnt yet.
    pub(crate) fn unknown() -> Gates {
        Gates {
            known: false,
            ..Gates::none()
        }
    }

    /// The probes could not be run (`why`): all is shown, as a 2025 child
    /// lists it for xy.
    pub(crate) fn failed(why: String) -> Gates {
        Gates {
            failed: Some(why),
            ..Gates::none()
        }
    }

    /// From the full listing (every capability declared), the bare one
    /// (none) and those with one capability left out (`without`; a probe
    /// that failed is absent there, and counts as hiding every tool). A
    /// tool of the full listing that the bare one lacks needs each
    /// capability whose absence hides it, or all of them when no single
    /// absence does (it wants one of several).
    pub(crate) fn learn(
        full: &BTreeSet<String>,
        bare: &BTreeSet<String>,
        without: &[(Atom, BTreeSet<String>)],
        probed: &[Atom],
    ) -> Gates {
        let mut needs = HashMap::new();
        for tool in full.difference(bare) {
            let mut need: BTreeSet<Atom> = probed
                .iter()
                .copied()
                .filter(|a| {
                    without
                        .iter()
                        .find(|(w, _)| w == a)
                        .is_none_or(|(_, l)| !l.contains(tool))
                })
                .collect();
            // A part needs its parent.
            let parents: Vec<Atom> = need
                .iter()
                .filter_map(|a| TOP.iter().copied().find(|t| t.parts().contains(a)))
                .collect();
            need.extend(parents);
            if need.is_empty() {
                need = TOP.iter().copied().collect();
            }
            needs.insert(tool.clone(), need.into_iter().collect());
        }
        Gates {
            known: true,
            needs,
            failed: None,
            provisional: None,
        }
    }

    /// Whether some tool is gated.
    pub(crate) fn any(&self) -> bool {
        !self.needs.is_empty()
    }

    /// Whether a client that declared `caps` (`None`: nothing) must wait
    /// for the gates before it lists, or calls `call`: it lacks a
    /// capability and they are not known, or provisional and the request
    /// is no call of a tool they were learnt for.
    pub(crate) fn must_wait(&self, caps: Option<&Value>, call: Option<&str>) -> bool {
        let unsure = !self.known
            || self
                .provisional
                .as_ref()
                .is_some_and(|tools| call.is_none_or(|t| !tools.contains(t)));
        unsure
            && TOP
                .iter()
                .flat_map(|t| std::iter::once(*t).chain(t.parts().iter().copied()))
                .any(|a| !caps.is_some_and(|c| a.declared_in(c)))
    }

    /// The capabilities calling `tool` needs that `caps` lacks, as a
    /// `requiredCapabilities` object; `None` when it may call it.
    pub(crate) fn missing(&self, tool: &str, caps: Option<&Value>) -> Option<Value> {
        let need = self.needs.get(tool)?;
        let lacked: Vec<Atom> = need
            .iter()
            .copied()
            .filter(|a| !caps.is_some_and(|c| a.declared_in(c)))
            .collect();
        if lacked.is_empty() {
            return None;
        }
        let mut out = serde_json::Map::new();
        for a in lacked {
            let (top, part) = a.path();
            let entry = out.entry(top).or_insert_with(|| json!({}));
            if let (Some(p), Some(o)) = (part, entry.as_object_mut()) {
                o.insert(p.to_owned(), json!({}));
            }
        }
        Some(Value::Object(out))
    }

    /// Whether a listing for a client that declared `caps` loses a tool.
    pub(crate) fn hides_any(&self, caps: Option<&Value>) -> bool {
        self.needs.keys().any(|t| self.missing(t, caps).is_some())
    }

    /// Drops from a `tools/list` result the tools `caps` may not call.
    pub(crate) fn filter(&self, result: &mut Value, caps: Option<&Value>) {
        if !self.any() {
            return;
        }
        if let Some(tools) = result.get_mut("tools").and_then(Value::as_array_mut) {
            tools.retain(|t| {
                t.get("name")
                    .and_then(Value::as_str)
                    .is_none_or(|n| self.missing(n, caps).is_none())
            });
        }
    }

    /// The refusal of a call of `tool`, which needs `required` (SPEC §19:
    /// `-32021`, as when a child asks a client for what it lacks).
    pub(crate) fn refusal(server: &str, tool: &str, required: Value) -> (String, Value) {
        let what: Vec<&str> = required
            .as_object()
            .map(|o| o.keys().map(String::as_str).collect())
            .unwrap_or_default();
        let text = format!(
            "Missing required client capability: server {server} offers tool {tool} only to \
             clients that declare {} (xy refused the call for it)",
            what.join(" and ")
        );
        (
            text,
            json!({"requiredCapabilities": required, "server": server, "tool": tool}),
        )
    }
}

impl Gates {
    /// As the ledger keeps them for the listing `key` (D280); `None` when
    /// they are not worth keeping (not learnt, or the probes failed: the
    /// next daemon run probes again) or beyond [`GATES_MAX`] tools.
    pub(crate) fn stored(&self, key: &str) -> Option<ServedGates> {
        if !self.known || self.failed.is_some() || self.needs.len() > GATES_MAX {
            return None;
        }
        Some(ServedGates {
            listing: key.to_owned(),
            needs: self
                .needs
                .iter()
                .map(|(t, n)| (t.clone(), n.iter().map(|a| a.word().to_owned()).collect()))
                .collect(),
        })
    }

    /// What the ledger kept. A capability this xy does not know makes the
    /// tool need all of them (fail closed).
    pub(crate) fn from_stored(s: &ServedGates) -> Gates {
        let needs = s
            .needs
            .iter()
            .map(|(t, words)| {
                let atoms: Option<BTreeSet<Atom>> =
                    words.iter().map(|w| Atom::of_word(w)).collect();
                let atoms = match atoms {
                    Some(a) if !a.is_empty() => a,
                    _ => TOP.iter().copied().collect(),
                };
                (t.clone(), atoms.into_iter().collect())
            })
            .collect();
        Gates {
            known: true,
            needs,
            failed: None,
            provisional: None,
        }
    }
}

/// The key a listing's gates are kept by (D280): a SHA-256 over each
/// tool's name and digest, in name order, so that another tool set or a
/// changed definition is probed again.
pub(crate) fn listing_key(tools: &[Value]) -> String {
    let mut lines: Vec<String> = tools
        .iter()
        .filter_map(|t| {
            let name = t.get("name")?.as_str()?;
            Some(format!("{name}\t{}\n", xy_core::firewall::digest(t)))
        })
        .collect();
    lines.sort();
    xy_core::firewall::sha256_hex(lines.concat().as_bytes())
}

/// The names of a `tools/list` result's tools.
pub(crate) fn names(tools: &[Value]) -> BTreeSet<String> {
    tools
        .iter()
        .filter_map(|t| t.get("name").and_then(Value::as_str).map(str::to_owned))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(n: &[&str]) -> BTreeSet<String> {
        n.iter().map(|s| (*s).to_owned()).collect()
    }

    /// server-everything's gating: roots, sampling, elicitation, and
    /// url-mode elicitation.
    fn everything_gates() -> Gates {
        let full = set(&["echo", "roots", "sample", "elicit", "url"]);
        let bare = set(&["echo"]);
        let mut without = vec![
            (Atom::Roots, set(&["echo", "sample", "elicit", "url"])),
            (Atom::Sampling, set(&["echo", "roots", "elicit", "url"])),
            (Atom::Elicitation, set(&["echo", "roots", "sample"])),
        ];
        let second = second_round(&full, &without);
        assert_eq!(
            second,
            vec![
                Atom::SamplingTools,
                Atom::SamplingContext,
                Atom::ElicitationForm,
                Atom::ElicitationUrl
            ]
        );
        without.extend([
            (Atom::SamplingTools, full.clone()),
            (Atom::SamplingContext, full.clone()),
            (Atom::ElicitationForm, full.clone()),
            (
                Atom::ElicitationUrl,
                set(&["echo", "roots", "sample", "elicit"]),
            ),
        ]);
        let probed: Vec<Atom> = TOP.iter().copied().chain(second).collect();
        Gates::learn(&full, &bare, &without, &probed)
    }

    #[test]
    fn each_tool_needs_what_hides_it() {
        let g = everything_gates();
        assert_eq!(g.needs["roots"], vec![Atom::Roots]);
        assert_eq!(g.needs["sample"], vec![Atom::Sampling]);
        assert_eq!(g.needs["elicit"], vec![Atom::Elicitation]);
        assert_eq!(
            g.needs["url"],
            vec![Atom::Elicitation, Atom::ElicitationUrl]
        );
        assert!(!g.needs.contains_key("echo"));
    }

    #[test]
    fn a_client_sees_and_calls_what_it_declared_for() {
        let g = everything_gates();
        let mut r = json!({"tools": [{"name": "echo"}, {"name": "roots"}, {"name": "sample"},
            {"name": "elicit"}, {"name": "url"}], "nextCursor": "c"});
        g.filter(&mut r, Some(&json!({"elicitation": {}})));
        assert_eq!(
            r,
            json!({"tools": [{"name": "echo"}, {"name": "elicit"}], "nextCursor": "c"})
        );
        assert_eq!(
            g.missing("url", Some(&json!({"elicitation": {}}))),
            Some(json!({"elicitation": {"url": {}}}))
        );
        assert_eq!(g.missing("sample", None), Some(json!({"sampling": {}})));
        assert_eq!(g.missing("sample", Some(&json!({"sampling": {}}))), None);
        assert_eq!(g.missing("echo", None), None);
        assert!(!g.hides_any(Some(&everything())));
        assert!(g.hides_any(None));
    }

    #[test]
    fn a_tool_no_single_absence_hides_needs_everything_and_a_failed_probe_counts_as_hiding() {
        let full = set(&["a", "b"]);
        let without = vec![(Atom::Roots, full.clone()), (Atom::Sampling, full.clone())];
        let g = Gates::learn(&full, &set(&[]), &without, &TOP);
        assert_eq!(
            g.needs["a"],
            vec![Atom::Elicitation],
            "elicitation's probe failed: its absence counts as hiding"
        );
        let g = Gates::learn(&full, &set(&[]), &without, &TOP[..2]);
        assert_eq!(g.needs["a"], TOP.to_vec(), "wants one of several");
    }

    #[test]
    fn waiting_is_for_clients_that_lack_something_while_unknown() {
        let g = Gates::unknown();
        assert!(g.must_wait(None, None));
        assert!(g.must_wait(Some(&json!({"roots": {}})), Some("a")));
        assert!(!g.must_wait(Some(&everything()), None));
        assert!(!Gates::none().must_wait(None, None));
        let mut kept = everything_gates();
        kept.provisional = Some(set(&["echo", "url"]));
        assert!(!kept.must_wait(None, Some("url")), "a call it knows");
        assert!(
            kept.must_wait(None, Some("new")),
            "a tool it was not learnt for"
        );
        assert!(kept.must_wait(None, None), "a listing");
        assert!(!kept.must_wait(Some(&everything()), Some("new")));
    }

    #[test]
    fn kept_gates_read_back_the_same_and_an_unknown_capability_needs_everything() {
        let g = everything_gates();
        let s = g.stored("k").unwrap();
        assert_eq!(s.needs["url"], vec!["elicitation", "elicitation.url"]);
        assert_eq!(Gates::from_stored(&s), g);
        assert!(Gates::from_stored(&s).provisional.is_none());
        let mut odd = s.clone();
        odd.needs.insert("x".into(), vec!["telepathy".into()]);
        assert_eq!(Gates::from_stored(&odd).needs["x"], TOP.to_vec());
        assert!(Gates::failed("no".into()).stored("k").is_none());
        assert!(Gates::unknown().stored("k").is_none());
        let a = json!({"name": "a", "description": "A"});
        let b = json!({"name": "b"});
        assert_eq!(
            listing_key(&[a.clone(), b.clone()]),
            listing_key(&[b.clone(), a])
        );
        assert_ne!(
            listing_key(&[json!({"name": "a", "description": "changed"}), b.clone()]),
            listing_key(&[json!({"name": "a", "description": "A"}), b])
        );
    }

    #[test]
    fn leaving_one_out() {
        assert_eq!(
            everything_but(Atom::ElicitationUrl)["elicitation"],
            json!({"form": {}})
        );
        assert!(everything_but(Atom::Sampling).get("sampling").is_none());
        for a in TOP {
            assert!(a.declared_in(&everything()));
            for p in a.parts() {
                assert!(p.declared_in(&everything()));
                assert!(!p.declared_in(&everything_but(*p)));
            }
        }
    }
}
