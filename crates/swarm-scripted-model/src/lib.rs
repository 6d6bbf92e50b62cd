//! A scripted stand-in for the model behind Claude Code, Codex and the Gemini CLI.
//!
//! swarm's runner starts real agent CLIs, and the CLIs behave in ways no stand-in agent
//! does (flags refused as root, session files, MCP tool naming, hooks, retries). To test the
//! product with the programs users run, without a network or an API key, only the model is
//! replaced: the CLI, its MCP client, its hooks and its session files are the real ones.
//!
//! [`ScriptedModel`] serves, on a loopback port,
//! - the Anthropic Messages API as Claude Code uses it (`POST /v1/messages`, streaming and
//!   not, `POST /v1/messages/count_tokens`; point `ANTHROPIC_BASE_URL` at
//!   [`ScriptedModel::anthropic_base_url`]);
//! - the OpenAI Responses API as Codex uses it (`POST /v1/responses`, `GET /v1/models`; point
//!   a Codex model provider's `base_url` at [`ScriptedModel::openai_base_url`]);
//! - the Gemini API as the Gemini CLI uses it (`POST /v1beta/models/{model}:streamGenerateContent`,
//!   `:generateContent`, `:countTokens`; point `GOOGLE_GEMINI_BASE_URL` at
//!   [`ScriptedModel::gemini_base_url`]).
//!
//! Every other request is recorded and answered 404 (Claude Code's start-up `HEAD /` gets 200).
//!
//! It plays a [`Script`] deterministically and statelessly: the step answered is the number of
//! steps the resent conversation already shows (see [`Script`]).
//!
//! ```no_run
//! # async fn demo() {
//! use swarm_scripted_model::{Script, ScriptedModel};
//! use serde_json::json;
//!
//! let model = ScriptedModel::start(
//!     Script::new()
//!         .call_tool("store-progress", |c| json!({"taskId": c.prompt_uuid(), "status": "completed"}))
//!         .shell("echo done > out.txt")
//!         .reply("All done."),
//! )
//! .await;
//! // ANTHROPIC_BASE_URL = model.anthropic_base_url(); Codex base_url = model.openai_base_url()
//! assert!(model.conversations().iter().all(|c| !c.contains("secret")));
//! # }
//! ```

mod anthropic;
pub mod clis;
mod conversation;
mod gemini;
mod openai;
mod script;
mod tool_search;
mod weight;

use std::net::{Ipv4Addr, SocketAddr};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, Method, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use serde_json::Value;
use tokio::net::TcpListener;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

pub use conversation::{Api, Conversation, OfferedTool, find_uuid, word_after};
pub use script::{Failure, Script, Step, Usage};
pub use tool_search::CLAUDE_TOOL_SEARCH;
pub use weight::RequestWeight;

/// The model name the server reports where it names one (`GET /v1/models`). Responses echo the
/// model the CLI asked for.
pub const MODEL_NAME: &str = "scripted-model";

/// One HTTP request the server received.
#[derive(Clone, Debug)]
pub struct RecordedRequest {
    pub method: String,
    /// Path and query, e.g. `/v1/messages?beta=true`.
    pub path: String,
    /// Header names in lower case, in arrival order.
    pub headers: Vec<(String, String)>,
    pub body: String,
}

impl RecordedRequest {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(key, _)| key.eq_ignore_ascii_case(name)).map(|(_, value)| value.as_str())
    }

    /// The conversation, when this was a model request (`POST /v1/messages` or `/v1/responses`).
    pub fn conversation(&self) -> Option<Conversation> {
        let path = self.path.split('?').next().unwrap_or("");
        let api = match (self.method.as_str(), path) {
            ("POST", "/v1/messages") => Api::Anthropic,
            ("POST", "/v1/responses") => Api::OpenAi,
            ("POST", _) => match gemini::method(path) {
                Some((model, "streamGenerateContent" | "generateContent")) => {
                    let mut body: Value = serde_json::from_str(&self.body).ok()?;
                    if gemini::is_side_question(&body) {
                        return None;
                    }
                    body["model"] = Value::String(model.to_owned());
                    return Some(Conversation::new(Api::Gemini, body));
                }
                _ => return None,
            },
            _ => return None,
        };
        Some(Conversation::new(api, serde_json::from_str(&self.body).ok()?))
    }
}

