//! Reading input files with a size cap: every reader of memplan goes through here, so no
//! input (a huge file, `/dev/zero`, a FIFO that never ends) can make memplan read without
//! bound.
//!
//! The path `-` ([`STDIN`]) is standard input: read once, at most [`MAX_STDIN_BYTES`], and
//! kept, so that every reader of `-` in one process sees the same bytes (a caller that
//! first sniffs the input's kind, then reads it, reads it twice).

use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// The path that names standard input.
pub const STDIN: &str = "-";

/// The most bytes read from standard input: the largest cap of any reader (ONNX's).
pub const MAX_STDIN_BYTES: u64 = 2 << 30;

/// Whether `path` names standard input (`-`).
pub fn is_stdin(path: &Path) -> bool {
    path.as_os_str() == STDIN
}

/// Why standard input could not be read, kept with it.
#[derive(Debug)]
enum StdinError {
    Io(std::io::ErrorKind, String),
    TooLarge,
    Refused(String),
}

static STDIN_BYTES: OnceLock<Result<Vec<u8>, StdinError>> = OnceLock::new();

fn stdin_cap() -> u64 {
    MAX_STDIN_BYTES.max(max_text_bytes())
}

/// Standard input, read on the first call (at most [`MAX_STDIN_BYTES`]) and kept. A file
/// redirected to it that is over the cap is refused before it is read, and so is a stream
/// whose first 8 bytes are all NUL (`< /dev/zero`): no input of memplan starts so (text
/// has no NUL, a protobuf message's first tag has a field number above 0, a TFLite model
/// has `TFL3` at byte 4), and reading on would hold up to the cap in memory.
pub fn stdin_bytes() -> Result<&'static [u8], FileError> {
    let read = STDIN_BYTES.get_or_init(read_stdin);
    let path = || PathBuf::from(STDIN);
    match read {
        Ok(bytes) => Ok(bytes),
        Err(StdinError::TooLarge) => Err(FileError::TooLarge {
            path: path(),
            limit: stdin_cap(),
        }),
        Err(StdinError::Refused(message)) => Err(FileError::Refused {
            path: path(),
            message: message.clone(),
        }),
        Err(StdinError::Io(kind, message)) => Err(FileError::Io {
            path: path(),
            source: std::io::Error::new(*kind, message.clone()),
        }),
    }
}

fn read_stdin() -> Result<Vec<u8>, StdinError> {
    let cap = stdin_cap();
    // Standard input's own file (Linux names it /proc/self/fd/0): a regular one says its
    // length.
    if std::fs::metadata("/proc/self/fd/0").is_ok_and(|m| m.is_file() && m.len() > cap) {
        return Err(StdinError::TooLarge);
    }
    let mut bytes = Vec::new();
    let mut stdin = std::io::stdin().lock().take(cap.saturating_add(1));
    let mut chunk = vec![0u8; 1 << 16];
    loop {
        let n = match stdin.read(&mut chunk) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(StdinError::Io(e.kind(), e.to_string())),
        };
        let before = bytes.len();
        bytes.extend_from_slice(&chunk[..n]);
        if before < 8 && bytes.len() >= 8 && bytes[..8].iter().all(|&b| b == 0) {
            return Err(StdinError::Refused(
                "it starts with 8 NUL bytes, which none of memplan's inputs does (CSV and JSON \
                 are text, ONNX and TFLite models start otherwise); check what is piped in"
                    .into(),
            ));
        }
    }
    if bytes.len() as u64 > cap {
        return Err(StdinError::TooLarge);
    }
    Ok(bytes)
}

/// The largest text input read by default (CSV, graph JSON, plan JSON): 1 GiB, about ten
/// times a 10^7-buffer minimalloc CSV. A plan JSON of 10^7 buffers with its tensors is
/// about 3 GB: [`set_max_text_bytes`] raises the cap (the CLI's `--max-input-bytes`).
pub const MAX_TEXT_BYTES: u64 = 1 << 30;

