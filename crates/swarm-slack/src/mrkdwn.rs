//! GitHub Markdown (what agents write) to Slack mrkdwn: bold `**x**` → `*x*`, italics
//! `*x*` → `_x_`, strike `~~x~~` → `~x~`, links `[t](u)` → `<u|t>`, headings → bold
//! lines. Code blocks and inline code are left alone.

pub fn from_markdown(markdown: &str) -> String {
    let mut out = Vec::new();
    let mut in_code_block = false;
    for line in markdown.lines() {
        if line.trim_start().starts_with("```") {
            in_code_block = !in_code_block;
            out.push(line.to_string());
            continue;
        }
        if in_code_block {
            out.push(line.to_string());
            continue;
        }
        let trimmed = line.trim_start();
        let heading = trimmed.trim_start_matches('#');
        if trimmed.starts_with('#') && heading.starts_with(' ') {
            out.push(format!("*{}*", convert_inline(heading.trim())));
        } else {
            out.push(convert_inline(line));
        }
    }
    out.join("\n")
}

/// One line outside code blocks; inline code spans are copied as they are.
fn convert_inline(line: &str) -> String {
    let mut out = String::new();
    for (index, part) in line.split('`').enumerate() {
        if index > 0 {
            out.push('`');
        }
        if index % 2 == 1 {
            out.push_str(part);
        } else {
            out.push_str(&convert_text(part));
        }
    }
    out
}

fn convert_text(text: &str) -> String {
    let text = convert_links(text);
    // Bold markers become a placeholder first so the italic pass does not see them.
    const BOLD: char = '\u{1}';
    let text = text.replace("**", &BOLD.to_string()).replace("__", &BOLD.to_string());
    let text = text.replace("~~", "~");
    let mut out = String::with_capacity(text.len());
    let chars: Vec<char> = text.chars().collect();
    for (at, c) in chars.iter().enumerate() {
        // A single `*` that opens or closes emphasis (not a bullet `* `) is italic.
        let bullet =
            *c == '*' && chars[..at].iter().all(|c| c.is_whitespace()) && chars.get(at + 1) == Some(&' ');
        match c {
            '*' if !bullet => out.push('_'),
            &BOLD => out.push('*'),
            other => out.push(*other),
        }
    }
    out
}

fn convert_links(text: &str) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(open) = rest.find('[') {
        let after = &rest[open + 1..];
        let Some(close) = after.find("](") else { break };
        let Some(end) = after[close + 2..].find(')') else { break };
        let label = &after[..close];
        let url = &after[close + 2..close + 2 + end];
        out.push_str(&rest[..open]);
        out.push_str(&format!("<{url}|{label}>"));
        rest = &after[close + 2 + end + 1..];
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::from_markdown;

    #[test]
    fn markdown_becomes_mrkdwn() {
        assert_eq!(from_markdown("**bold** and *it* and ~~gone~~"), "*bold* and _it_ and ~gone~");
        assert_eq!(from_markdown("# Title\nsee [docs](https://x.y/z)"), "*Title*\nsee <https://x.y/z|docs>");
        assert_eq!(from_markdown("* item **b**"), "* item *b*");
        assert_eq!(from_markdown("```\n**raw**\n```\n`*x*`"), "```\n**raw**\n```\n`*x*`");
    }
}