struct Shared {
    script: Script,
    failure: Mutex<Option<Failure>>,
    requests: Mutex<Vec<RecordedRequest>>,
    responses: AtomicUsize,
}

/// A running scripted model; see the crate documentation. Dropping it stops the server.
pub struct ScriptedModel {
    address: SocketAddr,
    shared: Arc<Shared>,
    shutdown: Option<oneshot::Sender<()>>,
    server: Option<JoinHandle<()>>,
}

impl ScriptedModel {
    /// Serves `script` on a free loopback port.
    ///
    /// # Panics
    /// When no loopback port can be bound (nothing a test could go on without).
    pub async fn start(script: Script) -> ScriptedModel {
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).await.expect("bind a loopback port");
        let address = listener.local_addr().expect("local address of a bound listener");
        let shared = Arc::new(Shared {
            script,
            failure: Mutex::new(None),
            requests: Mutex::new(Vec::new()),
            responses: AtomicUsize::new(0),
        });
        let app = Router::new().fallback(handle).with_state(shared.clone());
        let (shutdown, stopped) = oneshot::channel::<()>();
        let server = tokio::spawn(async move {
            let _ = axum::serve(listener, app)
                .with_graceful_shutdown(async {
                    let _ = stopped.await;
                })
                .await;
        });
        ScriptedModel { address, shared, shutdown: Some(shutdown), server: Some(server) }
    }

    /// `http://127.0.0.1:<port>`, for `ANTHROPIC_BASE_URL`.
    pub fn anthropic_base_url(&self) -> String {
        format!("http://{}", self.address)
    }

    /// `http://127.0.0.1:<port>`, for the Gemini CLI's `GOOGLE_GEMINI_BASE_URL`.
    pub fn gemini_base_url(&self) -> String {
        format!("http://{}", self.address)
    }

    /// `http://127.0.0.1:<port>/v1`, for a Codex model provider's `base_url`.
    pub fn openai_base_url(&self) -> String {
        format!("http://{}/v1", self.address)
    }

    pub fn port(&self) -> u16 {
        self.address.port()
    }

    /// Every request received so far, in order.
    pub fn requests(&self) -> Vec<RecordedRequest> {
        self.shared.requests.lock().unwrap().clone()
    }

    /// The conversations of the model requests received so far, in order: what the CLI sent
    /// (prompt, system prompt, tools offered, tool results).
    pub fn conversations(&self) -> Vec<Conversation> {
        self.requests().iter().filter_map(RecordedRequest::conversation).collect()
    }

    /// From now on answer every request with this failure (`None`: play the script again).
    pub fn set_failure(&self, failure: Option<Failure>) {
        *self.shared.failure.lock().unwrap() = failure;
    }

    /// Stops serving and closes the port: the model is down.
    pub async fn stop(mut self) {
        self.shut_down().await;
    }

    async fn shut_down(&mut self) {
        if let Some(shutdown) = self.shutdown.take() {
            let _ = shutdown.send(());
        }
        if let Some(mut server) = self.server.take() {
            // Graceful shutdown closes idle keep-alive connections; one still streaming a
            // response gets a second, then the task is aborted.
            if tokio::time::timeout(Duration::from_secs(1), &mut server).await.is_err() {
                server.abort();
            }
        }
    }

    /// A loopback base URL where nothing listens (a port just bound and released): a model
    /// that is down from the start. Add `/v1` for Codex.
    pub async fn closed_base_url() -> String {
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).await.expect("bind a loopback port");
        let address = listener.local_addr().expect("local address of a bound listener");
        drop(listener);
        format!("http://{address}")
    }
}

impl Drop for ScriptedModel {
    fn drop(&mut self) {
        if let Some(shutdown) = self.shutdown.take() {
            let _ = shutdown.send(());
        }
        if let Some(server) = self.server.take() {
            server.abort();
        }
    }
}

