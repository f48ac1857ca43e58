//! Conversations in memory, and the calibration of their token counts
//! from what the provider reports in each response.

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use http_body_util::BodyExt;
use hyper::http::Response;

use crate::engine::{Calibrated, Engine};
use crate::event::warn;
use crate::store::Log;
use crate::upstream::ProxyBody;
use crate::usage::Meter;

/// One conversation in memory: its engine, its session file, its name in
/// events, and what its side calls may still cost.
pub(crate) struct Conversation {
    pub(crate) engine: Engine,
    pub(crate) log: Log,
    pub(crate) label: String,
    pub(crate) side_gate: cwl_provider::side::SideGate,
}

/// Where a conversation lives, behind its own lock (requests of different
/// conversations never wait for each other); empty until its first
/// request fills it, or after it was dropped.
#[derive(Default)]
pub(crate) struct Slot(pub(crate) Mutex<Option<Conversation>>);

/// Locks, going on with the data of a thread that panicked holding it.
pub(crate) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// A request sent upstream whose response will report the prompt's size.
pub(crate) struct Pending {
    pub(crate) slot: Arc<Slot>,
    /// What the engine counted for it, before calibration.
    pub(crate) local: usize,
    /// The model's context window, when the model is known.
    pub(crate) window: Option<usize>,
}

/// Calibrates the conversation's count when the relayed body ends (or the
/// client leaves), with what the provider reported.
struct Calibration {
    meter: Option<Meter>,
    pending: Pending,
}

impl Drop for Calibration {
    fn drop(&mut self) {
        let Some(reported) = self.meter.take().and_then(Meter::finish) else {
            return;
        };
        let reported = usize::try_from(reported).unwrap_or(usize::MAX);
        let (local, window) = (self.pending.local, self.pending.window);
        let slot = Arc::clone(&self.pending.slot);
        let apply = move || {
            let mut guard = lock(&slot.0);
            let Some(conversation) = guard.as_mut() else {
                return;
            };
            match conversation.engine.calibrate(local, reported, window) {
                Calibrated::Changed => conversation.log.calibrate(local, reported),
                Calibrated::Unchanged => {}
                Calibrated::Ignored { why, first: true } => {
                    let why = format!("{why} (said once a conversation)");
                    warn(&format!("conversation {}: {why}", conversation.label));
                    conversation.log.note(&why);
                }
                Calibrated::Ignored { first: false, .. } => {}
            }
        };
        // A conversation busy with its next request (side calls may take
        // minutes) is waited for on a blocking thread, not a runtime one.
        let busy = matches!(
            self.pending.slot.0.try_lock(),
            Err(std::sync::TryLockError::WouldBlock)
        );
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) if busy => drop(runtime.spawn_blocking(apply)),
            _ => apply(),
        }
    }
}

/// The response with its body read for the reported prompt size as it
/// passes, untouched.
pub(crate) fn metered(response: Response<ProxyBody>, pending: Pending) -> Response<ProxyBody> {
    let stream = response
        .headers()
        .get(hyper::http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|t| t.starts_with("text/event-stream"));
    let mut calibration = Calibration {
        meter: Some(Meter::new(stream)),
        pending,
    };
    response.map(|body| {
        body.map_frame(move |frame| {
            if let (Some(data), Some(meter)) = (frame.data_ref(), calibration.meter.as_mut()) {
                meter.feed(data);
            }
            frame
        })
        .boxed()
    })
}
