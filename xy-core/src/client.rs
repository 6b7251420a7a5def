//! The one blocking JSON-RPC line client for xyd's socket (feature
//! `client`): one request per line, replies matched by id, notifications
//! queued for the caller, and a deadline on every read so a wedged daemon
//! cannot hang the caller. `xyctl`, the integration tests and the benches
//! all speak through it; [`Client::send_line`] and [`Client::read_line`]
//! give tests the raw lines too.

use std::collections::VecDeque;
use std::io::{self, BufRead, BufReader, Read, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde::Deserialize;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::value::RawValue;

use crate::protocol::{
    LogEndNotification, LogNotification, LogsParams, LogsResult, MAX_LINE_BYTES, Request, RpcError,
    method,
};

/// Why a call did not produce a result.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// Nothing to connect to (missing socket, refused, permission).
    #[error("cannot connect to xyd at {}: {source}", socket.display())]
    Connect {
        /// The socket path.
        socket: PathBuf,
        /// The OS error.
        source: io::Error,
    },
    /// Connected, but no reply in time.
    #[error("xyd did not answer `{method}` within {}", humantime::format_duration(*after))]
    Timeout {
        /// The method waited on.
        method: String,
        /// How long we waited.
        after: Duration,
    },
    /// The daemon closed the connection before replying.
    #[error("xyd closed the connection")]
    Closed,
    /// Reading or writing the socket failed.
    #[error("lost the connection to xyd: {0}")]
    Io(io::Error),
    /// A line we cannot make sense of.
    #[error("unexpected reply from xyd: {0}")]
    Protocol(String),
    /// The daemon answered with a JSON-RPC error.
    #[error("{0}")]
    Rpc(RpcError),
}

/// One line from the daemon, with `result` and `params` kept as raw JSON so
/// a caller can print the result byte for byte (field order included). It
/// is the borrowed view of [`crate::protocol::Incoming`], not a new shape.
#[derive(Debug, Deserialize)]
struct RawIncoming {
    #[serde(default)]
    id: Option<serde_json::Value>,
    #[serde(default)]
    method: Option<String>,
    #[serde(default)]
    params: Option<Box<RawValue>>,
    #[serde(default)]
    result: Option<Box<RawValue>>,
    #[serde(default)]
    error: Option<RpcError>,
}

/// A notification (`log`, `log_end`) the daemon sent.
#[derive(Debug)]
pub struct Notification {
    /// The notification's method name.
    pub method: String,
    /// Its params, raw.
    pub params: Box<RawValue>,
}

impl Notification {
    /// Decodes the params into their protocol type.
    pub fn decode<T: DeserializeOwned>(&self) -> Result<T, ClientError> {
        serde_json::from_str(self.params.get())
            .map_err(|e| ClientError::Protocol(format!("bad `{}` params: {e}", self.method)))
    }
}

/// A connection to xyd.
#[derive(Debug)]
pub struct Client {
    reader: BufReader<UnixStream>,
    next_id: u64,
    queued: VecDeque<Notification>,
}

/// Replies can be long (a big `list`), but never unbounded: the protocol's
/// line limit plus slack for the envelope.
const MAX_REPLY_BYTES: usize = MAX_LINE_BYTES * 4;

impl Client {
    /// Connects; `timeout` also bounds every write.
    pub fn connect(socket: &Path, timeout: Duration) -> Result<Client, ClientError> {
        let stream = UnixStream::connect(socket).map_err(|source| ClientError::Connect {
            socket: socket.to_path_buf(),
            source,
        })?;
        stream
            .set_write_timeout(Some(timeout))
            .map_err(ClientError::Io)?;
        Ok(Client {
            reader: BufReader::new(stream),
            next_id: 1,
            queued: VecDeque::new(),
        })
    }

    /// A second handle on the same socket (to send `logs_cancel` from the
    /// signal thread while the main thread reads).
    pub fn try_clone_stream(&self) -> io::Result<UnixStream> {
        self.reader.get_ref().try_clone()
    }

    /// Writes `bytes` as they are (a test's malformed line, say).
    pub fn send_raw(&mut self, bytes: &[u8]) -> Result<(), ClientError> {
        self.reader
            .get_mut()
            .write_all(bytes)
            .map_err(ClientError::Io)
    }

    /// Half-closes our side, as `echo … | socat` does at end of input.
    pub fn shutdown_write(&self) -> Result<(), ClientError> {
        self.reader
            .get_ref()
            .shutdown(std::net::Shutdown::Write)
            .map_err(ClientError::Io)
    }

