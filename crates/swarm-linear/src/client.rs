//! The calls the hub makes to Linear's GraphQL API (`LINEAR_API_URL`): who the bot is,
//! an issue's comments and its team's workflow states, a comment, a state change.

use std::time::Duration;

use serde_json::{Value, json};

use crate::webhook::Bot;

pub const DEFAULT_API_URL: &str = "https://api.linear.app/graphql";

/// An error from Linear: the request failed, or Linear answered with errors.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LinearError(pub String);

impl std::fmt::Display for LinearError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Linear API: {}", self.0)
    }
}

impl std::error::Error for LinearError {}

/// One of a team's workflow states.
#[derive(Debug, Clone, PartialEq)]
pub struct WorkflowState {
    pub id: String,
    pub name: String,
    /// `triage`, `backlog`, `unstarted`, `started`, `completed`, `canceled`.
    pub kind: String,
    pub position: f64,
}

#[derive(Clone)]
pub struct LinearApi {
    http: reqwest::Client,
    url: String,
    authorization: String,
}

impl std::fmt::Debug for LinearApi {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LinearApi").field("url", &self.url).field("authorization", &"<redacted>").finish()
    }
}

impl LinearApi {
    /// A personal API key (`lin_api_…`) goes in `Authorization` as it is; an OAuth
    /// access token (`lin_oauth_…`, or given as `Bearer …`) as a bearer token.
    pub fn new(url: &str, token: &str) -> LinearApi {
        let token = token.trim();
        let authorization = if token.starts_with("Bearer ") {
            token.to_string()
        } else if token.starts_with("lin_oauth_") {
            format!("Bearer {token}")
        } else {
            token.to_string()
        };
        let http = reqwest::Client::builder()
            .timeout(Duration::from_secs(30))
            .build()
            .unwrap_or_else(|_| reqwest::Client::new());
        LinearApi { http, url: url.trim_end_matches('/').to_string(), authorization }
    }

    async fn graphql(&self, query: &str, variables: Value) -> Result<Value, LinearError> {
        let response = self
            .http
            .post(&self.url)
            .header("Authorization", &self.authorization)
            .json(&json!({ "query": query, "variables": variables }))
            .send()
            .await
            .map_err(|error| LinearError(format!("{} unreachable: {error}", self.url)))?;
        let status = response.status();
        let body: Value = response.json().await.unwrap_or(Value::Null);
        if let Some(message) = body["errors"][0]["message"].as_str() {
            return Err(LinearError(format!("{status}: {message}")));
        }
        if !status.is_success() {
            return Err(LinearError(format!("{status} from {}", self.url)));
        }
        Ok(body["data"].clone())
    }

    /// The API key's user: the bot, whose mentions and assignments count.
    pub async fn viewer(&self) -> Result<Bot, LinearError> {
        let data = self.graphql("query SwarmViewer { viewer { id name displayName } }", json!({})).await?;
        let viewer = &data["viewer"];
        let id = viewer["id"].as_str().ok_or_else(|| LinearError("viewer without an id".into()))?;
        let names = [&viewer["displayName"], &viewer["name"]]
            .into_iter()
            .filter_map(|name| name.as_str().map(str::to_string))
            .collect();
        Ok(Bot { id: Some(id.to_string()), names })
    }

    /// The bodies of the issue's comments (the newest 100), to find a report posted
    /// before a crash.
    pub async fn comment_bodies(&self, issue_id: &str) -> Result<Vec<String>, LinearError> {
        let query = "query SwarmIssueComments($id: String!) { issue(id: $id) { comments(first: 100) { nodes { body } } } }";
        let data = self.graphql(query, json!({ "id": issue_id })).await?;
        let nodes = data["issue"]["comments"]["nodes"].as_array().cloned().unwrap_or_default();
        Ok(nodes.iter().filter_map(|node| node["body"].as_str().map(str::to_string)).collect())
    }

    pub async fn comment_create(&self, issue_id: &str, body: &str) -> Result<(), LinearError> {
        let query = "mutation SwarmCommentCreate($input: CommentCreateInput!) { commentCreate(input: $input) { success } }";
        let data = self.graphql(query, json!({ "input": { "issueId": issue_id, "body": body } })).await?;
        match data["commentCreate"]["success"].as_bool() {
            Some(true) => Ok(()),
            _ => Err(LinearError("commentCreate did not succeed".into())),
        }
    }

    /// The workflow states of the issue's team, and the issue's current state's id.
    pub async fn team_states(
        &self,
        issue_id: &str,
    ) -> Result<(Vec<WorkflowState>, Option<String>), LinearError> {
        let query = "query SwarmIssueStates($id: String!) { issue(id: $id) { state { id } \
                     team { states { nodes { id name type position } } } } }";
        let data = self.graphql(query, json!({ "id": issue_id })).await?;
        let issue = &data["issue"];
        let states = issue["team"]["states"]["nodes"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|state| {
                Some(WorkflowState {
                    id: state["id"].as_str()?.to_string(),
                    name: state["name"].as_str().unwrap_or_default().to_string(),
                    kind: state["type"].as_str().unwrap_or_default().to_string(),
                    position: state["position"].as_f64().unwrap_or_default(),
                })
            })
            .collect();
        Ok((states, issue["state"]["id"].as_str().map(str::to_string)))
    }

    pub async fn issue_set_state(&self, issue_id: &str, state_id: &str) -> Result<(), LinearError> {
        let query = "mutation SwarmIssueUpdate($id: String!, $input: IssueUpdateInput!) { \
                     issueUpdate(id: $id, input: $input) { success } }";
        let data = self.graphql(query, json!({ "id": issue_id, "input": { "stateId": state_id } })).await?;
        match data["issueUpdate"]["success"].as_bool() {
            Some(true) => Ok(()),
            _ => Err(LinearError("issueUpdate did not succeed".into())),
        }
    }

    /// Move the issue to the first state (by position) of type `kind`, unless it is in
    /// one of that type already: `Ok(Some(name))` when it moved.
    pub async fn move_to_state_of_kind(
        &self,
        issue_id: &str,
        kind: &str,
    ) -> Result<Option<String>, LinearError> {
        let (states, current) = self.team_states(issue_id).await?;
        let current_kind = current.and_then(|current| states.iter().find(|state| state.id == current));
        if current_kind.is_some_and(|state| state.kind == kind) {
            return Ok(None);
        }
        let Some(target) =
            states.iter().filter(|state| state.kind == kind).min_by(|a, b| a.position.total_cmp(&b.position))
        else {
            return Err(LinearError(format!("the issue's team has no workflow state of type {kind}")));
        };
        self.issue_set_state(issue_id, &target.id).await?;
        Ok(Some(target.name.clone()))
    }
}
