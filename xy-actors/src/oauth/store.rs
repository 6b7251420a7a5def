//! Where a server's OAuth grant is kept between daemon runs (SPEC §23): the
//! macOS keychain (through `/usr/bin/security`, as §16 secrets are read);
//! elsewhere the Secret Service when one answers on the session bus
//! (`secret_service.rs`, D136), else a `0600` file per server under
//! `$XDG_STATE_HOME/xy/auth/` (directory `0700`, atomic replace). One
//! record per server, a JSON document holding the tokens; nothing here logs
//! or returns it in an error.
//!
//! Every call blocks (a file, a child process): callers run them on the
//! blocking pool with a time limit ([`run_blocking`]), never on xyd's one
//! async thread. The two tool-backed stores share one child runner
//! (`backend.rs`'s `run_tool`: the record on stdin, a deadline, the child
//! killed at it).

use std::io;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::backend::{KEYCHAIN_SERVICE, TokenBackend, ToolOutput, run_tool};

/// How long one store call may take before the caller gives up on it (a
/// locked keychain can prompt; the thread is left to finish on its own).
const STORE_TIMEOUT: Duration = Duration::from_secs(20);

/// Which store holds grants.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TokenStoreKind {
    /// A `0600` JSON file per server in this directory (created `0700`).
    File(PathBuf),
    /// The macOS login keychain, service `xy-oauth`, account = server name.
    Keychain,
    /// The freedesktop Secret Service on the session bus (GNOME Keyring,
    /// KWallet), attributes `service xy-oauth`, `account <server>`.
    SecretService,
}

/// `XY_AUTH_STORE`: `file` or `secret-service` forces that store; unset
/// (or anything else) leaves the platform's choice.
fn forced() -> Option<&'static str> {
    match std::env::var("XY_AUTH_STORE").ok()?.as_str() {
        "file" => Some("file"),
        "secret-service" => Some("secret-service"),
        _ => None,
    }
}

impl TokenStoreKind {
    /// The platform's choice for `auth_dir` (`$XDG_STATE_HOME/xy/auth`)
    /// without looking at the session bus: the keychain on macOS, the file
    /// store elsewhere. `XY_AUTH_STORE=file` picks the file store
    /// everywhere (tests on macOS, headless setups), `secret-service` the
    /// Secret Service. xyd itself uses [`TokenStoreKind::detect`].
    pub fn platform_default(auth_dir: PathBuf) -> TokenStoreKind {
        match forced() {
            Some("file") => TokenStoreKind::File(auth_dir),
            Some(_) => TokenStoreKind::SecretService,
            None if cfg!(target_os = "macos") => TokenStoreKind::Keychain,
            None => TokenStoreKind::File(auth_dir),
        }
    }

    /// [`TokenStoreKind::platform_default`], except that off macOS and
    /// unforced a Secret Service answering on the session bus is chosen
    /// over the file store (SPEC §23). Blocks up to a few seconds on the
    /// probe: call it on the blocking pool.
    pub fn detect(auth_dir: PathBuf) -> TokenStoreKind {
        if cfg!(target_os = "macos") || forced().is_some() {
            return TokenStoreKind::platform_default(auth_dir);
        }
        if super::secret_service::reachable() {
            TokenStoreKind::SecretService
        } else {
            TokenStoreKind::File(auth_dir)
        }
    }

    /// One phrase for `status` and docs: where grants live.
    pub fn describe(&self) -> String {
        match self {
            TokenStoreKind::File(d) => format!("file store {}", d.display()),
            TokenStoreKind::Keychain => format!("macOS keychain (service {KEYCHAIN_SERVICE})"),
            TokenStoreKind::SecretService => {
                format!("Secret Service (attributes service={KEYCHAIN_SERVICE} account=<server>)")
            }
        }
    }
}

/// A persisted grant: rmcp's credentials (client id, token response,
/// granted scopes, issuer) plus what xy adds.
#[derive(Clone, Serialize, Deserialize)]
pub(crate) struct GrantRecord {
    /// The MCP endpoint the grant is for: a grant is never sent elsewhere.
    pub(crate) url: String,
    /// rmcp's record (serde); its `token_response` holds the tokens.
    pub(crate) credentials: rmcp::transport::auth::StoredCredentials,
    /// When the token response was received, ms since the epoch (rmcp keeps
    /// whole seconds, too coarse for short-lived tokens).
    pub(crate) received_at_ms: u64,
    /// Set when the refresh was refused: the grant is dead until a login.
    #[serde(default)]
    pub(crate) login_needed: Option<String>,
}

