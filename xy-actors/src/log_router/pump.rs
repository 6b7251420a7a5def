//! A log pump: reads one child stream in large chunks and cuts each read
//! into lines in place (one pass for newlines, UTF-8 checked once per read,
//! lossy per line only where that fails, at most 64 KiB a line, a final
//! unterminated line kept), then hands the read's lines to the server's sink
//! as one [`Chunk`]: no allocation and no copy per line.

use tokio::io::{AsyncRead, AsyncReadExt};
use xy_core::protocol::LogStream;

use super::chunk::Chunk;
use super::sink::{SharedSink, lock};

/// First buffer size: enough for a quiet server's lines, and what an idle
/// pump keeps allocated (two per server, so it counts at a fleet's size:
/// `docs/performance-history.md`). A read that fills it grows it 4×, so a flood
/// reaches `MAX_BUF` in four reads.
const MIN_BUF: usize = 1024;
/// Largest buffer, reached while reads keep filling it (a flood): fewer
/// wakeups per byte (the pipe is enlarged to match on Linux). Always more
/// than a line, so a read always has room.
const MAX_BUF: usize = 256 * 1024;

/// Runs until EOF or a read error (the child and its group closed the pipe).
pub(crate) async fn pump<R: AsyncRead + Unpin>(
    mut reader: R,
    stream: LogStream,
    sink: SharedSink,
    redactor: Option<std::sync::Arc<super::redact::Redactor>>,
) {
    let disk = lock(&sink).disk();
    let mut buf = vec![0u8; MIN_BUF];
    let mut filled = 0;
    let mut chunk = Chunk::default();
    loop {
        let n = match reader.read(&mut buf[filled..]).await {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        let was_full = filled + n == buf.len();
        filled += n;
        let used = chunk.cut(&buf[..filled], false);
        if let Some(r) = &redactor {
            chunk.redact(&buf[..used], r);
        }
        if !chunk.is_empty() {
            // Waits (holding nothing) while the disk writer is far behind:
            // the child is slowed only by a disk slower than it.
            disk.wait_for_room().await;
            lock(&sink).push_chunk(stream, &chunk, &buf);
            if was_full {
                // A flood: let other servers' pumps and the RPCs run between
                // its reads instead of after a whole coop budget of them.
                tokio::task::yield_now().await;
            }
        }
        // The unterminated rest moves to the front (less than a line).
        buf.copy_within(used..filled, 0);
        filled -= used;
        if was_full && buf.len() < MAX_BUF {
            // The pipe had more than we took: read bigger.
            buf.resize((buf.len() * 4).min(MAX_BUF), 0);
        } else if filled > buf.len() / 2 {
            // A long line is being assembled: keep room to read.
            buf.resize((buf.len() * 2).min(MAX_BUF), 0);
        } else if n <= MIN_BUF / 2 && buf.len() > MIN_BUF && filled < MIN_BUF / 2 {
            // The flood is over: give the big buffer back.
            buf.truncate(MIN_BUF);
            buf.shrink_to_fit();
        }
    }
    if filled > 0 {
        chunk.cut(&buf[..filled], true);
        if let Some(r) = &redactor {
            chunk.redact(&buf[..filled], r);
        }
        disk.wait_for_room().await;
        lock(&sink).push_chunk(stream, &chunk, &buf);
    }
}
