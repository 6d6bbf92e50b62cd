//! The calls the hub makes to GitLab's REST API (`GITLAB_URL` + `/api/v4`, with
//! `GITLAB_TOKEN` in `PRIVATE-TOKEN`): whether a user is a member of a project, an
//! item's notes, a new note.

use std::time::Duration;

use serde_json::{Value, json};

use crate::event::ItemKind;

pub const DEFAULT_URL: &str = "https://gitlab.com";

/// Notes read when looking for a report posted before a crash: the newest, since the
/// report is posted after the task ended.
const NOTES_SCANNED: usize = 100;

/// Membership below Guest (10: GitLab's "no access" and "minimal access" levels)
/// does not count.
const MEMBER_ACCESS_LEVEL_MIN: i64 = 10;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GitLabError(pub String);

impl std::fmt::Display for GitLabError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "GitLab API: {}", self.0)
    }
}

impl std::error::Error for GitLabError {}

#[derive(Clone)]
pub struct GitLabApi {
    http: reqwest::Client,
    /// `<GITLAB_URL>/api/v4`.
    base: String,
    token: String,
}

impl std::fmt::Debug for GitLabApi {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GitLabApi").field("base", &self.base).field("token", &"<redacted>").finish()
    }
}

impl GitLabApi {
    pub fn new(url: &str, token: &str) -> GitLabApi {
        let http = reqwest::Client::builder()
            .timeout(Duration::from_secs(30))
            .build()
            .unwrap_or_else(|_| reqwest::Client::new());
        GitLabApi {
            http,
            base: format!("{}/api/v4", url.trim().trim_end_matches('/')),
            token: token.trim().to_string(),
        }
    }

    /// Whether `user_id` is a member of `project_id` (directly or through its groups).
    pub async fn is_member(&self, project_id: i64, user_id: i64) -> Result<bool, GitLabError> {
        let url = format!("{}/projects/{project_id}/members/all/{user_id}", self.base);
        let response = self.send(self.http.get(&url)).await?;
        match response.status().as_u16() {
            404 => Ok(false),
            200 => {
                let member: Value = response.json().await.map_err(|error| GitLabError(error.to_string()))?;
                let level = member["access_level"].as_i64().unwrap_or_default();
                Ok(level >= MEMBER_ACCESS_LEVEL_MIN && member["state"].as_str().is_none_or(|s| s == "active"))
            }
            status => Err(GitLabError(format!("{url}: HTTP {status}"))),
        }
    }

    /// The bodies of an item's newest notes.
    pub async fn note_bodies(
        &self,
        project_id: i64,
        kind: ItemKind,
        iid: i64,
    ) -> Result<Vec<String>, GitLabError> {
        let url = self.notes_url(project_id, kind, iid);
        let request = self.http.get(&url).query(&[
            ("per_page", NOTES_SCANNED.to_string()),
            ("sort", "desc".into()),
            ("order_by", "created_at".into()),
        ]);
        let response = self.send(request).await?;
        let status = response.status();
        if !status.is_success() {
            return Err(GitLabError(format!("{url}: HTTP {}", status.as_u16())));
        }
        let notes: Value = response.json().await.map_err(|error| GitLabError(error.to_string()))?;
        Ok(notes
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|note| note["body"].as_str().map(str::to_string))
            .collect())
    }

    pub async fn note_create(
        &self,
        project_id: i64,
        kind: ItemKind,
        iid: i64,
        body: &str,
    ) -> Result<(), GitLabError> {
        let url = self.notes_url(project_id, kind, iid);
        let response = self.send(self.http.post(&url).json(&json!({ "body": body }))).await?;
        let status = response.status();
        if !status.is_success() {
            return Err(GitLabError(format!("{url}: HTTP {}", status.as_u16())));
        }
        Ok(())
    }

    fn notes_url(&self, project_id: i64, kind: ItemKind, iid: i64) -> String {
        format!("{}/projects/{project_id}/{}/{iid}/notes", self.base, kind.api_segment())
    }

    async fn send(&self, request: reqwest::RequestBuilder) -> Result<reqwest::Response, GitLabError> {
        request
            .header("PRIVATE-TOKEN", &self.token)
            .send()
            .await
            .map_err(|error| GitLabError(format!("{} unreachable: {error}", self.base)))
    }
}