async fn handle(
    State(shared): State<Arc<Shared>>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let request = RecordedRequest {
        method: method.to_string(),
        path: uri.path_and_query().map(|path| path.to_string()).unwrap_or_else(|| uri.path().to_owned()),
        headers: headers
            .iter()
            .map(|(name, value)| {
                (name.as_str().to_owned(), String::from_utf8_lossy(value.as_bytes()).into_owned())
            })
            .collect(),
        body: String::from_utf8_lossy(&body).into_owned(),
    };
    shared.requests.lock().unwrap().push(request.clone());

    let path = uri.path();
    let openai = path.starts_with("/v1/responses") || path == "/v1/models";
    let gemini_call = gemini::method(path);
    let failure = *shared.failure.lock().unwrap();
    if failure == Some(Failure::Hang) && request.conversation().is_some() {
        // A model turn that never starts: the CLI waits on it in silence.
        std::future::pending::<()>().await;
    }
    let refusal = match failure {
        Some(Failure::Reply401) => Some(401),
        Some(Failure::Status(status)) => Some(status),
        // A hanging model answers the CLI's other requests.
        Some(Failure::Hang) | None => None,
    };
    if let Some(status) = refusal {
        let body = match (openai, gemini_call) {
            (_, Some(_)) => gemini::error(status),
            (true, None) => openai::error(status),
            (false, None) => anthropic::error(status),
        };
        return json_response(
            StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR),
            &body,
        );
    }

    match (&method, path) {
        (&Method::POST, "/v1/messages") | (&Method::POST, "/v1/responses") => {
            let Some(conversation) = request.conversation() else {
                let body = serde_json::json!({"error": {"message": "the body is not JSON"}});
                return json_response(StatusCode::BAD_REQUEST, &body);
            };
            let action = shared.script.decide(&conversation);
            let turn = shared.responses.fetch_add(1, Ordering::Relaxed);
            let stream = conversation.body["stream"].as_bool().unwrap_or(false);
            let usage = shared.script.usage;
            let (content_type, body) = match conversation.api {
                Api::Anthropic => anthropic::message(&action, conversation.model(), usage, turn, stream),
                Api::OpenAi => openai::response(&action, conversation.model(), usage, turn, stream),
                Api::Gemini => gemini::response(&action, conversation.model(), usage, stream),
            };
            ([(header::CONTENT_TYPE, content_type)], body).into_response()
        }
        (&Method::POST, "/v1/messages/count_tokens") => {
            json_response(StatusCode::OK, &anthropic::count_tokens(&body))
        }
        (&Method::GET, "/v1/models") => json_response(StatusCode::OK, &openai::models()),
        (&Method::POST, _) if gemini_call.is_some() => gemini_answer(&shared, &request),
        // Claude Code checks that the base URL answers before it starts.
        (&Method::HEAD, "/") | (&Method::GET, "/") => StatusCode::OK.into_response(),
        _ => {
            let body = if openai { openai::error(404) } else { anthropic::error(404) };
            json_response(StatusCode::NOT_FOUND, &body)
        }
    }
}

/// A Gemini request: a turn of the agent's conversation (the next script step), one of the
/// CLI's side questions, or a token count.
fn gemini_answer(shared: &Shared, request: &RecordedRequest) -> Response {
    let path = request.path.split('?').next().unwrap_or("");
    let Some((model, method)) = gemini::method(path) else {
        return json_response(StatusCode::NOT_FOUND, &gemini::error(404));
    };
    let usage = shared.script.usage;
    match method {
        "countTokens" => json_response(StatusCode::OK, &gemini::count_tokens(request.body.as_bytes())),
        "streamGenerateContent" | "generateContent" => {
            let stream = method == "streamGenerateContent";
            if let Some(conversation) = request.conversation() {
                let action = shared.script.decide(&conversation);
                shared.responses.fetch_add(1, Ordering::Relaxed);
                let (content_type, body) = gemini::response(&action, model, usage, stream);
                return ([(header::CONTENT_TYPE, content_type)], body).into_response();
            }
            match serde_json::from_str::<Value>(&request.body) {
                Ok(body) if gemini::is_side_question(&body) => {
                    json_response(StatusCode::OK, &gemini::side_answer(model, usage))
                }
                _ => json_response(StatusCode::BAD_REQUEST, &gemini::error(400)),
            }
        }
        _ => json_response(StatusCode::NOT_FOUND, &gemini::error(404)),
    }
}

fn json_response(status: StatusCode, body: &Value) -> Response {
    (status, [(header::CONTENT_TYPE, "application/json")], body.to_string()).into_response()
}
