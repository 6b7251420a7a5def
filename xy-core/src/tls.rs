//! The TLS set-up both binaries share: rustls is built without a default
//! crypto provider (xyd's `reqwest`, xyctl's `ureq`), so each process
//! installs ring once before its first TLS client. macOS uses the platform's
//! TLS (Security.framework) and needs nothing here (D115).

/// Installs rustls's ring provider as the process default, once; later
/// calls do nothing. Call it before building any rustls-backed client.
#[cfg(not(target_os = "macos"))]
pub fn install_provider() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        // Err only when another provider was installed first, which is as good.
        let _ = rustls::crypto::ring::default_provider().install_default();
    });
}

/// Nothing to install: macOS clients use Security.framework.
#[cfg(target_os = "macos")]
pub fn install_provider() {}
