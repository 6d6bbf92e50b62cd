//! The living Slack message as a person sees it (issue 42): the Block Kit JSON the hub sent
//! the Slack stand-in, rendered to plain HTML after Slack's own look (sections, context,
//! buttons, mrkdwn) and photographed in Chromium. The pictures go to
//! `target/slack-messages/`; docs/slack-status-message.png is one of them.

use std::path::PathBuf;

use serde_json::{Value, json};

use crate::{
    hub::sqlite_file,
    slack_living::{living_flags, slack_task_taken, start_hub},
    slack_stand_in::{SlackStandIn, StoredMessage},
    webdriver::Browser,
};

fn pictures_dir() -> PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../target"));
    target.join("slack-messages")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slack_status_message_renders_in_a_browser() {
    let browser = Browser::start().await;
    let stand_in = SlackStandIn::start().await;
    let dir = tempfile::tempdir().unwrap();
    let hub = start_hub(&sqlite_file(dir.path()), &living_flags(&stand_in));
    stand_in.wait_connected(1).await;
    let worker = hub.register_agent("zeta-worker", false).await;
    let task = slack_task_taken(&hub, &stand_in, &worker, "950.1").await;
    let cost = json!({"sessionId": "run-1", "agentId": worker, "taskId": task, "totalCostUsd": 0.4213});
    let (code, body) = hub.post("/api/session-costs", Some(&worker), cost).await;
    assert_eq!(code, 201, "{body}");
    let note = json!({"progress": "Built **38 of 42** pages; running the link checker"});
    let (code, body) = hub.post(&format!("/api/tasks/{task}/progress"), Some(&worker), note).await;
    assert_eq!(code, 200, "{body}");
    let running = stand_in
        .wait_message("the progress with its cost", |m| {
            m.text.contains("link checker") && m.blocks.to_string().contains("$0.4213")
        })
        .await;
    let output =
        "**Rebuilt the docs site**: 42 pages.\n- fixed 3 broken links\n- `docs/slack.md` has the new section";
    let finish = json!({"status": "completed", "output": output});
    let (code, body) = hub.post(&format!("/api/tasks/{task}/finish"), Some(&worker), finish).await;
    assert_eq!(code, 200, "{body}");
    let done = stand_in.wait_message("the ending", |m| m.ts == running.ts && m.text.contains("Done")).await;
    let thread = stand_in.thread("C1", "950.1").await;

    let ask = "zeta: rebuild the docs site";
    let mut states = String::new();
    for (title, message) in [("While it runs", &running), ("When it is done", &done)] {
        let others: Vec<&StoredMessage> = thread.iter().filter(|m| m.ts != message.ts).collect();
        states.push_str(&format!("<section><h2>{title}</h2>{}", human("Dana", ask)));
        for other in others {
            states.push_str(&rendered(other));
        }
        states.push_str(&rendered(message));
        states.push_str("</section>");
    }
    let page =
        format!("<!DOCTYPE html><meta charset=utf-8><style>{STYLE}</style><div id=shot>{states}</div>");
    let dir = pictures_dir();
    std::fs::create_dir_all(&dir).unwrap();
    let html = dir.join("status-message.html");
    std::fs::write(&html, page).unwrap();
    browser.goto(&format!("file://{}", html.display())).await;
    let text = browser.text("#shot").await.unwrap();
    assert!(
        text.contains("In progress") && text.contains("Completed") && text.contains("Open in dashboard"),
        "{text}"
    );
    let png = browser.screenshot_of("#shot", &dir, "status-message").await;
    assert!(std::fs::metadata(&png).unwrap().len() > 10_000, "a picture of the messages: {}", png.display());
    browser.close().await;
}