static TEXT_CAP: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(MAX_TEXT_BYTES);

/// The cap [`read_text`] applies now: [`MAX_TEXT_BYTES`] unless [`set_max_text_bytes`]
/// changed it.
pub fn max_text_bytes() -> u64 {
    TEXT_CAP.load(std::sync::atomic::Ordering::Relaxed)
}

/// Sets the cap of [`read_text`] (and of standard input, when larger than
/// [`MAX_STDIN_BYTES`]) for the rest of the process: the inputs a user knows to be large.
pub fn set_max_text_bytes(limit: u64) {
    TEXT_CAP.store(limit, std::sync::atomic::Ordering::Relaxed);
}

/// Why a file could not be read.
#[derive(Debug, thiserror::Error)]
pub enum FileError {
    /// The operating system refused.
    #[error("cannot read '{}': {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// More bytes than the reader accepts.
    #[error("'{}' is larger than {limit} bytes, the most memplan reads from one input; split the input or check that this is the file you meant", path.display())]
    TooLarge { path: PathBuf, limit: u64 },
    /// The format's reader refused the input while reading it.
    #[error("'{}': {message}", path.display())]
    Refused { path: PathBuf, message: String },
    /// A text input holds a NUL byte or is not UTF-8.
    #[error("'{}' is not UTF-8 text ({what} at byte {offset}); memplan reads minimalloc CSV, graph JSON, plan JSON and trace CSV as text", path.display())]
    NotText {
        path: PathBuf,
        what: &'static str,
        offset: u64,
    },
}

/// Reads at most `limit` bytes of `path`; a longer input is an error, found after reading
/// `limit + 1` bytes, never more. `check` sees each chunk as it arrives (with its offset)
/// and may stop the reading with an error.
fn read_with(
    path: &Path,
    limit: u64,
    mut check: impl FnMut(&[u8], u64) -> Result<(), FileError>,
) -> Result<Vec<u8>, FileError> {
    let io = |source| FileError::Io {
        path: path.to_path_buf(),
        source,
    };
    if is_stdin(path) {
        let all = stdin_bytes()?;
        if all.len() as u64 > limit {
            return Err(FileError::TooLarge {
                path: path.to_path_buf(),
                limit,
            });
        }
        for (k, chunk) in all.chunks(1 << 16).enumerate() {
            check(chunk, (k as u64) << 16)?;
        }
        return Ok(all.to_vec());
    }
    let file = std::fs::File::open(path).map_err(io)?;
    let metadata = file.metadata().ok();
    // A regular file says its length: one over the cap (a sparse 10 GB file costs no
    // disk) is refused before a byte is read.
    if metadata
        .as_ref()
        .is_some_and(|m| m.is_file() && m.len() > limit)
    {
        return Err(FileError::TooLarge {
            path: path.to_path_buf(),
            limit,
        });
    }
    let hint = metadata.map_or(0, |m| m.len()).min(limit);
    let mut bytes = Vec::with_capacity(hint as usize);
    let mut reader = file.take(limit.saturating_add(1));
    let mut chunk = vec![0u8; 1 << 16];
    loop {
        let n = match reader.read(&mut chunk) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(io(e)),
        };
        check(&chunk[..n], bytes.len() as u64)?;
        bytes.extend_from_slice(&chunk[..n]);
        if bytes.len() as u64 > limit {
            return Err(FileError::TooLarge {
                path: path.to_path_buf(),
                limit,
            });
        }
    }
    Ok(bytes)
}

/// Reads a binary input of at most `limit` bytes.
pub fn read_bytes(path: &Path, limit: u64) -> Result<Vec<u8>, FileError> {
    read_with(path, limit, |_, _| Ok(()))
}

