//! A size-rotating log file: `<name>.log`, rolled to `<name>.log.1` … `.5`
//! (older generations dropped) once it would pass the threshold. Serves the
//! child logs (whole batches of lines, written as they come: one syscall per
//! batch) and, buffered behind `tracing_appender::non_blocking` (a write per
//! line), the daemon's `daemon.log`.

use std::fs::{File, OpenOptions};
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};

/// A size-rotating log file, buffered or not. Each `write` call lands whole in one
/// generation, so cuts fall between lines when callers write a line per call
/// (`write_all` of a whole line, as `tracing_appender::non_blocking` does; not
/// `writeln!`, which may issue several writes).
#[derive(Debug)]
pub struct RotatingWriter {
    path: PathBuf,
    max_bytes: u64,
    keep: u32,
    file: BufWriter<File>,
    size: u64,
}

impl RotatingWriter {
    /// SPEC §5's threshold: 10 MB.
    pub const DEFAULT_MAX_BYTES: u64 = 10 * 1024 * 1024;
    /// Generations kept besides the live file.
    pub const KEEP: u32 = 5;
    /// The buffer of [`RotatingWriter::open_buffered`]: a line per `write`
    /// costs a syscall per 64 KiB, not per line.
    const BUFFER: usize = 64 * 1024;

    /// Opens (appends to) `path` for writes of whole batches of lines, each
    /// written at once (no buffer: 200 servers' idle log files would hold
    /// 200 mostly empty 64 KiB buffers).
    pub fn open(path: impl Into<PathBuf>, max_bytes: u64) -> io::Result<RotatingWriter> {
        Self::open_with(path.into(), max_bytes, 0)
    }

    /// Opens (appends to) `path` for many small writes, behind a 64 KiB
    /// buffer (flush to see them in the file).
    pub fn open_buffered(path: impl Into<PathBuf>, max_bytes: u64) -> io::Result<RotatingWriter> {
        Self::open_with(path.into(), max_bytes, Self::BUFFER)
    }

    /// Opens (appends to) `path`, creating it and its directory.
    fn open_with(path: PathBuf, max_bytes: u64, buffer: usize) -> io::Result<RotatingWriter> {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        let file = open_append(&path)?;
        let size = file.metadata()?.len();
        Ok(RotatingWriter {
            path,
            max_bytes: max_bytes.max(1),
            keep: Self::KEEP,
            // A zero capacity makes every write go straight to the file.
            file: BufWriter::with_capacity(buffer, file),
            size,
        })
    }