    /// Sends a request for `method` and returns its id without waiting.
    pub fn request<P: Serialize>(
        &mut self,
        method: &str,
        params: Option<&P>,
    ) -> Result<u64, ClientError> {
        let id = self.next_id;
        self.next_id += 1;
        let mut line = serde_json::to_vec(&Request::new(id, method, params))
            .map_err(|e| ClientError::Protocol(e.to_string()))?;
        line.push(b'\n');
        self.send_raw(&line)?;
        Ok(id)
    }

    /// Calls `method` and returns its result as raw JSON text.
    pub fn call_raw<P: Serialize>(
        &mut self,
        method: &str,
        params: Option<&P>,
        timeout: Duration,
    ) -> Result<Box<RawValue>, ClientError> {
        let id = self.request(method, params)?;
        let deadline = Instant::now() + timeout;
        let timed_out = || ClientError::Timeout {
            method: method.to_owned(),
            after: timeout,
        };
        loop {
            let msg = self.read_message(Some(deadline))?.ok_or_else(timed_out)?;
            if let Some(n) = msg.method {
                self.queued.push_back(Notification {
                    method: n,
                    params: msg.params.unwrap_or_else(empty_object),
                });
                continue;
            }
            let ours = msg.id.as_ref().and_then(serde_json::Value::as_u64) == Some(id);
            if let Some(err) = msg.error {
                // A `null` id is the daemon's answer to a line it could not parse.
                if ours || msg.id.is_none() || msg.id == Some(serde_json::Value::Null) {
                    return Err(ClientError::Rpc(err));
                }
                continue;
            }
            if ours {
                return msg
                    .result
                    .ok_or_else(|| ClientError::Protocol("reply without result or error".into()));
            }
            // A reply to some other request (e.g. `logs_cancel` sent by the
            // signal thread): not ours to handle.
        }
    }

    /// Calls `method` and decodes its result.
    pub fn call<P: Serialize, R: DeserializeOwned>(
        &mut self,
        method: &str,
        params: Option<&P>,
        timeout: Duration,
    ) -> Result<R, ClientError> {
        let raw = self.call_raw(method, params, timeout)?;
        serde_json::from_str(raw.get())
            .map_err(|e| ClientError::Protocol(format!("bad `{method}` result: {e}")))
    }

    /// The buffered last `n` lines of one server: a non-follow `logs` call,
    /// its `log` notifications collected until its `log_end`, each read
    /// bounded by `timeout`.
    pub fn log_tail(
        &mut self,
        name: &str,
        n: u32,
        timeout: Duration,
    ) -> Result<Vec<LogNotification>, ClientError> {
        let params = LogsParams {
            name: Some(name.to_owned()),
            tail: Some(n),
            ..LogsParams::default()
        };
        let sub: LogsResult = self.call(method::LOGS, Some(&params), timeout)?;
        let deadline = Instant::now() + timeout;
        let mut lines = Vec::new();
        loop {
            let note = self.next_notification(Some(deadline))?;
            match note.method.as_str() {
                method::LOG => {
                    let l: LogNotification = note.decode()?;
                    if l.subscription_id == sub.subscription_id {
                        lines.push(l);
                    }
                }
                method::LOG_END => {
                    let e: LogEndNotification = note.decode()?;
                    if e.subscription_id == sub.subscription_id {
                        return Ok(lines);
                    }
                }
                _ => {}
            }
        }
    }

    /// The next notification; `deadline` `None` waits for ever (follow mode).
    /// Replies to requests we no longer wait for are skipped.
    pub fn next_notification(
        &mut self,
        deadline: Option<Instant>,
    ) -> Result<Notification, ClientError> {
        if let Some(n) = self.queued.pop_front() {
            return Ok(n);
        }
        loop {
            let msg = self
                .read_message(deadline)?
                .ok_or_else(|| ClientError::Timeout {
                    method: "logs".to_owned(),
                    after: deadline.map_or(Duration::ZERO, |d| {
                        d.saturating_duration_since(Instant::now())
                    }),
                })?;
            if let Some(method) = msg.method {
                return Ok(Notification {
                    method,
                    params: msg.params.unwrap_or_else(empty_object),
                });
            }
        }
    }

