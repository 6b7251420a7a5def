//! The resources the firewall pins (SPEC §27): skill files (SEP-2640,
//! `skill://`) and MCP Apps (`ui://`), text the model or the user is shown.
//! Which URIs of a [`Listing`] xy reads at listing time, and the object
//! each is decided as: its URI as `name`, its MIME type, size and hash as
//! `title` (what a review shows of HTML), its text as `description` (what
//! the scan reads and a review diffs), the SHA-256 of its content, its
//! `_meta.ui` (an app's CSP and permissions) and, for a `SKILL.md`, the
//! frontmatter `skills/list` gives the model. Pure: the listers read, the
//! ServerActor decides.

use std::collections::HashMap;

use serde_json::{Value, json};
use xy_core::firewall::{pins_uri, sha256_hex};

use super::listing::Listing;

/// Resources read per listing at most.
pub(crate) const MAX_READS: usize = 256;
/// Characters of a resource's text kept in its object (the scan reads them,
/// a review diffs them); its hash covers all of it.
const MAX_TEXT: usize = 256 * 1024;

/// The URIs whose content xy reads to pin, in listing order without
/// repeats: the `skill://` and `ui://` entries of `resources/list` and
/// every file of every `skills/list` manifest; at most [`MAX_READS`].
pub(crate) fn uris(l: &Listing) -> Vec<String> {
    let listed = l
        .resources
        .iter()
        .flatten()
        .filter_map(|r| r.get("uri")?.as_str());
    let manifests = l
        .skills
        .iter()
        .flatten()
        .flat_map(|s| {
            s.get("resources")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
        })
        .filter_map(|r| r.get("uri")?.as_str());
    let mut out: Vec<String> = Vec::new();
    for uri in manifests.chain(listed) {
        if pins_uri(uri) && !out.iter().any(|u| u == uri) {
            if out.len() == MAX_READS {
                tracing::warn!("xy pins the first {MAX_READS} skill files and apps only");
                break;
            }
            out.push(uri.to_owned());
        }
    }
    out
}

/// The skills of a listing: each skill's `SKILL.md` URI and the URIs of
/// its files (a skill is offered only when all of them are).
pub(crate) fn skills(l: &Listing) -> HashMap<String, Vec<String>> {
    l.skills
        .iter()
        .flatten()
        .filter_map(|s| {
            let uri = s.get("uri")?.as_str()?.to_owned();
            let files = s
                .get("resources")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(|r| Some(r.get("uri")?.as_str()?.to_owned()))
                .collect();
            Some((uri, files))
        })
        .collect()
}

/// The pinned object of every resource the listing read, then of every
/// `skill://` and `ui://` resource template it lists.
pub(crate) fn items(l: &Listing) -> Vec<Value> {
    let templates = l
        .resource_templates
        .iter()
        .flatten()
        .filter(|t| {
            t.get("uriTemplate")
                .and_then(Value::as_str)
                .is_some_and(pins_uri)
        })
        .take(MAX_READS)
        .map(template);
    l.reads
        .iter()
        .map(|(uri, read)| item(uri, read, l))
        .chain(templates)
        .collect()
}

/// The pinned object of a resource template: named by its `uriTemplate`
/// (the URIs it makes are read only when listed, and a read of an unlisted
/// one is refused), its entry without volatile `_meta` but with its
/// `_meta.ui`, its description as `description` (the scan reads it).
fn template(t: &Value) -> Value {
    let name = t.get("uriTemplate").cloned().unwrap_or_default();
    let mut entry = t.clone();
    let ui = entry
        .as_object_mut()
        .and_then(|o| o.remove("_meta"))
        .and_then(|m| m.get("ui").cloned());
    let mime = t.get("mimeType").and_then(Value::as_str).unwrap_or("");
    let mut o = json!({
        "name": name,
        "title": if mime.is_empty() {
            "resource template".to_owned()
        } else {
            format!("resource template, {mime}")
        },
        "template": entry,
    });
    if let Some(d) = t.get("description").and_then(Value::as_str) {
        o["description"] = json!(truncate(d));
    }
    if let Some(ui) = ui {
        o["ui"] = ui;
    }
    o
}

/// The pinned object of the resource at `uri`, from its `resources/read`
/// answer (a result, or the error it got).
fn item(uri: &str, read: &Value, l: &Listing) -> Value {
    let mut o = json!({"name": uri});
    let content = read
        .pointer("/result/contents")
        .and_then(Value::as_array)
        .and_then(|c| {
            c.iter()
                .find(|x| x.get("uri").and_then(Value::as_str) == Some(uri))
                .or_else(|| c.first())
        });
    match content {
        Some(c) => {
            let mime = c.get("mimeType").and_then(Value::as_str).unwrap_or("");
            let (bytes, text) = match (c.get("text"), c.get("blob")) {
                (Some(Value::String(t)), _) => (t.as_bytes(), Some(t.as_str())),
                (_, Some(Value::String(b))) => (b.as_bytes(), None),
                _ => (&[][..], None),
            };
            let hex = sha256_hex(bytes);
            o["title"] = json!(format!(
                "{}{} bytes, sha256 {}",
                if mime.is_empty() {
                    String::new()
                } else {
                    format!("{mime}, ")
                },
                bytes.len(),
                &hex[..12]
            ));
            o["mimeType"] = json!(mime);
            o["sha256"] = json!(hex);
            if let Some(t) = text {
                o["description"] = json!(truncate(t));
            }
            if let Some(ui) = c.pointer("/_meta/ui") {
                o["ui"] = ui.clone();
            }
        }
        None => {
            // Pinned as unreadable: a later readable version is a change
            // to approve, not content nobody looked at.
            let why = read
                .pointer("/error/message")
                .and_then(Value::as_str)
                .unwrap_or("no contents");
            o["title"] = json!(format!("unreadable when xy listed it: {why}"));
        }
    }
    if let Some(front) = l
        .skills
        .iter()
        .flatten()
        .find(|s| s.get("uri").and_then(Value::as_str) == Some(uri))
        .and_then(|s| s.get("frontmatter"))
    {
        o["frontmatter"] = front.clone();
    }
    o
}

