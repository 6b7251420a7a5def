//! `xyctl mcp` (SPEC §17): an MCP server on stdin/stdout, built on rmcp,
//! that lets an AI agent read its tool servers' state, logs and tools and —
//! where the config allows it — start or restart them. tokio lives only here.

mod args;
mod calls;

use std::borrow::Cow;
use std::sync::Arc;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ListToolsResult,
    PaginatedRequestParams, ProtocolVersion, ServerConfig, Tool,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData as McpError, RoleServer, ServerHandler, ServiceExt};
use serde_json::{Value, json};

use crate::ctx::Ctx;
use crate::error::{Exit, Failure};
use calls::{Answer, Control, Refusal};

/// Runs the server until stdin closes (exit 0).
pub(crate) fn run(ctx: &Ctx) -> Result<Exit, Failure> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| Failure::new(Exit::Operational, format!("cannot start tokio: {e}")))?;
    let server = XyMcp {
        ctx: Arc::new(ctx.clone()),
    };
    runtime.block_on(async move {
        let running = server
            .serve(rmcp::transport::stdio())
            .await
            .map_err(|e| Failure::new(Exit::Operational, format!("MCP session failed: {e}")))?;
        running
            .waiting()
            .await
            .map_err(|e| Failure::new(Exit::Operational, format!("MCP session ended: {e}")))?;
        Ok(Exit::Success)
    })
}

/// The rmcp handler: each call is one or two blocking requests to xyd.
#[derive(Clone)]
struct XyMcp {
    ctx: Arc<Ctx>,
}

const INSTRUCTIONS: &str = "xy supervises the MCP servers on this machine. When another \
server's tools fail or vanish, call list_servers, then server_status and server_logs for \
that server: they say whether it is running, why it is down (crash loop, missing \
command, port in use, a missing secret) and show its last stderr lines. restart_server \
and start_server exist only for servers whose config allows agents to use them; tell \
the user what you found when you cannot fix it.";

impl XyMcp {
    /// Runs a blocking call on tokio's blocking pool.
    async fn blocking<F>(&self, f: F) -> Result<Answer, Refusal>
    where
        F: FnOnce(&Ctx) -> Result<Answer, Refusal> + Send + 'static,
    {
        let ctx = Arc::clone(&self.ctx);
        tokio::task::spawn_blocking(move || f(&ctx))
            .await
            .unwrap_or_else(|e| Err(Refusal(format!("internal error: {e}"))))
    }

    async fn call(&self, request: CallToolRequestParams) -> Result<CallToolResult, McpError> {
        let a = request.arguments.as_ref();
        let outcome = match request.name.as_ref() {
            "list_servers" => self.blocking(calls::list_servers).await,
            "server_status" => match args::name(a) {
                Ok(n) => self.blocking(move |c| calls::server_status(c, &n)).await,
                Err(e) => Err(Refusal(e)),
            },
            "server_logs" => match args::logs(a) {
                Ok(l) => self.blocking(move |c| calls::server_logs(c, &l)).await,
                Err(e) => Err(Refusal(e)),
            },
            "server_tools" => match args::name(a) {
                Ok(n) => self.blocking(move |c| calls::server_tools(c, &n)).await,
                Err(e) => Err(Refusal(e)),
            },
            t @ ("restart_server" | "start_server") => {
                let what = if t == "start_server" {
                    Control::Start
                } else {
                    Control::Restart
                };
                match args::name(a) {
                    Ok(n) => self.blocking(move |c| calls::control(c, what, &n)).await,
                    Err(e) => Err(Refusal(e)),
                }
            }
            other => {
                return Err(McpError::invalid_params(
                    format!(
                        "unknown tool {other:?}; xy offers list_servers, server_status, \
                         server_logs, server_tools, start_server and restart_server"
                    ),
                    None,
                ));
            }
        };
        let v = match outcome {
            // `resultType` is required by 2026-07-28; rmcp strips it for 2025 peers.
            Ok(a) => json!({
                "resultType": "complete",
                "content": [{"type": "text", "text": a.text}],
                "structuredContent": a.structured,
                "isError": false,
            }),
            Err(Refusal(why)) => json!({
                "resultType": "complete",
                "content": [{"type": "text", "text": why}],
                "isError": true,
            }),
        };
        serde_json::from_value(v).map_err(|e| McpError::internal_error(e.to_string(), None))
    }
}

