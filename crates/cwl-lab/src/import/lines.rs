//! Reads a file line by line as bytes, keeping 1-based line numbers.

use std::fs::File;
use std::io::{self, BufRead, BufReader};
use std::path::Path;

use super::ImportError;

/// A line reader that holds one line at a time.
pub(crate) struct LineReader {
    inner: BufReader<File>,
    buf: Vec<u8>,
    line: u64,
    consumed: u64,
    line_start: u64,
}

impl LineReader {
    /// Opens `path`; the error names the file.
    pub(crate) fn open(path: &Path) -> Result<Self, ImportError> {
        let file = File::open(path).map_err(|source| ImportError::Io {
            path: path.to_path_buf(),
            source,
        })?;
        Ok(LineReader {
            inner: BufReader::with_capacity(64 * 1024, file),
            buf: Vec::new(),
            line: 0,
            consumed: 0,
            line_start: 0,
        })
    }

    /// Whether the file has no bytes at all (only meaningful before reading).
    pub(crate) fn is_empty(&mut self) -> bool {
        self.inner.fill_buf().map(|b| b.is_empty()).unwrap_or(false)
    }

    /// The number of the last line returned (0 before the first).
    pub(crate) fn line_number(&self) -> u64 {
        self.line
    }

    /// Byte offset in the file where the last returned line's text starts.
    pub(crate) fn line_offset(&self) -> u64 {
        self.line_start
    }

    /// The next line without its line ending (and without a UTF-8 byte order
    /// mark on line 1), or `None` at end of file.
    pub(crate) fn next_line(&mut self) -> io::Result<Option<(u64, &[u8])>> {
        self.buf.clear();
        let read = self.inner.read_until(b'\n', &mut self.buf)?;
        if read == 0 {
            return Ok(None);
        }
        self.line_start = self.consumed;
        self.consumed += read as u64;
        self.line += 1;
        let mut line: &[u8] = &self.buf;
        if let Some(rest) = line.strip_suffix(b"\n") {
            line = rest;
        }
        if let Some(rest) = line.strip_suffix(b"\r") {
            line = rest;
        }
        if self.line == 1
            && let Some(rest) = line.strip_prefix(b"\xEF\xBB\xBF")
        {
            line = rest;
            self.line_start += 3;
        }
        Ok(Some((self.line, line)))
    }
}