/// The tokens are not shown.
impl std::fmt::Debug for GrantRecord {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GrantRecord")
            .field("url", &self.url)
            .field("credentials", &self.credentials)
            .field("login_needed", &self.login_needed)
            .finish_non_exhaustive()
    }
}

/// The backend for `kind`.
pub(crate) fn backend(kind: &TokenStoreKind) -> Arc<dyn TokenBackend> {
    match kind {
        TokenStoreKind::File(dir) => Arc::new(FileStore { dir: dir.clone() }),
        TokenStoreKind::Keychain => Arc::new(KeychainStore {
            program: keychain_program(),
        }),
        TokenStoreKind::SecretService => Arc::new(super::secret_service::SecretServiceStore::new()),
    }
}

/// Runs a store call on the blocking pool, bounded by [`STORE_TIMEOUT`].
pub(crate) async fn run_blocking<T: Send + 'static>(
    what: &str,
    f: impl FnOnce() -> io::Result<T> + Send + 'static,
) -> Result<T, String> {
    match tokio::time::timeout(STORE_TIMEOUT, tokio::task::spawn_blocking(f)).await {
        Ok(Ok(Ok(v))) => Ok(v),
        Ok(Ok(Err(e))) => Err(format!("token store: {what}: {e}")),
        Ok(Err(e)) => Err(format!("token store: {what}: {e}")),
        Err(_) => Err(format!(
            "token store: {what}: no answer within {}s",
            STORE_TIMEOUT.as_secs()
        )),
    }
}

/// `<dir>/<server>.json`, `0600`, in a `0700` directory.
struct FileStore {
    dir: PathBuf,
}

impl FileStore {
    fn path(&self, server: &str) -> io::Result<PathBuf> {
        // Server names are config file stems; a separator would escape the dir.
        if server.is_empty() || server.contains(['/', '\0']) || server.starts_with('.') {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "not a server name",
            ));
        }
        Ok(self.dir.join(format!("{server}.json")))
    }
}

impl TokenBackend for FileStore {
    fn load(&self, server: &str) -> io::Result<Option<Vec<u8>>> {
        match std::fs::read(self.path(server)?) {
            Ok(b) => Ok(Some(b)),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e),
        }
    }

    fn save(&self, server: &str, bytes: &[u8]) -> io::Result<()> {
        use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&self.dir)?;
        // An existing directory keeps its mode; make it private anyway.
        std::fs::set_permissions(&self.dir, std::fs::Permissions::from_mode(0o700))?;
        // Durable: a rotated refresh token lost to a power cut is a lost login.
        crate::atomic_file::write(
            &self.path(server)?,
            bytes,
            crate::atomic_file::Sync::Durable,
        )
    }

    fn delete(&self, server: &str) -> io::Result<bool> {
        match std::fs::remove_file(self.path(server)?) {
            Ok(()) => Ok(true),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(false),
            Err(e) => Err(e),
        }
    }
}

/// The macOS keychain through `security`. The record goes in on stdin
/// (`security -i`, hex-encoded with `-X`), never on a command line that
/// `ps` would show.
struct KeychainStore {
    program: String,
}

/// macOS: the system's tool; elsewhere (tests with a fake) `security` on PATH.
fn keychain_program() -> String {
    if cfg!(target_os = "macos")
        && std::path::Path::new("/usr/bin/security").exists()
        && std::env::var_os("XY_TEST_SECURITY").is_none()
    {
        return "/usr/bin/security".to_owned();
    }
    "security".to_owned()
}

/// How long one `security` call may run (the caller's bound is longer).
const KEYCHAIN_DEADLINE: Duration = Duration::from_secs(15);

/// `security`'s exit status for "the specified item could not be found".
const ITEM_NOT_FOUND: i32 = 44;

impl KeychainStore {
    fn run(&self, args: &[&str], stdin: Option<&str>) -> io::Result<ToolOutput> {
        let stdin = stdin.map_or(&[][..], str::as_bytes);
        run_tool(&self.program, args, stdin, KEYCHAIN_DEADLINE)
    }
}

