//! The test MCP server behind `xy-test-mcp`, built on the official Rust SDK
//! (`rmcp`): which protocol era(s) it speaks, which tools it offers and how
//! it misbehaves are chosen by flags ([`Options::parse`]); `http` puts it
//! behind streamable HTTP (with faults rmcp cannot express), or it runs on stdio.
//!
//! # Flags
//!
//! | flag | meaning |
//! |---|---|
//! | `--port N` | TCP port (0 picks a free one; the address is printed on stderr) |
//! | `--host ADDR` | bind address (default `127.0.0.1`) |
//! | `--path /mcp` | the MCP endpoint path |
//! | `--stdio` | speak MCP on stdin/stdout instead of HTTP (request log on stderr) |
//! | `--era 2025\|2026\|both` | protocol eras (default `both`): `2025` advertises `2024-11-05`…`2025-11-25` and answers `server/discover` with `-32022`; `2026` advertises only `2026-07-28` and refuses `initialize` (on stdio rmcp then exits, as rmcp-based 2026 servers do) |
//! | `--refuse-initialize` | with `--stdio --era 2026`: answer `initialize` with `-32022` and keep serving (a 2026-only child that does not exit on it) |
//! | `--log-methods` | with `--stdio`: log the JSON-RPC method of every message received on stderr, as `got <method>` (HTTP requests are always logged on stdout) |
//! | `--stateless` | 2025 era without sessions (no `Mcp-Session-Id`) |
//! | `--sse` | answer stateless requests as SSE instead of JSON (2025 sessions always use SSE) |
//! | `--tools a,b,c` | the tools offered (default `echo`); `progress` sends three progress notifications `ms` apart (argument `ms`, default 0), `touch` sends `notifications/tools/list_changed`; `elicit` asks its client `elicitation/create` `rounds` times (default 1) one after another, `sample` asks `sampling/createMessage`, `roots` asks `roots/list`, `log` sends one `notifications/message` (level `info`, data `logged`; naming it declares `logging` and takes `logging/setLevel`), `meta` returns its request's `_meta` as JSON text, `watch` declares `resources.subscribe` and takes `resources/subscribe`/`unsubscribe`, `asks` asks an elicitation and `roots/list` at once (each returns what the client answered; to a 2026-era request each asks with an `InputRequiredResult`, keys `answer-<round>`, `sample`, `roots`, and the answers so far in its `requestState`); any other name echoes `text` |
//! | `--describe NAME=TEXT` | a tool's description (repeatable), so a test can change a tool between spawns |
//! | `--tools-file PATH` | read the tool set at startup from a file: one tool per line, `name` or `name=description` (lets a test change tools between spawns without a reload) |
//! | `--page-size N` | `tools/list` pages of N tools, linked by `nextCursor` |
//! | `--name NAME`, `--version V` | the server name and version it reports |
//! | `--fault hang\|garbage\|http500\|rpc-error` | misbehave: never answer, answer `200` with a body that is not JSON, answer `500`, or answer a JSON-RPC error (`-32000`, its message naming `--echo-env`'s value) |
//! | `--echo-env NAME` | the environment variable whose value `--fault rpc-error`'s message echoes, as a server that quotes its token in an error would |
//! | `--fault-on m1,m2` | only for POSTs carrying these JSON-RPC methods (default: every request) |
//! | `--fault-after N` | answer the first N matching requests normally |
//! | `--hang` | same as `--fault hang` (kept for older tests) |
//! | `--sessions-file PATH` | append `open <id>` / `close <id>` for every 2025 session opened by `initialize` and ended by `DELETE` |
//! | `--bind-delay-ms N` | wait before binding (a child that runs but does not listen yet) |
//! | `--require-auth VALUE` | answer `401` with `WWW-Authenticate: Bearer …` to every request whose `Authorization` is not exactly VALUE (a remote server behind a token) |
//! | `--headers-file PATH` | append one JSON line per request: its method, JSON-RPC methods, `Host`, `Authorization` and `Cookie` as received |
//!
//! Every HTTP request is logged on stdout as `METHOD PATH rpc-methods STATUS`
//! (e.g. `POST /mcp initialize 200`); SIGTERM logs `got SIGTERM, exiting` and
//! exits 0.