/// [`read_bytes`] that also shows each chunk, with its offset, to `check`, which may stop
/// the reading with a message (the reader of a format refuses what cannot be its start
/// before the whole of a huge input is read: `/dev/zero` as a model).
pub fn read_bytes_checked(
    path: &Path,
    limit: u64,
    mut check: impl FnMut(&[u8], u64) -> Result<(), String>,
) -> Result<Vec<u8>, FileError> {
    read_with(path, limit, |chunk, offset| {
        check(chunk, offset).map_err(|message| FileError::Refused {
            path: path.to_path_buf(),
            message,
        })
    })
}

/// Reads a text input of at most [`max_text_bytes`] ([`MAX_TEXT_BYTES`] by default):
/// UTF-8 without NUL bytes. A NUL stops the reading at once (`/dev/zero` fails in the
/// first 64 KiB).
pub fn read_text(path: &Path) -> Result<String, FileError> {
    read_text_capped(path, max_text_bytes())
}

/// [`read_text`] with another cap.
pub fn read_text_capped(path: &Path, limit: u64) -> Result<String, FileError> {
    let bytes = read_with(path, limit, |chunk, offset| {
        match chunk.iter().position(|&b| b == 0) {
            Some(at) => Err(FileError::NotText {
                path: path.to_path_buf(),
                what: "a NUL byte",
                offset: offset + at as u64,
            }),
            None => Ok(()),
        }
    })?;
    String::from_utf8(bytes).map_err(|e| FileError::NotText {
        path: path.to_path_buf(),
        what: "an invalid UTF-8 sequence",
        offset: e.utf8_error().valid_up_to() as u64,
    })
}

/// How many times [`max_text_bytes`] a streamed JSON input may be: a plan JSON is read
/// entry by entry, so its size costs time, not memory (memplan's own plan of 10^7 buffers
/// is about 3 GB of text).
pub const STREAMED_JSON_FACTOR: u64 = 16;

/// A JSON input streamed from a file (or standard input) with two bounds: at most `limit`
/// bytes in all, and no single string or literal longer than `token_limit` bytes (the
/// parser keeps one token in memory). Either is an I/O error naming the bound, which the
/// JSON reader reports with its position.
pub struct JsonCap<R> {
    inner: R,
    read: u64,
    limit: u64,
    token: u64,
    token_limit: u64,
    in_string: bool,
    escaped: bool,
}

impl<R: Read> JsonCap<R> {
    pub fn new(inner: R, limit: u64, token_limit: u64) -> Self {
        JsonCap {
            inner,
            read: 0,
            limit,
            token: 0,
            token_limit,
            in_string: false,
            escaped: false,
        }
    }

    fn scan(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        for &b in bytes {
            if self.in_string {
                if self.escaped {
                    self.escaped = false;
                } else if b == b'\\' {
                    self.escaped = true;
                } else if b == b'"' {
                    self.in_string = false;
                    self.token = 0;
                    continue;
                }
                self.token += 1;
            } else {
                match b {
                    b'"' => {
                        self.in_string = true;
                        self.token = 0;
                    }
                    b'{' | b'}' | b'[' | b']' | b',' | b':' | b' ' | b'\n' | b'\r' | b'\t' => {
                        self.token = 0
                    }
                    _ => self.token += 1,
                }
            }
            if self.token > self.token_limit {
                return Err(std::io::Error::other(format!(
                    "a single JSON value longer than {} bytes ending near byte {}; memplan keeps one value in memory at a time and reads larger ones with --max-input-bytes",
                    self.token_limit, self.read
                )));
            }
        }
        Ok(())
    }
}

impl<R: Read> Read for JsonCap<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.scan(&buf[..n])?;
        self.read += n as u64;
        if self.read > self.limit {
            return Err(std::io::Error::other(format!(
                "the input is larger than {} bytes, the most memplan streams from one JSON input; read it with a larger --max-input-bytes",
                self.limit
            )));
        }
        Ok(n)
    }
}