impl TokenBackend for KeychainStore {
    fn load(&self, server: &str) -> io::Result<Option<Vec<u8>>> {
        let out = self.run(
            &[
                "find-generic-password",
                "-s",
                KEYCHAIN_SERVICE,
                "-a",
                server,
                "-w",
            ],
            None,
        )?;
        if out.status.code() == Some(ITEM_NOT_FOUND) {
            return Ok(None);
        }
        out.check("security", "find-generic-password")?;
        let mut data = out.stdout;
        while data.last().is_some_and(|b| *b == b'\n') {
            data.pop();
        }
        Ok(Some(data))
    }

    fn save(&self, server: &str, bytes: &[u8]) -> io::Result<()> {
        let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
        // `-U` updates an existing item in place.
        let command =
            format!("add-generic-password -U -s {KEYCHAIN_SERVICE} -a {server} -X {hex}\n");
        let out = self.run(&["-i"], Some(&command))?;
        out.check("security", "add-generic-password")
    }

    fn delete(&self, server: &str) -> io::Result<bool> {
        let out = self.run(
            &[
                "delete-generic-password",
                "-s",
                KEYCHAIN_SERVICE,
                "-a",
                server,
            ],
            None,
        )?;
        if out.status.code() == Some(ITEM_NOT_FOUND) {
            return Ok(false);
        }
        out.check("security", "delete-generic-password")?;
        Ok(true)
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use super::*;

    #[test]
    fn a_hung_tool_is_killed_at_the_deadline() {
        let t = std::time::Instant::now();
        let e = run_tool("sleep", &["30"], b"", Duration::from_millis(200))
            .err()
            .unwrap();
        assert_eq!(e.kind(), io::ErrorKind::TimedOut);
        assert!(t.elapsed() < xy_testbins::wait::scaled(Duration::from_secs(5)));
    }

    #[test]
    fn file_store_is_private_and_round_trips() {
        let d = tempfile::tempdir().unwrap();
        let dir = d.path().join("auth");
        let s = backend(&TokenStoreKind::File(dir.clone()));
        assert_eq!(s.load("linear").unwrap(), None);
        s.save("linear", b"{\"a\":1}").unwrap();
        s.save("linear", b"{\"a\":2}").unwrap();
        assert_eq!(s.load("linear").unwrap().unwrap(), b"{\"a\":2}");
        let mode = |p: &std::path::Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&dir), 0o700);
        assert_eq!(mode(&dir.join("linear.json")), 0o600);
        assert_eq!(
            std::fs::read_dir(&dir).unwrap().count(),
            1,
            "no temp file left"
        );
        assert!(s.delete("linear").unwrap());
        assert!(!s.delete("linear").unwrap());
        assert!(s.save("../x", b"x").is_err());
    }

    #[test]
    fn keychain_store_passes_the_record_on_stdin_only() {
        // A fake `security` that keeps one item in a file and logs its argv.
        let d = tempfile::tempdir().unwrap();
        let fake = d.path().join("security");
        let item = d.path().join("item");
        let argv = d.path().join("argv");
        std::fs::write(
            &fake,
            format!(
                r#"#!/usr/bin/env python3
import os, sys
item, argv = {item:?}, {argv:?}
open(argv, "a").write(" ".join(sys.argv[1:]) + "\n")
cmd = sys.argv[1]
if cmd == "-i":
    line = sys.stdin.readline().split()
    open(item, "wb").write(bytes.fromhex(line[line.index("-X") + 1]))
elif cmd == "find-generic-password":
    if not os.path.exists(item): sys.exit(44)
    sys.stdout.buffer.write(open(item, "rb").read() + b"\n")
elif cmd == "delete-generic-password":
    if not os.path.exists(item): sys.exit(44)
    os.remove(item)
"#,
                item = item.display().to_string(),
                argv = argv.display().to_string()
            ),
        )
        .unwrap();
        std::fs::set_permissions(&fake, std::fs::Permissions::from_mode(0o755)).unwrap();
        let s = KeychainStore {
            program: fake.display().to_string(),
        };
        assert_eq!(s.load("gh").unwrap(), None);
        s.save("gh", br#"{"token":"tok-secret-1"}"#).unwrap();
        assert_eq!(
            s.load("gh").unwrap().unwrap(),
            br#"{"token":"tok-secret-1"}"#
        );
        assert!(s.delete("gh").unwrap());
        assert!(!s.delete("gh").unwrap());
        let args = std::fs::read_to_string(&argv).unwrap();
        assert!(!args.contains("tok-secret-1"), "{args}");
        assert!(
            !args.contains(
                &"tok-secret-1"
                    .bytes()
                    .map(|b| format!("{b:02x}"))
                    .collect::<String>()
            )
        );
    }
}
