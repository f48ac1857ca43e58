//! The APIs whose history the proxy runs through the engine.

use hyper::http::Method;

use crate::wire::Wire;
use crate::wire::anthropic::Anthropic;
use crate::wire::openai_chat::OpenAiChat;
use crate::wire::openai_responses::OpenAiResponses;

/// An API whose history the proxy runs through the engine.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Api {
    /// Anthropic Messages.
    Anthropic,
    /// OpenAI Chat Completions.
    OpenAiChat,
    /// OpenAI Responses.
    OpenAiResponses,
}

impl Api {
    /// The API of a request, if the proxy runs it through the engine.
    pub fn of(method: &Method, path: &str) -> Option<Api> {
        match (method, path) {
            (&Method::POST, "/v1/messages") => Some(Api::Anthropic),
            (&Method::POST, "/v1/chat/completions") => Some(Api::OpenAiChat),
            (&Method::POST, "/v1/responses") => Some(Api::OpenAiResponses),
            _ => None,
        }
    }

    /// Its message format.
    pub fn wire(self) -> &'static dyn Wire {
        match self {
            Api::Anthropic => &Anthropic,
            Api::OpenAiChat => &OpenAiChat,
            Api::OpenAiResponses => &OpenAiResponses,
        }
    }

    /// Its name in events and warnings.
    pub fn name(self) -> &'static str {
        match self {
            Api::Anthropic => "anthropic",
            Api::OpenAiChat => "openai-chat",
            Api::OpenAiResponses => "openai-responses",
        }
    }
}
