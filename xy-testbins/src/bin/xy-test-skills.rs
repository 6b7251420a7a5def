//! `xy-test-skills`: an MCP server on stdin/stdout, built on the official
//! Rust SDK (`rmcp`, whose SEP-2640 types, capability and validation it
//! uses), serving Skills (SEP-2640) and MCP Apps (`io.modelcontextprotocol/ui`)
//! from a directory that a test changes between listings (SPEC §27):
//!
//! - `DIR/skills/<name>/…`: each folder is a skill; every file in it is a
//!   `skill://<name>/<path>` resource, listed in `skills/list`'s manifest
//!   (with the SDK's `sha256:` digests) and in `resources/list`; the
//!   frontmatter's `name` and `description` are read from `SKILL.md`.
//! - `DIR/apps/<name>.html`: an app at `ui://<name>`, served as
//!   `text/html;profile=mcp-app` with `_meta.ui.csp` from
//!   `DIR/apps/<name>.csp` (a JSON object) when there is one; tool
//!   `show_<name>` opens it (visible to the model and the app) and the
//!   app-only helper `<name>_poll` has `_meta.ui.visibility` from
//!   `DIR/apps/<name>.visibility` (a JSON list; default `["app"]`).
//! - `resources/templates/list`: `skill://{skill}/{+path}`, and the
//!   templates of `DIR/templates.json` (a JSON list; one with that
//!   `uriTemplate` replaces it).
//! - Tool `echo` besides. Everything is read afresh at every request.
//!
//! Changes that must not alarm the firewall, each a file in `DIR`: `reverse`
//! (every list and manifest in reverse order), `version` / `name` (the
//! server's version / name), `meta` (its text as a volatile `_meta.trace`
//! on every tool and content), `plain` (a `file://` resource listed too),
//! `ui-extra` (tools' `_meta.ui` gains `prefersBorder`), `swap` (`show_*`
//! tools' visibility written `["app", "model"]`).
//!
//! Flags: `--dir DIR` (required), `--era 2025|2026|both` (default both).

use std::borrow::Cow;
use std::path::{Path, PathBuf};

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, GetSkillRequestParams, GetSkillResult,
    ListResourceTemplatesResult, ListResourcesResult, ListSkillsResult, ListToolsResult,
    PaginatedRequestParams, ProtocolVersion, ReadResourceRequestParams, ReadResourceResponse,
    ServerConfig, SkillResource,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData as McpError, RoleServer, ServerHandler, ServiceExt};
use serde_json::{Value, json};
use xy_testbins::args::Args;
use xy_testbins::out::err;

const USAGE: &str = "xy-test-skills --dir DIR [--era 2025|2026|both]";
const APP_MIME: &str = "text/html;profile=mcp-app";

#[derive(Clone)]
struct Server {
    dir: PathBuf,
    era: String,
}

/// Every file under `root`, as (path relative to it with `/`, bytes), sorted.
fn files(root: &Path) -> Vec<(String, Vec<u8>)> {
    fn walk(root: &Path, at: &Path, out: &mut Vec<(String, Vec<u8>)>) {
        let Ok(rd) = std::fs::read_dir(at) else {
            return;
        };
        for e in rd.flatten() {
            let p = e.path();
            if p.is_dir() {
                walk(root, &p, out);
            } else if let Ok(bytes) = std::fs::read(&p) {
                let rel = p.strip_prefix(root).unwrap_or(&p);
                let rel = rel
                    .components()
                    .map(|c| c.as_os_str().to_string_lossy().into_owned())
                    .collect::<Vec<_>>()
                    .join("/");
                out.push((rel, bytes));
            }
        }
    }
    let mut out = Vec::new();
    walk(root, root, &mut out);
    out.sort();
    out
}

/// A frontmatter field of `SKILL.md` (`key: value` between `---` lines).
fn front(text: &str, key: &str) -> String {
    let mut lines = text.lines();
    if lines.next() != Some("---") {
        return String::new();
    }
    lines
        .take_while(|l| *l != "---")
        .find_map(|l| l.strip_prefix(&format!("{key}:")))
        .map(|v| v.trim().to_owned())
        .unwrap_or_default()
}

impl Server {
    fn has(&self, flag: &str) -> bool {
        self.dir.join(flag).exists()
    }

    fn text(&self, flag: &str) -> Option<String> {
        std::fs::read_to_string(self.dir.join(flag))
            .ok()
            .map(|t| t.trim().to_owned())
    }

    /// `v` reversed when `DIR/reverse` says so.
    fn order<T>(&self, mut v: Vec<T>) -> Vec<T> {
        if self.has("reverse") {
            v.reverse();
        }
        v
    }

    /// `_meta` with the volatile trace `DIR/meta` asks for.
    fn volatile(&self, item: &mut Value) {
        if let Some(t) = self.text("meta") {
            let meta = item
                .as_object_mut()
                .map(|o| o.entry("_meta").or_insert_with(|| json!({})));
            if let Some(m) = meta {
                m["trace"] = json!(t);
            }
        }
    }