pub mod http;

use std::borrow::Cow;
use std::path::PathBuf;
use std::sync::Arc;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ListToolsResult,
    PaginatedRequestParams, ProgressNotificationParam, ProtocolVersion, ServerConfig, Tool,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData as McpError, RoleServer, ServerHandler};
use serde_json::{Value, json};

use crate::args::Args;

/// Usage line of `xy-test-mcp`.
pub const USAGE: &str = "xy-test-mcp (--port N | --stdio) [--host ADDR] [--path /mcp] \
[--era 2025|2026|both] [--stateless] [--sse] [--tools a,b] [--describe NAME=TEXT] \
[--tools-file PATH] [--page-size N] [--name NAME] [--version V] \
[--fault hang|garbage|http500|rpc-error] [--echo-env NAME] [--fault-on m1,m2] [--fault-after N] [--hang] \
[--sessions-file PATH] [--bind-delay-ms N] [--require-auth VALUE] [--headers-file PATH] [--refuse-initialize] \
[--log-methods]";

/// Which protocol era(s) the server speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Era {
    /// `initialize` + sessions + `ping` only.
    V2025,
    /// `server/discover`, stateless, only.
    V2026,
    /// Both (what current SDK servers do).
    Both,
}

/// How the HTTP front misbehaves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// Read the request, never answer.
    Hang,
    /// `200 application/json` with a body that is not JSON.
    Garbage,
    /// `500 Internal Server Error`.
    Http500,
    /// `200` with a JSON-RPC error echoing `--echo-env`'s value.
    RpcError,
}

/// One tool the server offers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolSpec {
    /// The tool name (also chooses its behaviour: `progress`, `touch`, else echo).
    pub name: String,
    /// Its description.
    pub description: String,
}

impl ToolSpec {
    fn named(name: &str) -> ToolSpec {
        let description = match name {
            "progress" => "Sends three progress notifications, then returns.".to_owned(),
            "touch" => "Sends notifications/tools/list_changed, then returns.".to_owned(),
            "elicit" => {
                "Asks the client for an answer `rounds` times, one after another.".to_owned()
            }
            "sample" => "Asks the client to sample a message.".to_owned(),
            "roots" => "Asks the client for its roots.".to_owned(),
            "asks" => "Asks the client an elicitation and its roots at once.".to_owned(),
            "log" => "Sends one log message, then returns.".to_owned(),
            "meta" => "Returns its request's _meta as JSON.".to_owned(),
            "watch" => "Stands for the resource subscriptions the server takes.".to_owned(),
            _ => format!("Returns the given text unchanged ({name})."),
        };
        ToolSpec {
            name: name.to_owned(),
            description,
        }
    }
}

