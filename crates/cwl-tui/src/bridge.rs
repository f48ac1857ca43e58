//! The agent's side of the UI: an [`Observer`] and an [`Approver`] that
//! send to the UI's channel, so the turn never waits for a draw.

use futures_util::future::BoxFuture;
use tokio::sync::{mpsc, oneshot};

use super::app::FromAgent;
use cwl_agent::agent::{ApprovalRequest, Approver, Decision, Event, InvalidAnswer, Observer};

/// Sends every event to the UI.
pub struct Forward(pub mpsc::UnboundedSender<FromAgent>);

impl Observer for Forward {
    fn event(&mut self, event: &Event) {
        let _ = self.0.send(FromAgent::Event(event.clone()));
    }

    fn closed(&self) -> bool {
        self.0.is_closed()
    }
}

/// Asks in the UI: the question shows above the input, y/n/a answers.
pub struct UiApprover(pub mpsc::UnboundedSender<FromAgent>);

impl Approver for UiApprover {
    fn ask<'a>(
        &'a mut self,
        request: &'a ApprovalRequest,
    ) -> BoxFuture<'a, Result<Decision, InvalidAnswer>> {
        let (tx, rx) = oneshot::channel();
        let sent = self.0.send(FromAgent::Ask(request.clone(), tx)).is_ok();
        Box::pin(async move {
            let gone = Decision::Deny {
                reason: Some("no answer came: the UI closed".into()),
            };
            if !sent {
                return Ok(gone);
            }
            Ok(rx.await.unwrap_or(gone))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_answer_comes_back_and_a_closed_ui_denies() {
        let (tx, mut rx) = mpsc::unbounded_channel();
        let mut approver = UiApprover(tx);
        let request = ApprovalRequest {
            id: "c1".into(),
            name: "write".into(),
            arguments: "{}".into(),
            mutating: true,
        };
        let asked = tokio::spawn(async move {
            let decision = approver.ask(&request).await.unwrap();
            (approver, request, decision)
        });
        match rx.recv().await {
            Some(FromAgent::Ask(request, answer)) => {
                assert_eq!(request.name, "write");
                answer.send(Decision::Approve).unwrap();
            }
            other => panic!("{other:?}"),
        }
        let (mut approver, request, decision) = asked.await.unwrap();
        assert_eq!(decision, Decision::Approve);
        drop(rx);
        assert!(matches!(
            approver.ask(&request).await.unwrap(),
            Decision::Deny { reason: Some(r) } if r.contains("UI closed")
        ));
    }
}
