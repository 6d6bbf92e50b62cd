//! `GET /api/poll`: the runner's question "is there work for me?".

use std::time::Duration;

use axum::{
    Extension,
    extract::{Query, State},
};
use serde::{Deserialize, Serialize};
use swarm_domain::{
    id::{ChannelId, InboxMessageId, MailId, RunnerId, TaskId},
    poll::{PoolMode, Trigger},
};
use swarm_service::HeldItems;
use swarm_service::{POLL_WAIT_MAX, PollRequest, ReleaseRequest};
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::{router::OpenApiRouter, routes};

use crate::Json;
use crate::{
    AppState,
    error::{ApiError, ErrorResponses},
    extract::{AppJson, CallerHeader, RunnerHeader},
    routes::tokens::{PresentedToken, until_revoked},
};

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(poll_get)).routes(routes!(poll_release))
}

/// What a runner gives back; at least one list or `previousRunnerId`.
#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ReleaseBody {
    /// Inbox messages of a `slack_inbox_message` trigger whose run ended.
    #[serde(default)]
    #[schema(value_type = Vec<uuid::Uuid>)]
    inbox_message_ids: Vec<InboxMessageId>,
    /// Channels of an `unread_mentions` trigger (`claimedChannels`).
    #[serde(default)]
    #[schema(value_type = Vec<uuid::Uuid>)]
    channel_ids: Vec<ChannelId>,
    /// Mail of an `urgent_mail` trigger.
    #[serde(default)]
    #[schema(value_type = Vec<uuid::Uuid>)]
    mail_ids: Vec<MailId>,
    /// Awaited tasks of `task_result` triggers.
    #[serde(default)]
    #[schema(value_type = Vec<uuid::Uuid>)]
    task_ids: Vec<TaskId>,
    /// A previous process of this runner (kept in its log folder): everything it still
    /// holds for the agent is released.
    #[schema(value_type = Option<uuid::Uuid>)]
    previous_runner_id: Option<RunnerId>,
}

#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ReleaseResponse {
    /// Items back where the next poll finds them.
    released: usize,
    /// Items handed over `MAX_DELIVERIES` times, set aside as dead letters.
    dead_lettered: usize,
}

/// A runner gives back the lead-side claims an agent run left unfinished (ours): the
/// items of a trigger whose run ended without acknowledging, answering, delegating or
/// reading them, held by this runner (`X-Runner-ID`, required then), and with
/// `previousRunnerId` everything a previous process of the runner held. Items finished
/// meanwhile, or held by another runner, are left alone. An item handed over
/// `MAX_DELIVERIES` times becomes a dead letter instead of being offered again.
#[utoipa::path(post, path = "/api/poll/release", tag = "agents", request_body = ReleaseBody,
    params(("X-Runner-ID" = Option<uuid::Uuid>, Header, description = "The runner holding the items")),
    responses((status = 200, body = ReleaseResponse), ErrorResponses))]
async fn poll_release(
    State(state): State<AppState>,
    CallerHeader(caller): CallerHeader,
    RunnerHeader(runner): RunnerHeader,
    AppJson(body): AppJson<ReleaseBody>,
) -> Result<Json<ReleaseResponse>, ApiError> {
    let request = ReleaseRequest {
        items: HeldItems {
            inbox: body.inbox_message_ids,
            channels: body.channel_ids,
            mail: body.mail_ids,
            results: body.task_ids,
        },
        previous_runner: body.previous_runner_id,
    };
    let released = state.service.claims_release(caller, runner, request).await?;
    Ok(Json(ReleaseResponse { released: released.returned, dead_lettered: released.dead_lettered }))
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct PollQuery {
    /// Seconds to hold the request open until a trigger exists (0 to 60, fractions
    /// allowed). Without it the poll answers at once.
    #[param(minimum = 0, maximum = 60)]
    wait: Option<f64>,
    /// `claim` (default): a worker with a free slot gets the best ready pool task claimed
    /// for it, as `task_assigned`. `notify`: the reference's informational
    /// `pool_tasks_available {count}` instead, claiming nothing.
    #[param(pattern = "^(claim|notify)$")]
    pool: Option<String>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct PollResponse {
    /// `null`, or `{type, ...}`: `task_offered {taskId, task}`, `task_assigned {taskId,
    /// task}`, `tasks_finished {count, tasks}` (leads), `pool_tasks_available {count}`, ...
    trigger: Option<Trigger>,
}

/// The caller's next trigger, claimed for it in the same transaction, so two polls
/// never get the same one. Checked in order: offers to me, my assigned tasks (if I have
/// a free slot), finished worker tasks (leads), pool tasks (workers with a free slot).
/// A poll counts as a heartbeat. A runner sends `X-Runner-ID`: the lead-side claims
/// (inbox messages, mentions, urgent mail) are then held by that runner process.
#[utoipa::path(get, path = "/api/poll", tag = "agents",
    params(PollQuery, ("X-Runner-ID" = Option<uuid::Uuid>, Header, description = "The polling runner process")),
    responses((status = 200, body = PollResponse), ErrorResponses))]
async fn poll_get(
    State(state): State<AppState>,
    CallerHeader(caller): CallerHeader,
    RunnerHeader(runner): RunnerHeader,
    token: Option<Extension<PresentedToken>>,
    Query(query): Query<PollQuery>,
) -> Result<Json<PollResponse>, ApiError> {
    let wait = match query.wait {
        None => Duration::ZERO,
        Some(seconds) if seconds.is_finite() && (0.0..=POLL_WAIT_MAX.as_secs_f64()).contains(&seconds) => {
            Duration::from_secs_f64(seconds)
        }
        Some(seconds) => {
            return Err(ApiError::BadRequest(format!(
                "wait must be a number of seconds between 0 and {}, got {seconds}",
                POLL_WAIT_MAX.as_secs()
            )));
        }
    };
    let pool = match query.pool.as_deref() {
        None | Some("claim") => PoolMode::Claim,
        Some("notify") => PoolMode::Notify,
        Some(other) => {
            return Err(ApiError::BadRequest(format!("pool must be claim or notify, got {other:?}")));
        }
    };
    // Only a poll that may park holds a slot: an immediate answer costs nothing to keep.
    let _slot =
        if wait.is_zero() { None } else { Some(state.limits.take(crate::limits::Held::Poll, caller)?) };
    // Boxed: a future held inline is copied whole each time axum's layers move this
    // handler's future along, and the service's poll is hundreds of bytes (the handler's
    // future went from 3,848 bytes to 224).
    let poll = Box::pin(state.service.poll(caller, PollRequest { wait, pool, runner }));
    let trigger = match token {
        // A parked poll of a token ends 401 when that token is revoked.
        Some(Extension(token)) if !wait.is_zero() => tokio::select! {
            trigger = poll => trigger?,
            () = until_revoked(state.clone(), token) => return Err(ApiError::Unauthorized),
        },
        _ => poll.await?,
    };
    Ok(Json(PollResponse { trigger }))
}
