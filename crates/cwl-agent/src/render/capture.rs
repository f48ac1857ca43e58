//! Capturing what a [`Renderer`] writes, for tests (feature `testing`).

use std::io::Write;
use std::sync::{Arc, Mutex, MutexGuard};

use super::{RenderOptions, Renderer};

/// A writer that keeps everything written to it. Clones share the bytes,
/// so a test hands one clone to a renderer and reads the other.
#[derive(Debug, Clone, Default)]
pub struct Capture(Arc<Mutex<Vec<u8>>>);

impl Capture {
    /// Everything written so far, as text.
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.bytes()).into_owned()
    }

    fn bytes(&self) -> MutexGuard<'_, Vec<u8>> {
        self.0
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

impl Write for Capture {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.bytes().extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// A renderer with `options` whose stdout and stderr are captured: the
/// renderer, then what it writes to stdout, then what it writes to stderr.
pub fn renderer(options: RenderOptions) -> (Renderer, Capture, Capture) {
    let (out, err) = (Capture::default(), Capture::default());
    let renderer = Renderer::new(Box::new(out.clone()), Box::new(err.clone()), options);
    (renderer, out, err)
}
