//! Socket Mode: `apps.connections.open` (app-level token) gives a websocket URL; Slack
//! sends envelopes (`hello`, `events_api`, `disconnect`, ...), each acknowledged with
//! `{"envelope_id": ...}` at once; the connection is reopened whenever it ends, with a
//! backoff when opening fails. Hand-rolled on tokio-tungstenite: the protocol is four
//! message kinds, and slack-morphism's listener would bring a second HTTP stack (hyper
//! connectors, ring) for it.

use std::{sync::Arc, time::Duration};

use futures_util::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::Message;

use crate::bridge::Bridge;

const BACKOFF_MAX: Duration = Duration::from_secs(30);

/// Run until the task is aborted.
pub async fn run(bridge: Arc<Bridge>, app_token: String) {
    let mut backoff = Duration::from_millis(500);
    loop {
        match connect_once(&bridge, &app_token).await {
            Ok(()) => {
                tracing::info!("Slack Socket Mode connection ended; reconnecting");
                backoff = Duration::from_millis(500);
            }
            Err(error) => {
                tracing::warn!(%error, retry_in = ?backoff, "Slack Socket Mode connection failed");
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(BACKOFF_MAX);
            }
        }
    }
}

async fn connect_once(bridge: &Arc<Bridge>, app_token: &str) -> Result<(), String> {
    let opened = bridge
        .api
        .call_with(app_token, "apps.connections.open", &json!({}))
        .await
        .map_err(|e| e.to_string())?;
    let url = opened.get("url").and_then(Value::as_str).ok_or("apps.connections.open: no url")?;
    let (mut socket, _) =
        tokio_tungstenite::connect_async(url).await.map_err(|e| format!("websocket: {e}"))?;
    tracing::info!("Slack Socket Mode connected");
    while let Some(frame) = socket.next().await {
        let frame = frame.map_err(|e| format!("websocket: {e}"))?;
        let text = match frame {
            Message::Text(text) => text.to_string(),
            Message::Ping(data) => {
                socket.send(Message::Pong(data)).await.map_err(|e| format!("websocket: {e}"))?;
                continue;
            }
            Message::Close(_) => return Ok(()),
            _ => continue,
        };
        let Ok(envelope) = serde_json::from_str::<Value>(&text) else {
            tracing::warn!("Slack Socket Mode sent something that is not JSON; ignored");
            continue;
        };
        if let Some(envelope_id) = envelope.get("envelope_id").and_then(Value::as_str) {
            let ack = json!({ "envelope_id": envelope_id }).to_string();
            socket.send(Message::Text(ack.into())).await.map_err(|e| format!("websocket: {e}"))?;
        }
        match envelope.get("type").and_then(Value::as_str) {
            Some("events_api") => {
                if let Some(payload) = envelope.get("payload").cloned() {
                    let bridge = bridge.clone();
                    tokio::spawn(async move { bridge.handle_callback(&payload).await });
                }
            }
            Some("interactive") => {
                if let Some(payload) = envelope.get("payload").cloned() {
                    let bridge = bridge.clone();
                    tokio::spawn(async move { bridge.handle_interaction(&payload).await });
                }
            }
            Some("disconnect") => return Ok(()),
            _ => {}
        }
    }
    Ok(())
}