/// The tool list: read-only tools always; the control tools only when a
/// server allows them, with those servers named.
fn tools(restartable: &[String]) -> Vec<Value> {
    let name_only = |what: &str| {
        json!({
            "type": "object",
            "properties": {"name": {"type": "string", "description": what}},
            "required": ["name"],
        })
    };
    let read = json!({"readOnlyHint": true, "openWorldHint": false});
    let mut list = vec![
        json!({
            "name": "list_servers",
            "title": "List xy's servers",
            "description": "Every MCP server xy supervises on this machine: state (running, \
                restarting, failed, …), pid, port, URL, health, restart count, last exit, tool \
                count, whether agents may restart it, and why each failed or restarting server \
                is down.",
            "inputSchema": {"type": "object", "properties": {}},
            "annotations": read,
        }),
        json!({
            "name": "server_status",
            "title": "One server's status",
            "description": "One server in detail: state, pid, why it is down (`explain`: the \
                cause, its last stderr lines, the next retry), recent state transitions, \
                health, command and settings, and its last log lines.",
            "inputSchema": name_only("The server's name (see list_servers)."),
            "annotations": read,
        }),
        json!({
            "name": "server_logs",
            "title": "A server's recent output",
            "description": format!(
                "The last lines a server wrote (stdout and stderr, oldest first; stderr \
                 marked [err]) from xy's in-memory buffer. `tail`: how many lines (default \
                 {}, at most {}). `grep`: keep only lines containing this text, ignoring \
                 case (a plain substring, not a regex); `tail` then counts matching lines.",
                args::DEFAULT_TAIL,
                args::MAX_TAIL
            ),
            "inputSchema": {
                "type": "object",
                "properties": {
                    "name": {"type": "string", "description": "The server's name (see list_servers)."},
                    "tail": {"type": "integer", "minimum": 1, "maximum": args::MAX_TAIL,
                             "description": format!("Lines to return (default {}, at most {}).", args::DEFAULT_TAIL, args::MAX_TAIL)},
                    "grep": {"type": "string", "description": "Case-insensitive substring filter."},
                },
                "required": ["name"],
            },
            "annotations": read,
        }),
        json!({
            "name": "server_tools",
            "title": "A server's tools",
            "description": "The tools a server listed after its latest start, which xy's \
                firewall holds back from clients and why (named only: their text is not shown), \
                and which were added, removed or changed since the start before. Only the user \
                can approve a held-back tool (`xyctl tools review`).",
            "inputSchema": name_only("The server's name (see list_servers)."),
            "annotations": read,
        }),
    ];
    if !restartable.is_empty() {
        let names = restartable.join(", ");
        let control =
            json!({"readOnlyHint": false, "destructiveHint": false, "openWorldHint": false});
        list.push(json!({
            "name": "restart_server",
            "title": "Restart a server",
            "description": format!(
                "Stop a server (SIGTERM, then SIGKILL after its grace period) and start it \
                 again; also starts a stopped or failed one. Allowed only for: {names}. \
                 Answers with the new state and pid."
            ),
            "inputSchema": name_only("The server's name; one of the allowed servers."),
            "annotations": control,
        }));
        list.push(json!({
            "name": "start_server",
            "title": "Start a server",
            "description": format!(
                "Start a stopped or failed server (a running one is left alone). Allowed \
                 only for: {names}."
            ),
            "inputSchema": name_only("The server's name; one of the allowed servers."),
            "annotations": control,
        }));
    }
    list
}

impl ServerHandler for XyMcp {
    fn get_info(&self) -> ServerConfig {
        serde_json::from_value(json!({
            "protocolVersion": ProtocolVersion::LATEST_WITH_INITIALIZE,
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "xy", "title": "xy: local MCP server supervisor",
                           "version": env!("CARGO_PKG_VERSION")},
            "instructions": INSTRUCTIONS,
        }))
        .expect("a valid server info")
    }

    fn supported_protocol_versions(&self) -> Cow<'static, [ProtocolVersion]> {
        Cow::Borrowed(ProtocolVersion::KNOWN_VERSIONS)
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        let ctx = Arc::clone(&self.ctx);
        // An unreachable daemon still leaves the read-only tools: calling
        // one then says why xyd cannot be reached.
        let restartable = tokio::task::spawn_blocking(move || calls::restartable(&ctx))
            .await
            .ok()
            .and_then(Result::ok)
            .unwrap_or_default();
        let tools: Vec<Tool> = tools(&restartable)
            .into_iter()
            .map(serde_json::from_value)
            .collect::<Result<_, _>>()
            .map_err(|e| McpError::internal_error(e.to_string(), None))?;
        serde_json::from_value(json!({"resultType": "complete", "tools": tools}))
            .map_err(|e| McpError::internal_error(e.to_string(), None))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        self.call(request).await.map(Into::into)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(list: &[Value]) -> Vec<&str> {
        list.iter().map(|t| t["name"].as_str().unwrap()).collect()
    }

    #[test]
    fn control_tools_only_when_a_server_allows_them() {
        let none = tools(&[]);
        assert_eq!(
            names(&none),
            [
                "list_servers",
                "server_status",
                "server_logs",
                "server_tools"
            ]
        );
        let some = tools(&["api".into(), "web".into()]);
        assert_eq!(names(&some)[4..], ["restart_server", "start_server"]);
        let d = some[4]["description"].as_str().unwrap();
        assert!(d.contains("Allowed only for: api, web."), "{d}");
        // Every tool is a valid rmcp Tool.
        for t in some {
            let _: Tool = serde_json::from_value(t).unwrap();
        }
    }
}
