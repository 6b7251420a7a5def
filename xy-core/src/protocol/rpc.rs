//! The JSON-RPC envelope (SPEC §6): a request as a client writes it, any
//! line the daemon writes back, the error object, and xy's error codes.
//! What each method carries is in the rest of `protocol`.

use std::fmt;

use serde::{Deserialize, Serialize};

/// JSON-RPC error codes: the standard ones and xy's own (seed table).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ErrorCode {
    /// `-32700`: the line is not valid JSON (or not UTF-8).
    ParseError,
    /// `-32600`: valid JSON but not a JSON-RPC request (also: line too long).
    InvalidRequest,
    /// `-32601`: no such method.
    MethodNotFound,
    /// `-32602`: params do not match the method; `data` names the field.
    InvalidParams,
    /// `-32603`: a bug or an internal timeout inside the daemon.
    InternalError,
    /// `-32001`: no configured server has that name.
    ServerNotFound,
    /// `-32002`: two configs declare the same port.
    PortConflict,
    /// `-32003`: a config file failed validation; `data` holds diagnostics.
    ConfigInvalid,
    /// `-32004`: the server is already running.
    AlreadyRunning,
    /// `-32005`: the server is not running.
    NotRunning,
    /// `-32006`: the child could not be spawned; `data` holds path and OS error.
    SpawnFailed,
    /// `-32007`: an OAuth login failed (discovery, registration, a refused
    /// or mismatched authorization response, the token exchange); the
    /// message says which step and never holds a token.
    AuthFailed,
    /// `-32008`: `tools_approve {expect}` named a digest the server no
    /// longer lists for that item; nothing was approved; `data` is
    /// [`super::mcp::DigestChangedData`].
    DigestChanged,
}

impl ErrorCode {
    /// Every code, for exhaustive tests and docs.
    pub const ALL: [ErrorCode; 13] = [
        ErrorCode::ParseError,
        ErrorCode::InvalidRequest,
        ErrorCode::MethodNotFound,
        ErrorCode::InvalidParams,
        ErrorCode::InternalError,
        ErrorCode::ServerNotFound,
        ErrorCode::PortConflict,
        ErrorCode::ConfigInvalid,
        ErrorCode::AlreadyRunning,
        ErrorCode::NotRunning,
        ErrorCode::SpawnFailed,
        ErrorCode::AuthFailed,
        ErrorCode::DigestChanged,
    ];

    /// The numeric code on the wire.
    pub const fn code(self) -> i32 {
        match self {
            ErrorCode::ParseError => -32700,
            ErrorCode::InvalidRequest => -32600,
            ErrorCode::MethodNotFound => -32601,
            ErrorCode::InvalidParams => -32602,
            ErrorCode::InternalError => -32603,
            ErrorCode::ServerNotFound => -32001,
            ErrorCode::PortConflict => -32002,
            ErrorCode::ConfigInvalid => -32003,
            ErrorCode::AlreadyRunning => -32004,
            ErrorCode::NotRunning => -32005,
            ErrorCode::SpawnFailed => -32006,
            ErrorCode::AuthFailed => -32007,
            ErrorCode::DigestChanged => -32008,
        }
    }

    /// The code for a wire number, if it is one we define.
    pub fn from_code(code: i32) -> Option<ErrorCode> {
        ErrorCode::ALL.into_iter().find(|c| c.code() == code)
    }

    /// The name used in docs (`ServerNotFound`, …).
    pub const fn name(self) -> &'static str {
        match self {
            ErrorCode::ParseError => "ParseError",
            ErrorCode::InvalidRequest => "InvalidRequest",
            ErrorCode::MethodNotFound => "MethodNotFound",
            ErrorCode::InvalidParams => "InvalidParams",
            ErrorCode::InternalError => "InternalError",
            ErrorCode::ServerNotFound => "ServerNotFound",
            ErrorCode::PortConflict => "PortConflict",
            ErrorCode::ConfigInvalid => "ConfigInvalid",
            ErrorCode::AlreadyRunning => "AlreadyRunning",
            ErrorCode::NotRunning => "NotRunning",
            ErrorCode::SpawnFailed => "SpawnFailed",
            ErrorCode::AuthFailed => "AuthFailed",
            ErrorCode::DigestChanged => "DigestChanged",
        }
    }
}

impl fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({})", self.name(), self.code())
    }
}

/// A JSON-RPC error object as it travels on the wire.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RpcError {
    /// Numeric code; see [`ErrorCode`].
    pub code: i32,
    /// One human sentence.
    pub message: String,
    /// Structured detail (diagnostics, path, OS error, offending field).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<serde_json::Value>,
}

impl RpcError {
    /// Builds an error with one of our codes.
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        RpcError {
            code: code.code(),
            message: message.into(),
            data: None,
        }
    }

    /// Attaches structured `data`.
    pub fn with_data(mut self, data: serde_json::Value) -> Self {
        self.data = Some(data);
        self
    }

    /// The typed code, when it is one we know.
    pub fn kind(&self) -> Option<ErrorCode> {
        ErrorCode::from_code(self.code)
    }
}

impl fmt::Display for RpcError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} (code {})", self.message, self.code)
    }
}

impl std::error::Error for RpcError {}

/// A JSON-RPC request as a client writes it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Request<P = serde_json::Value> {
    /// Always `"2.0"`.
    pub jsonrpc: String,
    /// Request id; absent for notifications.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub id: Option<serde_json::Value>,
    /// Method name.
    pub method: String,
    /// Params object, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub params: Option<P>,
}

impl<P> Request<P> {
    /// A request with a numeric id.
    pub fn new(id: u64, method: &str, params: Option<P>) -> Self {
        Request {
            jsonrpc: "2.0".to_owned(),
            id: Some(serde_json::Value::from(id)),
            method: method.to_owned(),
            params,
        }
    }
}

/// Any line the daemon writes: a response (with `id`) or a notification.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Incoming {
    /// Always `"2.0"`.
    pub jsonrpc: String,
    /// Present on responses (may be `null` for parse errors).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<serde_json::Value>,
    /// Present on notifications.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub method: Option<String>,
    /// Present on notifications.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub params: Option<serde_json::Value>,
    /// Present on successful responses.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<serde_json::Value>,
    /// Present on failed responses.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<RpcError>,
}