/// Everything the flags choose.
#[derive(Debug, Clone)]
pub struct Options {
    /// HTTP port (`None` with `--stdio`).
    pub port: Option<u16>,
    /// Bind address.
    pub host: String,
    /// The MCP endpoint path.
    pub path: String,
    /// Serve on stdin/stdout.
    pub stdio: bool,
    /// Protocol era(s).
    pub era: Era,
    /// 2025 era without sessions.
    pub stateless: bool,
    /// SSE answers for stateless requests.
    pub sse: bool,
    /// The tools offered, in order.
    pub tools: Vec<ToolSpec>,
    /// `tools/list` page size.
    pub page_size: Option<usize>,
    /// Reported server name.
    pub name: String,
    /// Reported server version.
    pub version: String,
    /// Misbehaviour.
    pub fault: Option<Fault>,
    /// Methods the fault applies to (`None`: every request).
    pub fault_on: Option<Vec<String>>,
    /// Matching requests answered normally before the fault starts.
    pub fault_after: u64,
    /// Where session opens and closes are appended.
    pub sessions_file: Option<PathBuf>,
    /// Delay before binding, in milliseconds.
    pub bind_delay_ms: u64,
    /// The variable `Fault::RpcError`'s message echoes.
    pub echo_env: Option<String>,
    /// Every request must carry `Authorization: <this>`, else `401` with
    /// `WWW-Authenticate: Bearer` (a remote server xy reaches, SPEC §23).
    pub require_auth: Option<String>,
    /// Where each request's `Host`, `Authorization` and `Cookie` are
    /// appended, one JSON line each (what reached the server).
    pub headers_file: Option<PathBuf>,
    /// On stdio in the 2026 era, answer `initialize` with `-32022` and keep serving.
    pub refuse_initialize: bool,
    /// On stdio, log every received message's method on stderr.
    pub log_methods: bool,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            port: None,
            host: "127.0.0.1".to_owned(),
            path: "/mcp".to_owned(),
            stdio: false,
            era: Era::Both,
            stateless: false,
            sse: false,
            tools: vec![ToolSpec::named("echo")],
            page_size: None,
            name: "xy-test-mcp".to_owned(),
            version: env!("CARGO_PKG_VERSION").to_owned(),
            fault: None,
            fault_on: None,
            fault_after: 0,
            sessions_file: None,
            bind_delay_ms: 0,
            echo_env: None,
            require_auth: None,
            headers_file: None,
            refuse_initialize: false,
            log_methods: false,
        }
    }
}

impl Options {
    /// Parses the flags (see the module docs); bad input exits 2 with usage.
    pub fn parse(mut args: Args) -> Options {
        let mut o = Options::default();
        let mut names: Option<Vec<String>> = None;
        let mut described: Vec<(String, String)> = Vec::new();
        let mut tools_file: Option<PathBuf> = None;
        while let Some(flag) = args.next_flag() {
            match flag.as_str() {
                "--port" => o.port = Some(args.value(&flag)),
                "--host" => o.host = args.value(&flag),
                "--path" => o.path = args.value(&flag),
                "--stdio" => o.stdio = true,
                "--era" => {
                    let v: String = args.value(&flag);
                    o.era = match v.as_str() {
                        "2025" => Era::V2025,
                        "2026" => Era::V2026,
                        "both" => Era::Both,
                        _ => args.fail(&format!("bad --era {v:?}: 2025, 2026 or both")),
                    };
                }
                "--stateless" => o.stateless = true,
                "--sse" => o.sse = true,
                "--tools" => {
                    let v: String = args.value(&flag);
                    names = Some(split_list(&v));
                }
                "--describe" => {
                    let v: String = args.value(&flag);
                    let Some((name, text)) = v.split_once('=') else {
                        args.fail("--describe needs NAME=TEXT");
                    };
                    described.push((name.to_owned(), text.to_owned()));
                }
                "--tools-file" => tools_file = Some(args.value::<String>(&flag).into()),
                "--page-size" => {
                    let n: usize = args.value(&flag);
                    if n == 0 {
                        args.fail("--page-size must be at least 1");
                    }
                    o.page_size = Some(n);
                }
                "--name" => o.name = args.value(&flag),
                "--version" => o.version = args.value(&flag),
                "--fault" => {
                    let v: String = args.value(&flag);
                    o.fault = Some(match v.as_str() {
                        "hang" => Fault::Hang,
                        "garbage" => Fault::Garbage,
                        "http500" => Fault::Http500,
                        "rpc-error" => Fault::RpcError,
                        _ => args.fail(&format!(
                            "bad --fault {v:?}: hang, garbage, http500 or rpc-error"
                        )),
                    });
                }
                "--fault-on" => o.fault_on = Some(split_list(&args.value::<String>(&flag))),
                "--fault-after" => o.fault_after = args.value(&flag),
                "--hang" => o.fault = Some(Fault::Hang),
                "--sessions-file" => o.sessions_file = Some(args.value::<String>(&flag).into()),
                "--require-auth" => o.require_auth = Some(args.value(&flag)),
                "--headers-file" => o.headers_file = Some(args.value::<String>(&flag).into()),
                "--bind-delay-ms" => o.bind_delay_ms = args.value(&flag),
                "--echo-env" => o.echo_env = Some(args.value(&flag)),
                "--refuse-initialize" => o.refuse_initialize = true,
                "--log-methods" => o.log_methods = true,
                // Exiting 1 on a taken port is the default; the flag documents intent.
                "--fail-bind-exit" => {}
                _ => args.unknown(&flag),
            }
        }
        if let Some(names) = names {
            o.tools = names.iter().map(|n| ToolSpec::named(n)).collect();
        }
        if let Some(path) = tools_file {
            let text = std::fs::read_to_string(&path).unwrap_or_else(|e| {
                args.fail(&format!("cannot read --tools-file {}: {e}", path.display()))
            });
            o.tools = parse_tools_file(&text);
        }
        for (name, text) in described {
            match o.tools.iter_mut().find(|t| t.name == name) {
                Some(tool) => tool.description = text,
                None => args.fail(&format!("--describe names {name:?}, which is not offered")),
            }
        }
        if !o.path.starts_with('/') {
            args.fail("--path must start with /");
        }
        if o.refuse_initialize && !(o.stdio && o.era == Era::V2026) {
            args.fail("--refuse-initialize needs --stdio --era 2026");
        }
        if o.log_methods && !o.stdio {
            args.fail("--log-methods needs --stdio");
        }
        if o.port.is_none() && !o.stdio {
            args.fail("--port is required (0 picks a free port), or --stdio");
        }
        o
    }
}

