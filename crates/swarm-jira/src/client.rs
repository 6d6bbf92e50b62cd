//! The calls the hub makes to Jira Cloud's REST API v3 at `JIRA_BASE_URL`: who the bot
//! is (`/myself`), an issue's comments, a comment (ADF), its transitions and one taken.

use std::time::Duration;

use base64::Engine;
use serde_json::{Value, json};

use crate::adf;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JiraError(pub String);

impl std::fmt::Display for JiraError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Jira API: {}", self.0)
    }
}

impl std::error::Error for JiraError {}

/// A transition the issue can take now, and the status category it leads to (`new`,
/// `indeterminate`, `done`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Transition {
    pub id: String,
    pub name: String,
    pub to_category: String,
}

#[derive(Clone)]
pub struct JiraApi {
    http: reqwest::Client,
    base_url: String,
    authorization: String,
}

impl std::fmt::Debug for JiraApi {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JiraApi")
            .field("base_url", &self.base_url)
            .field("authorization", &"<redacted>")
            .finish()
    }
}

impl JiraApi {
    /// With an e-mail, Jira Cloud's API-token scheme (Basic `email:token`); without, the
    /// token as a bearer token (an OAuth access token, or a Data Center PAT).
    pub fn new(base_url: &str, email: Option<&str>, token: &str) -> JiraApi {
        let authorization = match email.map(str::trim).filter(|email| !email.is_empty()) {
            Some(email) => format!(
                "Basic {}",
                base64::engine::general_purpose::STANDARD.encode(format!("{email}:{}", token.trim()))
            ),
            None => format!("Bearer {}", token.trim()),
        };
        let http = reqwest::Client::builder()
            .timeout(Duration::from_secs(30))
            .build()
            .unwrap_or_else(|_| reqwest::Client::new());
        JiraApi { http, base_url: base_url.trim_end_matches('/').to_string(), authorization }
    }

    /// The issue's page for people: `<base>/browse/<key>`.
    pub fn browse_url(&self, key: &str) -> String {
        format!("{}/browse/{key}", self.base_url)
    }

    async fn call(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<Value>,
    ) -> Result<Value, JiraError> {
        let url = format!("{}{path}", self.base_url);
        let mut request = self
            .http
            .request(method.clone(), &url)
            .header("Authorization", &self.authorization)
            .header("Accept", "application/json");
        if let Some(body) = body {
            request = request.json(&body);
        }
        let response =
            request.send().await.map_err(|error| JiraError(format!("{url} unreachable: {error}")))?;
        let status = response.status();
        let text = response.text().await.unwrap_or_default();
        if !status.is_success() {
            let excerpt: String = text.chars().take(300).collect();
            return Err(JiraError(format!("{method} {path}: {status} {excerpt}")));
        }
        Ok(serde_json::from_str(&text).unwrap_or(Value::Null))
    }

    /// The token's user: the bot, whose assignments count.
    pub async fn myself(&self) -> Result<String, JiraError> {
        let me = self.call(reqwest::Method::GET, "/rest/api/3/myself", None).await?;
        me["accountId"]
            .as_str()
            .map(str::to_string)
            .ok_or_else(|| JiraError("/myself without an accountId".into()))
    }

    /// The text of the issue's comments (the newest 100), to find a report posted
    /// before a crash.
    pub async fn comment_texts(&self, key: &str) -> Result<Vec<String>, JiraError> {
        let path = format!("/rest/api/3/issue/{key}/comment?maxResults=100&orderBy=-created");
        let page = self.call(reqwest::Method::GET, &path, None).await?;
        let comments = page["comments"].as_array().cloned().unwrap_or_default();
        Ok(comments.iter().map(|comment| adf::text_of(&comment["body"])).collect())
    }

    pub async fn comment_create(&self, key: &str, text: &str) -> Result<(), JiraError> {
        let path = format!("/rest/api/3/issue/{key}/comment");
        self.call(reqwest::Method::POST, &path, Some(json!({ "body": adf::doc(text) }))).await.map(drop)
    }

    pub async fn transitions(&self, key: &str) -> Result<Vec<Transition>, JiraError> {
        let path = format!("/rest/api/3/issue/{key}/transitions");
        let answer = self.call(reqwest::Method::GET, &path, None).await?;
        Ok(answer["transitions"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|transition| {
                Some(Transition {
                    id: transition["id"].as_str()?.to_string(),
                    name: transition["name"].as_str().unwrap_or_default().to_string(),
                    to_category: transition["to"]["statusCategory"]["key"]
                        .as_str()
                        .unwrap_or_default()
                        .to_string(),
                })
            })
            .collect())
    }

    pub async fn transition(&self, key: &str, transition_id: &str) -> Result<(), JiraError> {
        let path = format!("/rest/api/3/issue/{key}/transitions");
        self.call(reqwest::Method::POST, &path, Some(json!({ "transition": { "id": transition_id } })))
            .await
            .map(drop)
    }

    /// The category of the issue's status now (`new`, `indeterminate`, `done`).
    pub async fn status_category(&self, key: &str) -> Result<String, JiraError> {
        let path = format!("/rest/api/3/issue/{key}?fields=status");
        let issue = self.call(reqwest::Method::GET, &path, None).await?;
        Ok(issue["fields"]["status"]["statusCategory"]["key"].as_str().unwrap_or_default().to_string())
    }

    /// Take the first transition leading to a status of `category`, unless the issue is
    /// in one already: `Ok(Some(name))` when one was taken, `Ok(None)` when none was
    /// needed or the workflow offers none from here.
    pub async fn transition_to_category(
        &self,
        key: &str,
        category: &str,
    ) -> Result<Option<String>, JiraError> {
        if self.status_category(key).await? == category {
            return Ok(None);
        }
        let transitions = self.transitions(key).await?;
        let Some(chosen) = transitions.iter().find(|transition| transition.to_category == category) else {
            return Ok(None);
        };
        self.transition(key, &chosen.id).await?;
        Ok(Some(chosen.name.clone()))
    }
}