    fn skill_names(&self) -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(self.dir.join("skills"))
            .into_iter()
            .flatten()
            .flatten()
            .filter(|e| e.path().join("SKILL.md").is_file())
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    }

    fn skill(&self, name: &str) -> Value {
        let root = self.dir.join("skills").join(name);
        let all = files(&root);
        let md = all
            .iter()
            .find(|(p, _)| p == "SKILL.md")
            .map(|(_, b)| String::from_utf8_lossy(b).into_owned())
            .unwrap_or_default();
        // `SKILL.md` first, as the SEP's examples have it.
        let mut manifest: Vec<SkillResource> = all
            .iter()
            .map(|(p, b)| SkillResource::from_bytes(format!("skill://{name}/{p}"), b))
            .collect();
        manifest.sort_by_key(|r| !r.uri.ends_with("/SKILL.md"));
        let manifest = self.order(manifest);
        json!({
            "uri": format!("skill://{name}/SKILL.md"),
            "frontmatter": {"name": front(&md, "name"), "description": front(&md, "description")},
            "resources": manifest,
        })
    }

    fn app_names(&self) -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(self.dir.join("apps"))
            .into_iter()
            .flatten()
            .flatten()
            .filter_map(|e| {
                e.file_name()
                    .to_string_lossy()
                    .strip_suffix(".html")
                    .map(str::to_owned)
            })
            .collect();
        v.sort();
        v
    }

    fn app_file(&self, name: &str, ext: &str) -> Option<Value> {
        let text = std::fs::read_to_string(self.dir.join("apps").join(format!("{name}.{ext}")));
        text.ok().and_then(|t| serde_json::from_str(&t).ok())
    }

    fn tools(&self) -> Vec<Value> {
        let mut tools = vec![json!({"name": "echo", "description": "Echoes text.",
            "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}}})];
        for app in self.app_names() {
            let uri = format!("ui://{app}");
            let both = if self.has("swap") {
                json!(["app", "model"])
            } else {
                json!(["model", "app"])
            };
            tools.push(json!({"name": format!("show_{app}"),
                "description": format!("Shows the {app} app."),
                "inputSchema": {"type": "object"},
                "_meta": {"ui": {"resourceUri": uri, "visibility": both}}}));
            let visibility = self.app_file(&app, "visibility").unwrap_or(json!(["app"]));
            tools.push(json!({"name": format!("{app}_poll"),
                "description": format!("Refreshes the {app} app's data (called by the app)."),
                "inputSchema": {"type": "object"},
                "_meta": {"ui": {"resourceUri": uri, "visibility": visibility}}}));
        }
        for t in &mut tools {
            if self.has("ui-extra")
                && let Some(ui) = t.pointer_mut("/_meta/ui")
            {
                ui["prefersBorder"] = json!(true);
            }
            self.volatile(t);
        }
        self.order(tools)
    }

    fn read(&self, uri: &str) -> Option<Value> {
        if let Some(rest) = uri.strip_prefix("skill://") {
            let (name, path) = rest.split_once('/')?;
            if path.split('/').any(|s| s == ".." || s.is_empty()) {
                return None;
            }
            let bytes = std::fs::read(self.dir.join("skills").join(name).join(path)).ok()?;
            let mime = if path.ends_with(".md") {
                "text/markdown"
            } else {
                "text/plain"
            };
            let mut content = json!({"uri": uri, "mimeType": mime,
                "text": String::from_utf8_lossy(&bytes)});
            self.volatile(&mut content);
            return Some(json!({"contents": [content]}));
        }
        let name = uri.strip_prefix("ui://")?;
        if !self.app_names().iter().any(|a| a == name) {
            return None;
        }
        let html =
            std::fs::read_to_string(self.dir.join("apps").join(format!("{name}.html"))).ok()?;
        let mut content = json!({"uri": uri, "mimeType": APP_MIME, "text": html});
        if let Some(csp) = self.app_file(name, "csp") {
            content["_meta"] = json!({"ui": {"csp": csp, "prefersBorder": true}});
        }
        self.volatile(&mut content);
        Some(json!({"contents": [content]}))
    }
}

/// A JSON value as the rmcp type the context wants.
macro_rules! typed {
    ($v:expr) => {
        serde_json::from_value($v).expect("a valid result")
    };
}

/// A result for this request's era: 2026 results say `resultType`.
fn era(mut result: Value, context: &RequestContext<RoleServer>) -> Value {
    if context
        .protocol_version()
        .is_some_and(|v| v >= ProtocolVersion::V_2026_07_28)
    {
        result["resultType"] = json!("complete");
    }
    result
}

impl ServerHandler for Server {
    fn get_info(&self) -> ServerConfig {
        let version = if self.era == "2026" {
            ProtocolVersion::V_2026_07_28
        } else {
            ProtocolVersion::V_2025_11_25
        };
        typed!(json!({
            "protocolVersion": version,
            "capabilities": {
                "tools": {"listChanged": true},
                "resources": {"listChanged": true},
                "extensions": {"io.modelcontextprotocol/skills": {}},
            },
            "serverInfo": {
                "name": self.text("name").unwrap_or_else(|| "skills-and-apps".to_owned()),
                "version": self.text("version").unwrap_or_else(|| "1.0.0".to_owned()),
            },
        }))
    }

    fn supported_protocol_versions(&self) -> Cow<'static, [ProtocolVersion]> {
        match self.era.as_str() {
            "2025" => Cow::Borrowed(ProtocolVersion::known_up_to(&ProtocolVersion::V_2025_11_25)),
            "2026" => Cow::Owned(vec![ProtocolVersion::V_2026_07_28]),
            _ => Cow::Borrowed(ProtocolVersion::KNOWN_VERSIONS),
        }
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        Ok(typed!(era(json!({"tools": self.tools()}), &context)))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let name = request.name.to_string();
        let text = request
            .arguments
            .as_ref()
            .and_then(|a| a.get("text"))
            .and_then(Value::as_str)
            .map_or_else(|| format!("called {name}"), str::to_owned);
        let result: rmcp::model::CallToolResult = typed!(era(
            json!({"content": [{"type": "text", "text": text}]}),
            &context
        ));
        Ok(result.into())
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, McpError> {
        let mut resources = Vec::new();
        for name in self.skill_names() {
            let skill = self.skill(&name);
            let description = skill["frontmatter"]["description"].clone();
            for r in skill["resources"].as_array().into_iter().flatten() {
                let uri = r["uri"].as_str().unwrap_or_default();
                let mut item = json!({"uri": uri, "name": uri.trim_start_matches("skill://"),
                    "mimeType": if uri.ends_with(".md") { "text/markdown" } else { "text/plain" }});
                if uri.ends_with("/SKILL.md") {
                    item["description"] = description.clone();
                }
                resources.push(item);
            }
        }
        for app in self.app_names() {
            resources.push(json!({"uri": format!("ui://{app}"), "name": app,
                "mimeType": APP_MIME, "description": format!("The {app} app.")}));
        }
        if self.has("plain") {
            resources.push(
                json!({"uri": "file:///notes.txt", "name": "notes", "mimeType": "text/plain"}),
            );
        }
        let resources = self.order(resources);
        Ok(typed!(era(json!({"resources": resources}), &context)))
    }

    async fn list_resource_templates(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, McpError> {
        let mut templates = vec![json!({
            "uriTemplate": "skill://{skill}/{+path}", "name": "skill-file",
            "description": "A file of a skill."})];
        // `templates.json`: more templates, or the first one replaced when
        // one has its `uriTemplate`.
        let more: Vec<Value> = std::fs::read(self.dir.join("templates.json"))
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok())
            .unwrap_or_default();
        for t in more {
            match templates
                .iter_mut()
                .find(|x| x["uriTemplate"] == t["uriTemplate"])
            {
                Some(x) => *x = t,
                None => templates.push(t),
            }
        }
        let r = json!({ "resourceTemplates": self.order(templates) });
        Ok(typed!(era(r, &context)))
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, McpError> {
        let r = self
            .read(&request.uri)
            .ok_or_else(|| McpError::resource_not_found(request.uri.clone(), None))?;
        let r: rmcp::model::ReadResourceResult = typed!(era(r, &context));
        Ok(r.into())
    }

    async fn list_skills(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListSkillsResult, McpError> {
        let skills: Vec<Value> = self.skill_names().iter().map(|n| self.skill(n)).collect();
        let skills = self.order(skills);
        Ok(typed!(era(json!({"skills": skills}), &context)))
    }

    async fn get_skill(
        &self,
        request: GetSkillRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<GetSkillResult, McpError> {
        let name = request
            .uri
            .strip_prefix("skill://")
            .and_then(|r| r.strip_suffix("/SKILL.md"))
            .filter(|n| self.skill_names().iter().any(|s| s == n))
            .ok_or_else(|| McpError::invalid_params(format!("no skill {}", request.uri), None))?;
        Ok(typed!(era(json!({"skill": self.skill(name)}), &context)))
    }
}

fn main() {
    let mut args = Args::from_env(USAGE);
    let mut dir: Option<PathBuf> = None;
    let mut era = "both".to_owned();
    while let Some(flag) = args.next_flag() {
        match flag.as_str() {
            "--dir" => dir = Some(args.value::<String>(&flag).into()),
            "--era" => era = args.value(&flag),
            _ => args.unknown(&flag),
        }
    }
    let Some(dir) = dir else {
        err(USAGE);
        std::process::exit(2);
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    let code = runtime.block_on(async move {
        let server = match (Server { dir, era }).serve(rmcp::transport::stdio()).await {
            Ok(s) => s,
            Err(e) => {
                err(&format!(
                    "xy-test-skills: stdio session failed to start: {e}"
                ));
                return 1;
            }
        };
        let _ = server.waiting().await;
        0
    });
    std::process::exit(code);
}