/// `name` or `name=description` per line; blank lines and `#` comments skipped.
pub fn parse_tools_file(text: &str) -> Vec<ToolSpec> {
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(|l| match l.split_once('=') {
            Some((name, description)) => ToolSpec {
                name: name.trim().to_owned(),
                description: description.trim().to_owned(),
            },
            None => ToolSpec::named(l),
        })
        .collect()
}

fn split_list(v: &str) -> Vec<String> {
    v.split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
        .collect()
}

/// The rmcp handler: server info, the era's versions, tools.
#[derive(Debug, Clone)]
pub struct TestServer {
    opts: Arc<Options>,
}

impl TestServer {
    /// A handler for these options.
    pub fn new(opts: Arc<Options>) -> TestServer {
        TestServer { opts }
    }

    fn offers(&self, tool: &str) -> bool {
        self.opts.tools.iter().any(|t| t.name == tool)
    }

    fn tool(spec: &ToolSpec) -> Tool {
        serde_json::from_value(json!({
            "name": spec.name,
            "description": spec.description,
            "inputSchema": {
                "type": "object",
                "properties": {
                    "text": {"type": "string", "description": "Text to echo back"},
                    "ms": {"type": "integer", "description": "Milliseconds between progress notifications (progress)"},
                    "rounds": {"type": "integer", "description": "How many elicitations, one after another (elicit)"},
                },
            },
        }))
        .expect("a valid tool")
    }
}

impl ServerHandler for TestServer {
    fn get_info(&self) -> ServerConfig {
        let version = match self.opts.era {
            Era::V2026 => ProtocolVersion::V_2026_07_28,
            Era::V2025 | Era::Both => ProtocolVersion::V_2025_11_25,
        };
        let mut capabilities = json!({"tools": {"listChanged": true}});
        if self.offers("log") {
            capabilities["logging"] = json!({});
        }
        if self.offers("watch") {
            capabilities["resources"] = json!({"subscribe": true});
        }
        serde_json::from_value(json!({
            "protocolVersion": version,
            "capabilities": capabilities,
            "serverInfo": {"name": self.opts.name, "version": self.opts.version},
        }))
        .expect("a valid server info")
    }

