//! One server-sent event as a client reads it (WHATWG HTML §9.2.6): lines
//! end at CRLF, CR or LF; `data` lines join with LF; a leading space after
//! the colon is dropped; comments and other fields are kept as they are.
//! The proxy reads what a client would read, so what it checks is what
//! the client gets (a lone CR cannot hide a `data:` line inside another).

use bytes::Bytes;

/// An event: its data (absent when it has no `data` field) and its other
/// lines, each ending in LF.
#[derive(Debug, Default, PartialEq, Eq)]
pub(super) struct Event {
    pub(super) data: Option<Vec<u8>>,
    other: Vec<u8>,
}

impl Event {
    /// Reads one event's bytes (its blank line included or not).
    pub(super) fn parse(raw: &[u8]) -> Event {
        let mut ev = Event::default();
        let mut rest = raw;
        while !rest.is_empty() {
            let end = memchr::memchr2(b'\r', b'\n', rest).unwrap_or(rest.len());
            let line = &rest[..end];
            let skip = match rest.get(end..end + 2) {
                Some(b"\r\n") => 2,
                Some(_) => 1,
                None => rest.len() - end,
            };
            rest = &rest[(end + skip).min(rest.len())..];
            if line.is_empty() {
                continue;
            }
            let (field, value) = match memchr::memchr(b':', line) {
                Some(c) => {
                    let v = &line[c + 1..];
                    (&line[..c], v.strip_prefix(b" ").unwrap_or(v))
                }
                None => (line, &b""[..]),
            };
            if field == b"data" {
                let data = ev.data.get_or_insert_with(Vec::new);
                data.extend_from_slice(value);
                data.push(b'\n');
            } else {
                ev.other.extend_from_slice(line);
                ev.other.push(b'\n');
            }
        }
        if let Some(d) = &mut ev.data {
            d.pop();
        }
        ev
    }

    /// The event again, with `data` in place of its data (one line).
    pub(super) fn with_data(&self, data: &[u8]) -> Bytes {
        let mut out = Vec::with_capacity(self.other.len() + data.len() + 9);
        out.extend_from_slice(&self.other);
        out.extend_from_slice(b"data: ");
        out.extend_from_slice(data);
        out.extend_from_slice(b"\n\n");
        Bytes::from(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_end_as_a_client_ends_them() {
        let ev = Event::parse(b"id: 1\rdata: {\"a\":\r\ndata:1}\nevent: message\n\n");
        assert_eq!(ev.data.as_deref(), Some(&b"{\"a\":\n1}"[..]));
        assert_eq!(
            ev.with_data(b"{}"),
            Bytes::from_static(b"id: 1\nevent: message\ndata: {}\n\n")
        );
        assert_eq!(Event::parse(b": comment\n\n").data, None);
        assert_eq!(Event::parse(b"data\n\n").data.as_deref(), Some(&b""[..]));
    }
}