    /// The next whole line (newline included), as it came; `Ok(None)` at
    /// end of stream. A read past `deadline` is [`ClientError::Timeout`].
    pub fn read_line(&mut self, deadline: Option<Instant>) -> Result<Option<Vec<u8>>, ClientError> {
        let mut buf = Vec::new();
        loop {
            let wait = match deadline {
                Some(d) => {
                    let left = d.saturating_duration_since(Instant::now());
                    if left.is_zero() {
                        return Err(line_timeout());
                    }
                    Some(left)
                }
                None => None,
            };
            self.reader
                .get_ref()
                .set_read_timeout(wait)
                .map_err(ClientError::Io)?;
            let limit = (MAX_REPLY_BYTES - buf.len()) as u64;
            match (&mut self.reader).take(limit).read_until(b'\n', &mut buf) {
                Ok(0) if buf.is_empty() => return Ok(None),
                Ok(_) if buf.last() == Some(&b'\n') => return Ok(Some(buf)),
                Ok(_) if buf.len() >= MAX_REPLY_BYTES => {
                    return Err(ClientError::Protocol("reply line too long".into()));
                }
                // EOF in the middle of a line.
                Ok(_) => return Err(ClientError::Closed),
                Err(e)
                    if matches!(
                        e.kind(),
                        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                    ) =>
                {
                    return Err(line_timeout());
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(ClientError::Io(e)),
            }
        }
    }

    /// The next message; `Ok(None)` when `deadline` passed first.
    fn read_message(
        &mut self,
        deadline: Option<Instant>,
    ) -> Result<Option<RawIncoming>, ClientError> {
        let buf = match self.read_line(deadline) {
            Ok(Some(buf)) => buf,
            Ok(None) => return Err(ClientError::Closed),
            Err(ClientError::Timeout { .. }) => return Ok(None),
            Err(e) => return Err(e),
        };
        serde_json::from_slice(&buf).map(Some).map_err(|e| {
            ClientError::Protocol(format!(
                "{e}: {}",
                String::from_utf8_lossy(&buf[..buf.len().min(200)])
            ))
        })
    }
}

fn line_timeout() -> ClientError {
    ClientError::Timeout {
        method: String::new(),
        after: Duration::ZERO,
    }
}

fn empty_object() -> Box<RawValue> {
    RawValue::from_string("{}".to_owned()).unwrap_or_else(|_| unreachable!("{{}} is valid JSON"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::net::UnixListener;
    use std::thread;

    /// A fake daemon answering with canned lines after reading one request.
    fn serve(lines: Vec<String>) -> (tempfile::TempDir, PathBuf, thread::JoinHandle<String>) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.sock");
        let listener = UnixListener::bind(&path).unwrap();
        let h = thread::spawn(move || {
            let (s, _) = listener.accept().unwrap();
            let mut r = BufReader::new(s.try_clone().unwrap());
            let mut req = String::new();
            r.read_line(&mut req).unwrap();
            let mut w = s;
            for l in lines {
                w.write_all(l.as_bytes()).unwrap();
                w.write_all(b"\n").unwrap();
            }
            // Hold the connection open until the client is done.
            let mut rest = String::new();
            let _ = r.read_line(&mut rest);
            req
        });
        (dir, path, h)
    }

    #[test]
    fn result_is_verbatim_and_notifications_are_queued() {
        let (_d, path, h) = serve(vec![
            r#"{"jsonrpc":"2.0","method":"log","params":{"subscription_id":1}}"#.into(),
            r#"{"jsonrpc":"2.0","id":1,"result":{"z":1,"a":[2, 3]}}"#.into(),
        ]);
        let mut c = Client::connect(&path, Duration::from_secs(5)).unwrap();
        let raw = c
            .call_raw::<()>("list", None, Duration::from_secs(5))
            .unwrap();
        assert_eq!(raw.get(), r#"{"z":1,"a":[2, 3]}"#);
        let n = c.next_notification(None).unwrap();
        assert_eq!(n.method, "log");
        drop(c);
        let req = h.join().unwrap();
        assert_eq!(req, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"list\"}\n");
    }

    #[test]
    fn rpc_error_is_returned() {
        let (_d, path, _h) = serve(vec![
            r#"{"jsonrpc":"2.0","id":1,"error":{"code":-32001,"message":"no server named x"}}"#
                .into(),
        ]);
        let mut c = Client::connect(&path, Duration::from_secs(5)).unwrap();
        let err = c
            .call_raw::<()>("status", None, Duration::from_secs(5))
            .unwrap_err();
        match err {
            ClientError::Rpc(e) => assert_eq!(e.code, -32001),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn silence_times_out() {
        let (_d, path, _h) = serve(vec![]);
        let mut c = Client::connect(&path, Duration::from_secs(5)).unwrap();
        let start = Instant::now();
        let err = c
            .call_raw::<()>("list", None, Duration::from_millis(200))
            .unwrap_err();
        assert!(matches!(err, ClientError::Timeout { .. }), "{err:?}");
        assert!(start.elapsed() < Duration::from_secs(5));
    }

    #[test]
    fn missing_socket_is_connect_error() {
        let dir = tempfile::tempdir().unwrap();
        let err = Client::connect(&dir.path().join("none"), Duration::from_secs(1))
            .err()
            .unwrap();
        assert!(matches!(err, ClientError::Connect { .. }));
    }
}
