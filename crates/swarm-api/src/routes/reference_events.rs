//! The query form of `GET /api/events` (the reference's `{events: [...]}`), beside the
//! live stream of `routes::events`: which requests it answers, and the answer.

use axum::http::{HeaderMap, header::ACCEPT};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use swarm_domain::time::Timestamp;
use swarm_service::{WorkerEvent, WorkerEventFilter};
use utoipa::{IntoParams, ToSchema};

use crate::{AppState, error::ApiError};

/// The reference's event query; any of them makes `GET /api/events` a query.
#[derive(Debug, Default, Deserialize, IntoParams)]
#[serde(rename_all = "camelCase")]
#[into_params(parameter_in = Query)]
pub struct EventsQuery {
    pub category: Option<String>,
    /// The event's name, e.g. `system.profile_sync_rejected`.
    pub event: Option<String>,
    pub status: Option<String>,
    pub source: Option<String>,
    pub agent_id: Option<String>,
    pub task_id: Option<String>,
    pub session_id: Option<String>,
    /// Events whose `data.field` is this.
    pub data_field: Option<String>,
    /// ISO 8601; inclusive.
    pub since: Option<String>,
    /// ISO 8601; inclusive.
    pub until: Option<String>,
    /// 1 to 1000; 100 by default.
    pub limit: Option<String>,
}

impl EventsQuery {
    /// A query (JSON) rather than the live stream: a query parameter, or JSON accepted
    /// and the stream not asked for.
    pub fn is_query(&self, headers: &HeaderMap) -> bool {
        let accept = headers.get(ACCEPT).and_then(|value| value.to_str().ok()).unwrap_or("");
        if accept.contains("text/event-stream") {
            return false;
        }
        let any = [
            &self.category,
            &self.event,
            &self.status,
            &self.source,
            &self.agent_id,
            &self.task_id,
            &self.session_id,
            &self.data_field,
            &self.since,
            &self.until,
            &self.limit,
        ]
        .iter()
        .any(|value| value.is_some());
        any || accept.contains("application/json")
    }
}

/// The reference's `SwarmEvent`.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct SwarmEvent {
    pub id: String,
    pub category: String,
    pub event: String,
    pub status: String,
    pub source: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub agent_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub task_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub parent_event_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub numeric_value: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub duration_ms: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Object>)]
    pub data: Option<Value>,
    pub created_at: String,
}

impl From<WorkerEvent> for SwarmEvent {
    fn from(kept: WorkerEvent) -> Self {
        let event = kept.event;
        SwarmEvent {
            id: kept.id.to_string(),
            category: event.category,
            event: event.event,
            status: event.status,
            source: event.source,
            agent_id: event.agent_id,
            task_id: event.task_id,
            session_id: event.session_id,
            parent_event_id: event.parent_event_id,
            numeric_value: event.numeric_value,
            duration_ms: event.duration_ms,
            data: event.data,
            created_at: kept.created_at.datetime().to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
        }
    }
}

#[derive(Debug, Serialize, ToSchema)]
pub struct EventsQueryResponse {
    pub events: Vec<SwarmEvent>,
}

fn time(name: &str, text: Option<String>) -> Result<Option<Timestamp>, ApiError> {
    text.map(|text| {
        DateTime::parse_from_rfc3339(&text)
            .map(|at| Timestamp::from_datetime(at.with_timezone(&Utc)))
            .map_err(|_| {
                ApiError::BadRequest(format!("{name}: an ISO 8601 time (e.g. 2026-08-22T10:00:00Z)"))
            })
    })
    .transpose()
}

pub async fn events_query(state: &AppState, query: EventsQuery) -> Result<EventsQueryResponse, ApiError> {
    let limit = match query.limit.as_deref() {
        None => 100,
        Some(text) => text
            .parse::<i64>()
            .ok()
            .filter(|limit| (1..=1000).contains(limit))
            .ok_or_else(|| ApiError::BadRequest("limit: a whole number from 1 to 1000".into()))?,
    };
    let filter = WorkerEventFilter {
        category: query.category,
        event: query.event,
        status: query.status,
        source: query.source,
        agent_id: query.agent_id,
        task_id: query.task_id,
        session_id: query.session_id,
        data_field: query.data_field,
        since: time("since", query.since)?,
        until: time("until", query.until)?,
        limit,
    };
    let events = state.service.worker_events_query(filter).await?;
    Ok(EventsQueryResponse { events: events.into_iter().map(Into::into).collect() })
}
