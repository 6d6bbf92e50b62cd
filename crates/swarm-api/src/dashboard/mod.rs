//! The dashboard: static HTML, CSS and JavaScript modules compiled into the binary and
//! served at `/` and `/assets/...` without the API key. The pages hold no data: they
//! ask for the key (when the hub has one) and call the same REST endpoints as every
//! other client, and `GET /api/events` for live changes.
//!
//! Assets are `include_str!`ed from `crates/swarm-api/dashboard/` (no build step, no
//! extra crate: a dozen files are a table, not a job for `rust-embed`). Adding a page is
//! one module in `dashboard/pages/`, one line in [`ASSETS`] and one entry in
//! `dashboard/pages/index.js` (see ARCHITECTURE.md).

use axum::{
    Router,
    extract::Path,
    http::{HeaderValue, header},
    response::{IntoResponse, Response},
    routing::get,
};

use crate::{AppState, error::ApiError};

/// Every file under `/assets/`, by path.
const ASSETS: &[(&str, &str)] = &[
    ("app.js", include_str!("../../dashboard/app.js")),
    ("api.js", include_str!("../../dashboard/api.js")),
    ("events.js", include_str!("../../dashboard/events.js")),
    ("ui.js", include_str!("../../dashboard/ui.js")),
    ("session-log.js", include_str!("../../dashboard/session-log.js")),
    ("needs-you.js", include_str!("../../dashboard/needs-you.js")),
    ("costs.js", include_str!("../../dashboard/costs.js")),
    ("actions.js", include_str!("../../dashboard/actions.js")),
    ("style.css", include_str!("../../dashboard/style.css")),
    ("pages/index.js", include_str!("../../dashboard/pages/index.js")),
    ("pages/overview.js", include_str!("../../dashboard/pages/overview.js")),
    ("pages/agents.js", include_str!("../../dashboard/pages/agents.js")),
    ("pages/tasks.js", include_str!("../../dashboard/pages/tasks.js")),
    ("pages/task.js", include_str!("../../dashboard/pages/task.js")),
    ("pages/epics.js", include_str!("../../dashboard/pages/epics.js")),
    ("pages/inbox.js", include_str!("../../dashboard/pages/inbox.js")),
    ("pages/channels.js", include_str!("../../dashboard/pages/channels.js")),
    ("pages/mail.js", include_str!("../../dashboard/pages/mail.js")),
    ("pages/triggers.js", include_str!("../../dashboard/pages/triggers.js")),
];

const INDEX_HTML: &str = include_str!("../../dashboard/index.html");

/// Scripts and styles only from the hub itself; no inline script, no third party.
const CONTENT_SECURITY_POLICY: &str = "default-src 'self'; script-src 'self'; style-src 'self'; \
     img-src 'self' data:; connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'";

pub fn router() -> Router<AppState> {
    Router::new().route("/", get(index)).route("/assets/{*path}", get(asset))
}

/// Paths the dashboard serves without the key: the page and its assets hold no data.
pub(crate) fn is_public_path(path: &str) -> bool {
    path == "/" || path.starts_with("/assets/")
}

async fn index() -> Response {
    with_headers(INDEX_HTML, "text/html; charset=utf-8")
}

async fn asset(Path(path): Path<String>) -> Result<Response, ApiError> {
    let (_, body) = ASSETS
        .iter()
        .find(|(name, _)| *name == path)
        .ok_or_else(|| ApiError::NotFound(format!("no dashboard asset {path}")))?;
    let content_type = match path.rsplit_once('.').map(|(_, extension)| extension) {
        Some("css") => "text/css; charset=utf-8",
        _ => "text/javascript; charset=utf-8",
    };
    Ok(with_headers(body, content_type))
}

pub(crate) fn with_headers(body: &'static str, content_type: &'static str) -> Response {
    let mut response = body.into_response();
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    // The assets change with the binary: revalidate rather than keep a stale page.
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    headers.insert(header::CONTENT_SECURITY_POLICY, HeaderValue::from_static(CONTENT_SECURITY_POLICY));
    headers.insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    response
}