    fn supported_protocol_versions(&self) -> Cow<'static, [ProtocolVersion]> {
        match self.opts.era {
            Era::V2025 => {
                Cow::Borrowed(ProtocolVersion::known_up_to(&ProtocolVersion::V_2025_11_25))
            }
            Era::V2026 => Cow::Owned(vec![ProtocolVersion::V_2026_07_28]),
            Era::Both => Cow::Borrowed(ProtocolVersion::KNOWN_VERSIONS),
        }
    }

    async fn list_tools(
        &self,
        request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        let all = &self.opts.tools;
        let start = match request.and_then(|r| r.cursor) {
            None => 0,
            Some(cursor) => cursor
                .parse::<usize>()
                .ok()
                .filter(|&n| n <= all.len())
                .ok_or_else(|| McpError::invalid_params(format!("bad cursor {cursor:?}"), None))?,
        };
        let end = self
            .opts
            .page_size
            .map_or(all.len(), |n| (start + n).min(all.len()));
        let tools: Vec<Value> = all[start..end]
            .iter()
            .map(|t| serde_json::to_value(Self::tool(t)).expect("tool serialises"))
            .collect();
        let mut result = json!({"tools": tools});
        if end < all.len() {
            result["nextCursor"] = json!(end.to_string());
        }
        mark_complete(&mut result, &context);
        Ok(serde_json::from_value(result).expect("a valid tools/list result"))
    }

    #[allow(deprecated)] // logging, deprecated by SEP-2577, is what this tests
    async fn set_level(
        &self,
        _request: rmcp::model::SetLevelRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        if self.offers("log") {
            Ok(())
        } else {
            Err(McpError::method_not_found::<
                rmcp::model::SetLevelRequestMethod,
            >())
        }
    }

    #[allow(deprecated)] // the 2025 era's subscriptions, which this server stands for
    async fn subscribe(
        &self,
        _request: rmcp::model::SubscribeRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        if self.offers("watch") {
            Ok(())
        } else {
            Err(McpError::method_not_found::<
                rmcp::model::SubscribeRequestMethod,
            >())
        }
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let name = request.name.as_ref();
        if !self.opts.tools.iter().any(|t| t.name == name) {
            return Err(McpError::invalid_params(
                format!("Unknown tool: {name:?}"),
                None,
            ));
        }
        let text = request
            .arguments
            .as_ref()
            .and_then(|a| a.get("text"))
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_owned();
        let ms = request
            .arguments
            .as_ref()
            .and_then(|a| a.get("ms"))
            .and_then(Value::as_u64);
        match name {
            "progress" => {
                if let Some(token) = context.meta.get_progress_token() {
                    for step in 1..=3 {
                        if step > 1
                            && let Some(ms) = ms
                        {
                            tokio::time::sleep(std::time::Duration::from_millis(ms)).await;
                        }
                        let mut p = ProgressNotificationParam::new(token.clone(), f64::from(step));
                        p.total = Some(3.0);
                        // A client that went away cannot be told; the call still returns.
                        let _ = context.peer.notify_progress(p).await;
                    }
                }
            }
            "touch" => {
                let _ = context.peer.notify_tool_list_changed().await;
            }
            #[allow(deprecated)] // logging, deprecated by SEP-2577, is what this tests
            "log" => {
                let message = serde_json::from_value(json!({
                    "level": "info", "logger": "xy-test-mcp", "data": "logged",
                }))
                .expect("a valid log message");
                let _ = context.peer.notify_logging_message(message).await;
            }
            "meta" => {
                let mut result = json!({
                    "content": [{"type": "text", "text": serde_json::to_string(&context.meta).unwrap_or_default()}],
                    "isError": false,
                });
                mark_complete(&mut result, &context);
                let result: CallToolResult =
                    serde_json::from_value(result).expect("a valid tool result");
                return Ok(result.into());
            }
            "elicit" | "sample" | "roots" | "asks"
                if context
                    .protocol_version()
                    .is_some_and(|v| v >= ProtocolVersion::V_2026_07_28) =>
            {
                return Ok(input_required(name, &request));
            }
            "elicit" | "sample" | "roots" | "asks" => {
                let rounds = request
                    .arguments
                    .as_ref()
                    .and_then(|a| a.get("rounds"))
                    .and_then(Value::as_u64)
                    .unwrap_or(1);
                let said = match name {
                    "elicit" => {
                        let mut answers = Vec::new();
                        for round in 1..=rounds {
                            let a = ask(&context, elicitation(round)).await?;
                            answers.push(
                                a.pointer("/content/answer")
                                    .and_then(Value::as_str)
                                    .unwrap_or("-")
                                    .to_owned(),
                            );
                        }
                        format!("answers: {}", answers.join(","))
                    }
                    "sample" => {
                        let a = ask(&context, sampling()).await?;
                        format!(
                            "sampled: {}",
                            a.pointer("/content/text")
                                .and_then(Value::as_str)
                                .unwrap_or("-")
                        )
                    }
                    "roots" => {
                        let a = ask(&context, json!({"method": "roots/list"})).await?;
                        format!("roots: {}", a["roots"])
                    }
                    _ => {
                        let (e, r) = tokio::join!(
                            ask(&context, elicitation(1)),
                            ask(&context, json!({"method": "roots/list"}))
                        );
                        let e = e?;
                        format!(
                            "answer: {}; roots: {}",
                            e.pointer("/content/answer")
                                .and_then(Value::as_str)
                                .unwrap_or("-"),
                            r?["roots"]
                        )
                    }
                };
                let mut result = json!({
                    "content": [{"type": "text", "text": said}],
                    "isError": false,
                });
                mark_complete(&mut result, &context);
                let result: CallToolResult =
                    serde_json::from_value(result).expect("a valid tool result");
                return Ok(result.into());
            }
            _ => {}
        }
        let mut result = json!({
            "content": [{"type": "text", "text": text}],
            "isError": false,
        });
        mark_complete(&mut result, &context);
        let result: CallToolResult = serde_json::from_value(result).expect("a valid tool result");
        Ok(result.into())
    }
}