    /// Opens a FIFO for writing without waiting for a reader (none yet is
    /// an error), then writes to it blocking, like a file. Never rotated:
    /// renaming a FIFO would not move its reader.
    pub fn open_fifo(path: impl Into<PathBuf>) -> io::Result<RotatingWriter> {
        use std::os::unix::fs::OpenOptionsExt;
        let path = path.into();
        let file = OpenOptions::new()
            .write(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(&path)?;
        nix::fcntl::fcntl(
            &file,
            nix::fcntl::FcntlArg::F_SETFL(nix::fcntl::OFlag::empty()),
        )
        .map_err(io::Error::from)?;
        Ok(RotatingWriter {
            path,
            max_bytes: u64::MAX,
            keep: Self::KEEP,
            file: BufWriter::with_capacity(0, file),
            size: 0,
        })
    }

    /// The live file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// (device, inode) of the open live file, to notice that its path now
    /// names another file.
    pub fn file_id(&self) -> io::Result<(u64, u64)> {
        use std::os::unix::fs::MetadataExt;
        let m = self.file.get_ref().metadata()?;
        Ok((m.dev(), m.ino()))
    }

    /// Bytes in the live file (including buffered ones).
    pub fn size(&self) -> u64 {
        self.size
    }

    /// `<path>.<n>`.
    pub fn generation(&self, n: u32) -> PathBuf {
        let mut s = self.path.clone().into_os_string();
        s.push(format!(".{n}"));
        PathBuf::from(s)
    }

    /// Shifts `.4 → .5`, …, live → `.1` and starts a fresh live file.
    pub fn rotate(&mut self) -> io::Result<()> {
        self.file.flush()?;
        for n in (1..self.keep).rev() {
            let from = self.generation(n);
            if from.exists() {
                std::fs::rename(&from, self.generation(n + 1))?;
            }
        }
        std::fs::rename(&self.path, self.generation(1))?;
        self.file = BufWriter::with_capacity(self.file.capacity(), open_append(&self.path)?);
        self.size = 0;
        Ok(())
    }
}

impl RotatingWriter {
    /// Writes whole `\n`-terminated lines, rotating between lines when the
    /// live file would pass the threshold: one buffered copy per batch
    /// instead of one `write` per line.
    pub fn write_lines(&mut self, mut buf: &[u8]) -> io::Result<()> {
        while !buf.is_empty() {
            let room = self.max_bytes.saturating_sub(self.size);
            if buf.len() as u64 <= room {
                self.file.write_all(buf)?;
                self.size += buf.len() as u64;
                return Ok(());
            }
            // The longest prefix of whole lines that fits; at least one line
            // (into a fresh file) so an over-long line still gets written.
            let limit = usize::try_from(room).unwrap_or(usize::MAX).min(buf.len());
            let fit = buf[..limit]
                .iter()
                .rposition(|&b| b == b'\n')
                .map(|p| p + 1);
            match fit {
                Some(n) => {
                    self.file.write_all(&buf[..n])?;
                    self.size += n as u64;
                    buf = &buf[n..];
                    self.rotate()?;
                }
                None if self.size > 0 => self.rotate()?,
                None => {
                    let n = buf
                        .iter()
                        .position(|&b| b == b'\n')
                        .map_or(buf.len(), |p| p + 1);
                    self.file.write_all(&buf[..n])?;
                    self.size += n as u64;
                    buf = &buf[n..];
                }
            }
        }
        Ok(())
    }
}

fn open_append(path: &Path) -> io::Result<File> {
    OpenOptions::new().create(true).append(true).open(path)
}

impl Write for RotatingWriter {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        if self.size > 0 && self.size + buf.len() as u64 > self.max_bytes {
            self.rotate()?;
        }
        self.file.write_all(buf)?;
        self.size += buf.len() as u64;
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        self.file.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rotates_and_keeps_five_generations() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.log");
        let mut w = RotatingWriter::open(&path, 100).unwrap();
        for i in 0..100 {
            // One `write` per line (`writeln!` may split a line over several).
            w.write_all(format!("line {i:04} ................\n").as_bytes())
                .unwrap();
        }
        w.flush().unwrap();
        let mut names: Vec<String> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        assert_eq!(
            names,
            [
                "a.log", "a.log.1", "a.log.2", "a.log.3", "a.log.4", "a.log.5"
            ]
        );
        for n in &names {
            let text = std::fs::read_to_string(dir.path().join(n)).unwrap();
            assert!(text.len() <= 100, "{n} has {} bytes", text.len());
            assert!(text.ends_with('\n'), "cut inside a line in {n}");
        }
        // The newest lines are in the live file, the next older in .1.
        let live = std::fs::read_to_string(&path).unwrap();
        assert!(live.contains("line 0099"));
        let one = std::fs::read_to_string(w.generation(1)).unwrap();
        assert!(!one.contains("line 0099"));
    }

    #[test]
    fn batches_rotate_between_lines() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.log");
        let mut w = RotatingWriter::open(&path, 100).unwrap();
        let mut batch = Vec::new();
        for i in 0..30 {
            batch.extend_from_slice(format!("line {i:04} ...........\n").as_bytes());
        }
        w.write_lines(&batch).unwrap();
        w.flush().unwrap();
        let mut total = String::new();
        for n in (1..=5).rev() {
            let text = std::fs::read_to_string(w.generation(n)).unwrap();
            assert!(text.len() <= 100 && text.ends_with('\n'), "{text:?}");
            total.push_str(&text);
        }
        total.push_str(&std::fs::read_to_string(&path).unwrap());
        assert!(total.ends_with("line 0029 ...........\n"));
        // A line longer than the threshold goes whole into a fresh file.
        let long = format!("{}\n", "x".repeat(250));
        w.write_lines(long.as_bytes()).unwrap();
        w.flush().unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), long);
    }

    #[test]
    fn appends_to_an_existing_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("b.log");
        std::fs::write(&path, "old\n").unwrap();
        let mut w = RotatingWriter::open(&path, 1000).unwrap();
        assert_eq!(w.size(), 4);
        w.write_all(b"new\n").unwrap();
        w.flush().unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "old\nnew\n");
    }
}