fn truncate(t: &str) -> &str {
    if t.len() <= MAX_TEXT {
        return t;
    }
    let mut end = MAX_TEXT;
    while !t.is_char_boundary(end) {
        end -= 1;
    }
    &t[..end]
}

#[cfg(test)]
mod tests {
    use super::*;
    use xy_core::firewall::digest;

    fn listing() -> Listing {
        Listing {
            resources: Some(vec![
                json!({"uri": "ui://clock", "name": "clock"}),
                json!({"uri": "file:///etc/motd", "name": "motd"}),
                json!({"uri": "skill://greet/SKILL.md", "name": "greet"}),
            ]),
            skills: Some(vec![json!({"uri": "skill://greet/SKILL.md",
                "frontmatter": {"name": "greet", "description": "Greets."},
                "resources": [{"uri": "skill://greet/SKILL.md"}, {"uri": "skill://greet/ref.md"}]})]),
            ..Listing::default()
        }
    }

    fn read(uri: &str, text: &str, meta: Value) -> Value {
        json!({"result": {"contents": [{"uri": uri, "mimeType": "text/html", "text": text,
            "_meta": meta}], "_meta": {"ts": "now"}}})
    }

    #[test]
    fn skill_files_and_apps_are_read_and_other_resources_are_not() {
        let l = listing();
        assert_eq!(
            uris(&l),
            [
                "skill://greet/SKILL.md",
                "skill://greet/ref.md",
                "ui://clock"
            ]
        );
        assert_eq!(skills(&l)["skill://greet/SKILL.md"].len(), 2);
    }

    #[test]
    fn skill_and_ui_templates_are_pinned_by_uri_template_without_volatile_meta() {
        let mut l = listing();
        l.resource_templates = Some(vec![
            json!({"uriTemplate": "ui://{app}/view", "name": "v", "description": "A view.",
                   "_meta": {"ui": {"csp": {}}, "trace": 1}}),
            json!({"uriTemplate": "file:///{path}", "name": "f"}),
        ]);
        let a = items(&l);
        assert_eq!(a.len(), 1, "{a:?}");
        assert_eq!(a[0]["name"], "ui://{app}/view");
        assert!(xy_core::firewall::is_template("ui://{app}/view"));
        assert_eq!(a[0]["description"], "A view.");
        assert_eq!(a[0]["ui"], json!({"csp": {}}));
        // Volatile `_meta` changes nothing; the description does.
        l.resource_templates.as_mut().unwrap()[0]["_meta"]["trace"] = json!(2);
        assert_eq!(digest(&items(&l)[0]), digest(&a[0]));
        l.resource_templates.as_mut().unwrap()[0]["description"] = json!("A view!");
        assert_ne!(digest(&items(&l)[0]), digest(&a[0]));
    }

    #[test]
    fn the_object_pins_content_csp_and_frontmatter_not_volatile_meta() {
        let mut l = listing();
        l.reads = vec![
            (
                "ui://clock".into(),
                read("ui://clock", "<p>hi</p>", json!({"ui": {"csp": {}}})),
            ),
            (
                "skill://greet/SKILL.md".into(),
                read("skill://greet/SKILL.md", "# G", json!({})),
            ),
        ];
        let a = items(&l);
        assert_eq!(a[0]["name"], "ui://clock");
        assert!(
            a[0]["title"].as_str().unwrap().contains("9 bytes"),
            "{}",
            a[0]
        );
        assert_eq!(a[1]["frontmatter"]["name"], "greet");
        // Volatile `_meta` of the answer changes nothing.
        let mut same = read(
            "ui://clock",
            "<p>hi</p>",
            json!({"ui": {"csp": {}}, "t": 2}),
        );
        same["result"]["_meta"] = json!({"ts": "later"});
        l.reads[0].1 = same;
        assert_eq!(digest(&items(&l)[0]), digest(&a[0]));
        // Another text, or another CSP, is another digest.
        l.reads[0].1 = read("ui://clock", "<p>hi!</p>", json!({"ui": {"csp": {}}}));
        assert_ne!(digest(&items(&l)[0]), digest(&a[0]));
        l.reads[0].1 = read(
            "ui://clock",
            "<p>hi</p>",
            json!({"ui": {"csp": {"connectDomains": ["x"]}}}),
        );
        assert_ne!(digest(&items(&l)[0]), digest(&a[0]));
    }
}
