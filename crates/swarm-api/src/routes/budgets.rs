//! Daily budgets (issue 40; the reference's `/api/budgets` routes): a ceiling in USD on a
//! UTC day's session costs, for the hub (`global/_global`) or one agent (`agent/<id>`).
//! Only the operator sets or removes one; see `swarm_service::budgets` for who reads.

use axum::{
    extract::{Path, Query, State},
    http::StatusCode,
};
use serde::{Deserialize, Serialize};
use swarm_domain::budget::{Budget, BudgetKey, BudgetRefusal, DailyBudgetUsd};
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::{router::OpenApiRouter, routes};

use crate::{
    AppState, Json,
    error::{ApiError, ErrorResponses},
    extract::{AppJson, CallerHeader},
};

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(budgets_list)).routes(routes!(budgets_refusals)).routes(routes!(
        budgets_get,
        budgets_put,
        budgets_delete
    ))
}

#[derive(Debug, Serialize, ToSchema)]
pub struct BudgetsResponse {
    budgets: Vec<Budget>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct RefusalsResponse {
    refusals: Vec<BudgetRefusal>,
}

/// Read from a JSON object only: serde would also take the array `[5]` for it.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(
    rename_all = "camelCase",
    deny_unknown_fields,
    try_from = "serde_json::Map<String, serde_json::Value>"
)]
pub struct BudgetBody {
    /// The ceiling for one UTC day's session costs, in US dollars; 0 stops all new work.
    #[schema(minimum = 0, maximum = 1_000_000_000)]
    daily_budget_usd: f64,
}

impl TryFrom<serde_json::Map<String, serde_json::Value>> for BudgetBody {
    type Error = String;

    fn try_from(object: serde_json::Map<String, serde_json::Value>) -> Result<Self, String> {
        #[derive(Deserialize)]
        #[serde(rename_all = "camelCase", deny_unknown_fields)]
        struct Fields {
            daily_budget_usd: f64,
        }
        let fields: Fields =
            serde_json::from_value(serde_json::Value::Object(object)).map_err(|error| error.to_string())?;
        Ok(BudgetBody { daily_budget_usd: fields.daily_budget_usd })
    }
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct RefusalsQuery {
    /// 1 to 500, default 50.
    #[param(minimum = 1, maximum = 500)]
    limit: Option<i64>,
}

/// The scope and its id, as the path names them.
#[derive(Debug, Deserialize, IntoParams)]
#[serde(rename_all = "camelCase")]
#[into_params(parameter_in = Path)]
pub struct BudgetPath {
    /// `global` or `agent`.
    #[param(pattern = "^(global|agent)$")]
    scope: String,
    /// `_global` for the global budget, else the agent's id.
    #[param(
        pattern = r"^_global$|^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$"
    )]
    scope_id: String,
}

impl BudgetPath {
    fn key(&self) -> Result<BudgetKey, ApiError> {
        Ok(BudgetKey::parse(&self.scope, &self.scope_id)?)
    }
}

/// Every budget the caller may read, each with what its scope spent today (UTC).
#[utoipa::path(get, path = "/api/budgets", tag = "budgets",
    responses((status = 200, body = BudgetsResponse), ErrorResponses))]
async fn budgets_list(
    State(state): State<AppState>,
    CallerHeader(caller): CallerHeader,
) -> Result<Json<BudgetsResponse>, ApiError> {
    let budgets = state.service.budget_list(caller).await?;
    Ok(Json(BudgetsResponse { budgets }))
}

/// Polls refused by a budget, newest first: one per agent, task and UTC day.
#[utoipa::path(get, path = "/api/budgets/refusals", tag = "budgets", params(RefusalsQuery),
    responses((status = 200, body = RefusalsResponse), ErrorResponses))]
async fn budgets_refusals(
    State(state): State<AppState>,
    CallerHeader(caller): CallerHeader,
    Query(query): Query<RefusalsQuery>,
) -> Result<Json<RefusalsResponse>, ApiError> {
    let refusals = state.service.budget_refusals(caller, query.limit).await?;
    Ok(Json(RefusalsResponse { refusals }))
}

/// One budget, with what its scope spent today (UTC); 404 when none is set.
#[utoipa::path(get, path = "/api/budgets/{scope}/{scopeId}", tag = "budgets", params(BudgetPath),
    responses((status = 200, body = Budget), ErrorResponses))]
async fn budgets_get(
    State(state): State<AppState>,
    CallerHeader(caller): CallerHeader,
    Path(path): Path<BudgetPath>,
) -> Result<Json<Budget>, ApiError> {
    Ok(Json(state.service.budget_get(caller, path.key()?).await?))
}

/// Set a daily budget (the operator only); the next poll of its scope obeys it.
#[utoipa::path(put, path = "/api/budgets/{scope}/{scopeId}", tag = "budgets", params(BudgetPath),
    request_body = BudgetBody, responses((status = 200, body = Budget), ErrorResponses))]
async fn budgets_put(
    State(state): State<AppState>,
    CallerHeader(caller): CallerHeader,
    Path(path): Path<BudgetPath>,
    AppJson(body): AppJson<BudgetBody>,
) -> Result<Json<Budget>, ApiError> {
    let key = path.key()?;
    let ceiling = DailyBudgetUsd::parse(body.daily_budget_usd)?;
    Ok(Json(state.service.budget_put(caller, key, ceiling).await?))
}

/// Remove a daily budget (the operator only): its scope is unlimited again.
#[utoipa::path(delete, path = "/api/budgets/{scope}/{scopeId}", tag = "budgets", params(BudgetPath),
    responses((status = 204), ErrorResponses))]
async fn budgets_delete(
    State(state): State<AppState>,
    CallerHeader(caller): CallerHeader,
    Path(path): Path<BudgetPath>,
) -> Result<StatusCode, ApiError> {
    state.service.budget_delete(caller, path.key()?).await?;
    Ok(StatusCode::NO_CONTENT)
}
