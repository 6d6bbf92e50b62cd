//! `GET /api/poll`: the runner's question "is there work for me?".

use std::time::Duration;

use axum::extract::{Query, State};
use serde::{Deserialize, Serialize};
use swarm_domain::poll::{PoolMode, Trigger};
use swarm_service::{POLL_WAIT_MAX, PollRequest};
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::{router::OpenApiRouter, routes};

use crate::Json;
use crate::{
    AppState,
    error::{ApiError, ErrorResponses},
    extract::{CallerHeader, RunnerHeader},
};

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(poll_get))
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
    /// task}`, `tasks_finished {count, tasks}` (leads), `pool_tasks_available {count}`.
    #[schema(value_type = Option<Object>)]
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
    let trigger = state.service.poll(caller, PollRequest { wait, pool, runner }).await?;
    Ok(Json(PollResponse { trigger }))
}