/// Opens `path` (or standard input for [`STDIN`]) as a streamed JSON input of at most
/// [`STREAMED_JSON_FACTOR`] × [`max_text_bytes`], no value longer than [`max_text_bytes`].
pub fn open_json(path: &Path) -> Result<JsonCap<Box<dyn Read>>, FileError> {
    let reader: Box<dyn Read> = if is_stdin(path) {
        Box::new(stdin_bytes()?)
    } else {
        let file = std::fs::File::open(path).map_err(|source| FileError::Io {
            path: path.to_path_buf(),
            source,
        })?;
        Box::new(file)
    };
    let cap = max_text_bytes();
    Ok(JsonCap::new(
        reader,
        cap.saturating_mul(STREAMED_JSON_FACTOR),
        cap,
    ))
}

/// Whether the input at `path` starts (after a byte-order mark and white space) with `{`
/// or `[`: a JSON document rather than CSV. Reads only the first 64 KiB.
pub fn starts_as_json(path: &Path) -> Result<bool, FileError> {
    const HEAD: usize = 1 << 16;
    let mut head = Vec::with_capacity(HEAD);
    if is_stdin(path) {
        let all = stdin_bytes()?;
        head.extend_from_slice(&all[..all.len().min(HEAD)]);
    } else {
        let io = |source| FileError::Io {
            path: path.to_path_buf(),
            source,
        };
        let file = std::fs::File::open(path).map_err(io)?;
        file.take(HEAD as u64).read_to_end(&mut head).map_err(io)?;
    }
    // The text readers' own test on the first bytes (a character cut at the end cannot be
    // the first one after the byte-order mark and white space).
    Ok(super::is_json(&String::from_utf8_lossy(&head)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dev_zero_fails_at_the_first_nul_and_caps_hold() {
        let zero = Path::new("/dev/zero");
        if zero.exists() {
            let e = read_text(zero).unwrap_err();
            assert!(e.to_string().contains("NUL byte at byte 0"), "{e}");
            let e = read_bytes(zero, 1 << 20).unwrap_err();
            assert!(matches!(e, FileError::TooLarge { limit, .. } if limit == 1 << 20));
        }
        let dir = std::env::temp_dir().join(format!("memplan-file-{}", std::process::id()));
        std::fs::write(&dir, "a,b\n1,2\n").unwrap();
        assert_eq!(read_text(&dir).unwrap(), "a,b\n1,2\n");
        assert!(matches!(
            read_text_capped(&dir, 4).unwrap_err(),
            FileError::TooLarge { .. }
        ));
        assert_eq!(read_text_capped(&dir, 8).unwrap().len(), 8);
        std::fs::write(&dir, b"ok\xff").unwrap();
        let e = read_text(&dir).unwrap_err().to_string();
        assert!(e.contains("invalid UTF-8 sequence at byte 2"), "{e}");
        std::fs::remove_file(&dir).unwrap();
        let e = read_text(&dir).unwrap_err().to_string();
        assert!(e.contains("cannot read"), "{e}");
    }

    /// A regular file over the cap is refused by its length, before a byte is read: a
    /// sparse file (all NUL bytes) failed on its first NUL, or was read up to the cap.
    #[test]
    fn a_file_over_the_cap_is_refused_by_its_length() {
        let path = std::env::temp_dir().join(format!("memplan-sparse-{}", std::process::id()));
        std::fs::File::create(&path)
            .unwrap()
            .set_len((1 << 20) + 1)
            .unwrap();
        let e = read_text_capped(&path, 1 << 20).unwrap_err();
        assert!(
            matches!(e, FileError::TooLarge { limit, .. } if limit == 1 << 20),
            "{e}"
        );
        let e = read_bytes_checked(&path, 1 << 20, |_, _| Err("read".into())).unwrap_err();
        assert!(matches!(e, FileError::TooLarge { .. }), "{e}");
        std::fs::remove_file(&path).unwrap();
    }
}
