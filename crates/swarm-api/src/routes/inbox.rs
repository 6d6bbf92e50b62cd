//! The lead's inbox (Slack messages routed to the lead), for people and scripts. The
//! lead itself answers and delegates through its MCP tools.

use axum::extract::{Path, Query, State};
use serde::{Deserialize, Serialize};
use swarm_domain::{
    id::{AgentId, InboxMessageId},
    inbox::{InboxMessage, InboxStatus},
};
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::{router::OpenApiRouter, routes};

use crate::Json;
use crate::{
    AppState,
    error::{ApiError, ErrorResponses},
    extract::{CallerHeader, optional_id, split_list},
};

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(inbox_list)).routes(routes!(inbox_requeue))
}

#[derive(Debug, Deserialize, IntoParams)]
#[serde(rename_all = "camelCase")]
#[into_params(parameter_in = Query)]
pub struct InboxQuery {
    /// Whose inbox (a UUID): an agent may name only itself; without it, the caller's own,
    /// or for the operator the lead's. Empty means none given.
    #[param(value_type = Option<String>, pattern = r"^$|^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$")]
    agent_id: Option<String>,
    /// One status or a comma-separated list (`unread`, `processing`, `read`,
    /// `responded`, `delegated`, `dead_letter`); none means all.
    status: Option<String>,
    /// 1 to 100, default 25.
    #[param(minimum = 1, maximum = 100)]
    limit: Option<i64>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct InboxListResponse {
    messages: Vec<InboxMessage>,
}

/// Inbox messages, oldest first.
#[utoipa::path(get, path = "/api/inbox", tag = "inbox", params(InboxQuery),
    responses((status = 200, body = InboxListResponse), ErrorResponses))]
async fn inbox_list(
    State(state): State<AppState>,
    CallerHeader(caller): CallerHeader,
    Query(query): Query<InboxQuery>,
) -> Result<Json<InboxListResponse>, ApiError> {
    let agent = optional_id(query.agent_id.as_deref(), AgentId::parse)?;
    let statuses = split_list(query.status.as_deref())
        .iter()
        .map(|status| InboxStatus::parse(status))
        .collect::<Result<Vec<_>, _>>()?;
    let messages = state.service.inbox_list(caller, agent, statuses, query.limit).await?;
    Ok(Json(InboxListResponse { messages }))
}

/// Put a dead letter back in the lead's inbox (ours): `dead_letter` → `unread`, with a
/// fresh delivery count, so the next poll hands it to the lead again. For the operator
/// and the message's owner; 409 when the message is not a dead letter.
#[utoipa::path(post, path = "/api/inbox/{id}/requeue", tag = "inbox",
    params(("id" = uuid::Uuid, Path, description = "Inbox message id")),
    responses((status = 200, body = InboxMessage), ErrorResponses))]
async fn inbox_requeue(
    State(state): State<AppState>,
    CallerHeader(caller): CallerHeader,
    Path(id): Path<String>,
) -> Result<Json<InboxMessage>, ApiError> {
    let message = state.service.inbox_requeue(caller, InboxMessageId::parse(&id)?).await?;
    Ok(Json(message))
}
