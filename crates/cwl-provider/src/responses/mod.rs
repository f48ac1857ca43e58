//! The OpenAI Responses provider (`POST {base_url}/responses`), which
//! OpenAI's coding models (the gpt-5.x-codex family) are served through.
//!
//! Nothing is stored on the server (`store: false`): every request carries
//! the whole transcript, as Codex CLI sends it. Reasoning comes back
//! encrypted (`include: ["reasoning.encrypted_content"]`) and is kept in
//! [`cwl::Block::Reasoning`]: the summary as its text, the encrypted
//! content as its signature, and sent back as the model left it. Which
//! turns' reasoning the model still reads is the engine's business
//! ([`cwl::ReasoningScope`]): what it leaves out of the view is not sent.

mod request;
mod stream;

use std::future::Future;

use serde_json::Value;

use super::api::{Api, ApiConfig, Wire};
use super::endpoint::ApiProvider;
use super::openai::{BASE_VAR, DEFAULT_BASE_URL, KEY_VAR};
use super::sse::Events;
use super::{ProviderError, Request, Response, Sink};

/// The OpenAI Responses API, as an [`Api`]: requests go to
/// `{base_url}/responses` with the key as a bearer token (the variables of
/// [`super::openai`]), required only for api.openai.com.
#[derive(Debug, Clone, Copy)]
pub struct Responses;

impl Api for Responses {
    const NAME: &'static str = "responses";
    const DEBUG_PREFIX: &'static str = "Responses";
    const KEY_VAR: &'static str = KEY_VAR;
    const BASE_VAR: &'static str = BASE_VAR;
    const DEFAULT_BASE_URL: &'static str = DEFAULT_BASE_URL;
    const PATH: &'static str = "/responses";
    const PUBLIC_HOST: &'static str = "api.openai.com";
    const KEY_HEADER: (&'static str, &'static str) = ("authorization", "Bearer ");

    fn body(request: &Request<'_>, _public: bool) -> Value {
        request::body(request)
    }
}

impl Wire for Responses {
    fn read(
        events: &mut Events,
        sink: &mut Sink<'_>,
    ) -> impl Future<Output = Result<Response, ProviderError>> + Send {
        stream::read(events, sink)
    }
}

/// How to reach a server that speaks the Responses API.
pub type ResponsesConfig = ApiConfig<Responses>;

/// A provider speaking the OpenAI Responses API with streaming.
///
/// Function calls and custom tool calls (a custom call's free-form
/// `input` becomes the call's arguments) are read; calls go back as
/// `function_call` items and results as `function_call_output`, which is
/// all the server needs with nothing stored. The cache hint is unused:
/// OpenAI caches prompt prefixes by itself.
pub type ResponsesProvider = ApiProvider<Responses>;
