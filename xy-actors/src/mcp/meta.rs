//! The `_meta` keys xy reads or writes that the wire module of `xy-core`
//! does not name, and the one source of unguessable ids and tokens (2025
//! session ids, the ids of server-to-client requests, the egress proxy's
//! credentials, MRTR seals' nonces).

/// The `_meta` key naming the `subscriptions/listen` request a notification belongs to.
pub(crate) const META_SUBSCRIPTION: &str = "io.modelcontextprotocol/subscriptionId";

/// 128 random bits from the kernel, as hex.
pub(crate) fn random_hex() -> Result<String, getrandom::Error> {
    let mut b = [0u8; 16];
    getrandom::fill(&mut b)?;
    Ok(b.iter().map(|x| format!("{x:02x}")).collect())
}

/// An id nobody can guess (sessions, and the ids of server-to-client
/// requests, which are what lets an answer in).
pub(crate) fn unguessable() -> String {
    random_hex().unwrap_or_else(|_| {
        // Never on a working system; still unique per daemon.
        let n = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default()
            .as_nanos();
        n.to_le_bytes().iter().map(|x| format!("{x:02x}")).collect()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_128_bits_of_hex_and_differ() {
        let (a, b) = (unguessable(), unguessable());
        assert_eq!(a.len(), 32);
        assert!(a.bytes().all(|c| c.is_ascii_hexdigit()));
        assert_ne!(a, b);
    }
}