/// A 2026-era call of an asking tool (the era has no server-to-client
/// requests): asks what is still unanswered with an `InputRequiredResult`,
/// the answers so far carried in `requestState` (a test server's state
/// needs no seal), else completes as the 2025 path would.
fn input_required(name: &str, request: &CallToolRequestParams) -> CallToolResponse {
    let rounds = request
        .arguments
        .as_ref()
        .and_then(|a| a.get("rounds"))
        .and_then(Value::as_u64)
        .unwrap_or(1);
    let mut got: serde_json::Map<String, Value> = request
        .request_state
        .as_deref()
        .and_then(|s| serde_json::from_str(s).ok())
        .unwrap_or_default();
    for (k, v) in request.input_responses.iter().flatten() {
        got.insert(k.clone(), v.clone());
    }
    let answer = |key: &str| {
        got.get(key)
            .and_then(|a| a.pointer("/content/answer"))
            .and_then(Value::as_str)
            .unwrap_or("-")
            .to_owned()
    };
    let mut wanted = serde_json::Map::new();
    match name {
        "elicit" => {
            if let Some(round) = (1..=rounds).find(|r| !got.contains_key(&format!("answer-{r}"))) {
                wanted.insert(format!("answer-{round}"), elicitation(round));
            }
        }
        "sample" => {
            if !got.contains_key("sample") {
                wanted.insert("sample".to_owned(), sampling());
            }
        }
        "roots" => {
            if !got.contains_key("roots") {
                wanted.insert("roots".to_owned(), json!({"method": "roots/list"}));
            }
        }
        _ => {
            if !got.contains_key("answer-1") {
                wanted.insert("answer-1".to_owned(), elicitation(1));
            }
            if !got.contains_key("roots") {
                wanted.insert("roots".to_owned(), json!({"method": "roots/list"}));
            }
        }
    }
    if !wanted.is_empty() {
        let result: rmcp::model::InputRequiredResult = serde_json::from_value(json!({
            "resultType": "input_required",
            "inputRequests": wanted,
            "requestState": Value::Object(got).to_string(),
        }))
        .expect("a valid InputRequiredResult");
        return result.into();
    }
    let said = match name {
        "elicit" => {
            let answers: Vec<String> = (1..=rounds)
                .map(|r| answer(&format!("answer-{r}")))
                .collect();
            format!("answers: {}", answers.join(","))
        }
        "sample" => format!(
            "sampled: {}",
            got["sample"]
                .pointer("/content/text")
                .and_then(Value::as_str)
                .unwrap_or("-")
        ),
        "roots" => format!("roots: {}", got["roots"]["roots"]),
        _ => format!(
            "answer: {}; roots: {}",
            answer("answer-1"),
            got["roots"]["roots"]
        ),
    };
    let result: CallToolResult = serde_json::from_value(json!({
        "content": [{"type": "text", "text": said}],
        "isError": false,
        "resultType": "complete",
    }))
    .expect("a valid tool result");
    result.into()
}

