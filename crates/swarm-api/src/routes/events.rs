//! `GET /api/events`: the service's change notifications as server-sent events, for
//! live views (the dashboard). Each event names what changed; the client re-reads it
//! through the ordinary endpoints, so the stream carries no data a client could not
//! read anyway, and nothing is lost by a client that falls behind: it is told to
//! `resync` (re-read everything), never cut off.

use std::{convert::Infallible, time::Duration};

use axum::{
    Extension,
    extract::{Query, State},
    http::HeaderMap,
    response::{
        IntoResponse, Response,
        sse::{Event, KeepAlive, Sse},
    },
};
use futures_util::{
    future::BoxFuture,
    stream::{self, Stream, StreamExt},
};
use serde::Serialize;
use swarm_service::Change;
use tokio::sync::broadcast::{Receiver, error::RecvError};
use tokio_util::sync::CancellationToken;
use utoipa::ToSchema;
use utoipa_axum::{router::OpenApiRouter, routes};

pub use crate::routes::reference_events::{EventsQuery, EventsQueryResponse};
use crate::{
    AppState, Json,
    error::{ApiError, ErrorResponses},
    extract::CallerHeader,
    limits::Held,
    routes::reference_events::events_query,
    routes::tokens::{PresentedToken, until_revoked},
};

/// Comments this often keep proxies and the browser from closing an idle stream, and
/// let the server notice a client that went away.
const KEEP_ALIVE: Duration = Duration::from_secs(15);

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(events_stream))
}

/// The `data` of a `change` event.
#[derive(Debug, Serialize, ToSchema)]
#[serde(tag = "kind", rename_all = "camelCase", rename_all_fields = "camelCase")]
pub enum ChangeEvent {
    /// A task was created or changed (status, progress, text ...).
    Task { task_id: String },
    /// An agent registered or changed (status, heartbeat, name, profile, mentions).
    Agent { agent_id: String },
    /// A message in this lead's inbox arrived or changed status.
    Inbox { agent_id: String },
    /// A runner sent session log lines or a cost for this task.
    SessionOutput { task_id: String },
    /// A message was posted in a channel.
    ChannelMessage { channel_id: String, message_id: String },
    /// Mail was sent, claimed, delivered or answered.
    Mail { mail_id: String },
    /// An epic was created, changed or deleted, or a task joined or left it.
    Epic { epic_id: String },
    /// A registered service was registered, changed status or unregistered.
    Service { service_id: String },
    /// A daily budget was set or removed; `scopeId` is `""` for the global one.
    Budget { scope: String, scope_id: String },
    /// Another process on the same database changed something; re-read what is shown.
    External,
}

impl From<Change> for ChangeEvent {
    fn from(change: Change) -> Self {
        match change {
            Change::Task { task_id } => ChangeEvent::Task { task_id: task_id.to_string() },
            Change::Agent { agent_id } => ChangeEvent::Agent { agent_id: agent_id.to_string() },
            Change::Inbox { agent_id } => ChangeEvent::Inbox { agent_id: agent_id.to_string() },
            Change::SessionOutput { task_id } => ChangeEvent::SessionOutput { task_id: task_id.to_string() },
            Change::ChannelMessage { channel_id, message_id } => ChangeEvent::ChannelMessage {
                channel_id: channel_id.to_string(),
                message_id: message_id.to_string(),
            },
            Change::Mail { mail_id } => ChangeEvent::Mail { mail_id: mail_id.to_string() },
            Change::Epic { epic_id } => ChangeEvent::Epic { epic_id: epic_id.to_string() },
            Change::Service { service_id } => ChangeEvent::Service { service_id: service_id.to_string() },
            Change::Budget { scope, scope_id } => {
                ChangeEvent::Budget { scope: scope.as_str().into(), scope_id }
            }
            Change::External => ChangeEvent::External,
        }
    }
}

/// Live changes, as `text/event-stream`. First a `ready` event (the stream is
/// subscribed: re-read now, and every later change will be announced), then one
/// `change` event per committed change (`data`: a JSON [`ChangeEvent`]), `resync` when
/// this client fell behind and missed some (re-read everything), and a comment every
/// 15 s. The stream never ends on its own; it ends when the hub shuts down, or when the
/// agent token it was opened with is revoked.
///
/// With any of the query parameters, or `Accept: application/json` (and not
/// `text/event-stream`), it answers the reference's event query instead: `{events: [...]}`
/// from the reference's event log (`POST /api/events/batch`), newest first.
#[utoipa::path(get, path = "/api/events", tag = "system", params(EventsQuery),
    responses(
        (status = 200, description = "An endless stream of server-sent events: `ready`, `change` (data: ChangeEvent), `resync`; or, for a query, `{events: [...]}`",
            content((ChangeEvent = "text/event-stream"), (EventsQueryResponse = "application/json"))),
        ErrorResponses,
    ))]
async fn events_stream(
    State(state): State<AppState>,
    CallerHeader(caller): CallerHeader,
    token: Option<Extension<PresentedToken>>,
    headers: HeaderMap,
    Query(query): Query<EventsQuery>,
) -> Result<Response, ApiError> {
    if query.is_query(&headers) {
        return Ok(Json(events_query(&state, query).await?).into_response());
    }
    let slot = state.limits.take(Held::Stream, caller)?;
    let changes = state.service.subscribe();
    // A stream opened with an agent's token ends when that token is revoked.
    let revoked: BoxFuture<'static, ()> = match token {
        Some(Extension(token)) => Box::pin(until_revoked(state.clone(), token)),
        None => Box::pin(std::future::pending()),
    };
    let events = change_events(changes, state.shutdown.clone()).take_until(revoked).map(move |event| {
        // The slot is given back when the stream is dropped (the client went away).
        let _held = &slot;
        event
    });
    Ok(Sse::new(events).keep_alive(KeepAlive::new().interval(KEEP_ALIVE)).into_response())
}

enum Phase {
    Greeting,
    Streaming,
}

fn change_events(
    changes: Receiver<Change>,
    shutdown: CancellationToken,
) -> impl Stream<Item = Result<Event, Infallible>> {
    stream::unfold((Phase::Greeting, changes, shutdown), |(phase, mut changes, shutdown)| async move {
        if let Phase::Greeting = phase {
            let ready = Event::default().event("ready").data("{}");
            return Some((Ok(ready), (Phase::Streaming, changes, shutdown)));
        }
        let received = tokio::select! {
            () = shutdown.cancelled() => return None,
            received = changes.recv() => received,
        };
        let event = match received {
            Ok(change) => {
                let data = serde_json::to_string(&ChangeEvent::from(change)).unwrap_or_else(|_| "{}".into());
                Event::default().event("change").data(data)
            }
            Err(RecvError::Lagged(missed)) => {
                Event::default().event("resync").data(format!("{{\"missed\":{missed}}}"))
            }
            // The service is gone: the hub is stopping.
            Err(RecvError::Closed) => return None,
        };
        Some((Ok(event), (Phase::Streaming, changes, shutdown)))
    })
}