const STYLE: &str = "
body { margin: 0; background: #fff; font-family: 'Liberation Sans', 'DejaVu Sans', sans-serif; color: #1d1c1d; }
#shot { display: flex; gap: 24px; padding: 16px; width: 1180px; }
section { flex: 1; border: 1px solid #ddd; border-radius: 8px; padding: 8px 0; }
h2 { font-size: 13px; color: #616061; margin: 0 16px 8px; font-weight: normal; text-transform: uppercase; letter-spacing: .05em; }
.msg { display: flex; gap: 8px; padding: 8px 16px; }
.avatar { width: 36px; height: 36px; border-radius: 6px; flex: none; color: #fff; font-weight: bold;
          display: flex; align-items: center; justify-content: center; font-size: 18px; }
.name { font-weight: bold; font-size: 15px; }
.app { background: #e8e8e8; color: #616061; font-size: 10px; font-weight: bold; padding: 1px 3px; border-radius: 2px; margin-left: 4px; }
.time { color: #616061; font-size: 12px; margin-left: 6px; }
.text, .section { font-size: 15px; line-height: 1.45; margin: 2px 0 4px; white-space: pre-wrap; }
.context { font-size: 12px; color: #616061; margin: 4px 0; }
.context span + span::before { content: '  ·  '; }
.actions { display: flex; gap: 8px; margin: 8px 0 4px; flex-wrap: wrap; }
.button { border: 1px solid #bbb; border-radius: 4px; padding: 4px 12px; font-size: 13px; font-weight: bold; background: #fff; }
.button.danger { background: #e01e5a; color: #fff; border-color: #e01e5a; }
a { color: #1264a3; text-decoration: none; }
code { font-family: 'DejaVu Sans Mono', monospace; font-size: 12px; color: #e01e5a; background: #f6f6f6; border: 1px solid #ddd; border-radius: 3px; padding: 0 2px; }
pre { font-family: 'DejaVu Sans Mono', monospace; font-size: 12px; background: #f8f8f8; border: 1px solid #ddd; border-radius: 4px; padding: 6px; }
.emoji { display: inline-block; width: 18px; height: 18px; border-radius: 4px; color: #fff; font-size: 13px;
         text-align: center; line-height: 18px; vertical-align: -3px; font-weight: bold; }
";

fn human(name: &str, text: &str) -> String {
    format!(
        "<div class=msg><div class=avatar style='background:#2bac76'>{}</div><div><span class=name>{name}</span>\
         <span class=time>10:02</span><div class=text>{}</div></div></div>",
        &name[..1],
        escape(text)
    )
}

/// One message as Slack draws it: its blocks when it has them, else its text.
fn rendered(message: &StoredMessage) -> String {
    let name = message.username.clone().unwrap_or_else(|| "swarm".into());
    let body = match message.blocks.as_array() {
        Some(blocks) => blocks.iter().map(block).collect::<String>(),
        None => format!("<div class=text>{}</div>", mrkdwn(&message.text)),
    };
    let initial = name.chars().next().unwrap_or('s').to_ascii_uppercase();
    format!(
        "<div class=msg><div class=avatar style='background:#611f69'>{initial}</div><div style='flex:1'>\
         <span class=name>{}</span><span class=app>APP</span><span class=time>10:02</span>{body}</div></div>",
        escape(&name)
    )
}

fn block(block: &Value) -> String {
    match block["type"].as_str() {
        Some("section") => {
            format!("<div class=section>{}</div>", mrkdwn(block["text"]["text"].as_str().unwrap_or("")))
        }
        Some("context") => {
            let parts: String = block["elements"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|element| format!("<span>{}</span>", mrkdwn(element["text"].as_str().unwrap_or(""))))
                .collect();
            format!("<div class=context>{parts}</div>")
        }
        Some("actions") => {
            let buttons: String = block["elements"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|button| {
                    let style = button["style"].as_str().unwrap_or("");
                    format!(
                        "<span class='button {style}'>{}</span>",
                        escape(button["text"]["text"].as_str().unwrap_or(""))
                    )
                })
                .collect();
            format!("<div class=actions>{buttons}</div>")
        }
        _ => String::new(),
    }
}

fn escape(text: &str) -> String {
    text.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;")
}

/// Slack's mrkdwn, the parts the hub writes: `*bold*`, `_italic_`, `` `code` ``, code
/// blocks, `<url|label>` links, `<!date^...|fallback>` and a few emoji.
fn mrkdwn(text: &str) -> String {
    let mut out = String::new();
    let mut rest = text;
    // Slack's angle-bracket forms first: everything else in them is escaped text.
    while let Some(open) = rest.find('<') {
        out.push_str(&inline(&rest[..open]));
        let Some(close) = rest[open..].find('>') else { break };
        let inner = &rest[open + 1..open + close];
        let (target, label) = inner.split_once('|').unwrap_or((inner, inner));
        if let Some(date) = target.strip_prefix("!date^") {
            // `{ago}`, as each reader's Slack client shows it.
            let since: i64 = date.split('^').next().and_then(|s| s.parse().ok()).unwrap_or(0);
            let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs();
            let ago = (now as i64 - since).max(0);
            out.push_str(&if ago < 60 {
                format!("{ago} seconds ago")
            } else {
                format!("{} minutes ago", ago / 60)
            });
        } else {
            out.push_str(&format!("<a href='{}'>{}</a>", escape(target), inline(label)));
        }
        rest = &rest[open + close + 1..];
    }
    out.push_str(&inline(rest));
    out
}

fn inline(text: &str) -> String {
    let mut html = escape(text);
    for (name, color, glyph) in [
        (":hourglass_flowing_sand:", "#e8912d", "…"),
        (":white_check_mark:", "#2bac76", "✓"),
        (":x:", "#e01e5a", "✗"),
        (":no_entry_sign:", "#e01e5a", "⊘"),
        (":double_vertical_bar:", "#1264a3", "‖"),
        (":speech_balloon:", "#1264a3", "…"),
    ] {
        html = html.replace(name, &format!("<span class=emoji style='background:{color}'>{glyph}</span>"));
    }
    let mut out = String::new();
    let mut chars = html.split("```");
    // Code blocks alternate with text.
    let mut in_code = false;
    for part in chars.by_ref() {
        if in_code {
            out.push_str(&format!("<pre>{part}</pre>"));
        } else {
            out.push_str(&spans(part));
        }
        in_code = !in_code;
    }
    out
}

/// `*bold*`, `_italic_`, `` `code` `` within a line of escaped text.
fn spans(text: &str) -> String {
    let mut out = String::new();
    let mut open: Option<char> = None;
    let mut current = String::new();
    for c in text.chars() {
        match (c, open) {
            ('*' | '_' | '`', None) => {
                out.push_str(&current);
                current.clear();
                open = Some(c);
            }
            (c, Some(marker)) if c == marker => {
                let tag = match marker {
                    '*' => "b",
                    '_' => "i",
                    _ => "code",
                };
                out.push_str(&format!("<{tag}>{current}</{tag}>"));
                current.clear();
                open = None;
            }
            _ => current.push(c),
        }
    }
    if let Some(marker) = open {
        out.push(marker);
    }
    out.push_str(&current);
    out
}