/// A 2026-era result says it is complete (`resultType`, which 2026 clients
/// such as the Python SDK's require; rmcp's own constructors set it, a
/// result built from JSON does not).
fn mark_complete(result: &mut Value, context: &RequestContext<RoleServer>) {
    if context
        .protocol_version()
        .is_some_and(|v| v >= ProtocolVersion::V_2026_07_28)
    {
        result["resultType"] = json!("complete");
    }
}

/// The `sampling/createMessage` the `sample` tool asks.
fn sampling() -> Value {
    json!({"method": "sampling/createMessage",
    "params": {"messages": [{"role": "user",
        "content": {"type": "text", "text": "Say hello"}}],
        "maxTokens": 10}})
}

/// The `elicitation/create` of round `round` (one string, `answer`).
fn elicitation(round: u64) -> Value {
    json!({"method": "elicitation/create", "params": {
        "message": format!("Round {round}: your answer?"),
        "requestedSchema": {"type": "object",
            "properties": {"answer": {"type": "string"}}, "required": ["answer"]},
    }})
}

/// Asks the client `req` (`{method, params}`); its result as JSON. The
/// client's refusal is the tool call's error.
async fn ask(context: &RequestContext<RoleServer>, req: Value) -> Result<Value, McpError> {
    let req: rmcp::model::ServerRequest = serde_json::from_value(req).expect("a valid request");
    let got = context
        .peer
        .send_request(req)
        .await
        .map_err(|e| McpError::internal_error(format!("the client refused: {e}"), None))?;
    Ok(serde_json::to_value(got).unwrap_or(Value::Null))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(list: &[&str]) -> Options {
        Options::parse(Args::new(
            list.iter().map(|s| (*s).to_owned()).collect(),
            USAGE,
        ))
    }

    #[test]
    fn flags_choose_era_tools_and_faults() {
        let o = parse(&[
            "--port",
            "0",
            "--era",
            "2026",
            "--tools",
            "a, b,progress",
            "--describe",
            "b=Bee",
            "--fault",
            "garbage",
            "--fault-on",
            "ping",
            "--fault-after",
            "2",
        ]);
        assert_eq!(o.era, Era::V2026);
        let names: Vec<_> = o.tools.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(names, ["a", "b", "progress"]);
        assert_eq!(o.tools[1].description, "Bee");
        assert_eq!(o.fault, Some(Fault::Garbage));
        assert_eq!(o.fault_on, Some(vec!["ping".to_owned()]));
        assert_eq!(o.fault_after, 2);
        assert_eq!(parse(&["--stdio"]).era, Era::Both);
    }

    #[test]
    fn tools_file_lines() {
        let tools = parse_tools_file("# c\necho\n\nadd = Adds numbers\n");
        assert_eq!(tools.len(), 2);
        assert_eq!(tools[1].name, "add");
        assert_eq!(tools[1].description, "Adds numbers");
    }
}
