//! Atlassian Document Format: Jira's rich text. Read as plain text (descriptions),
//! written from plain text (the hub's comments: one paragraph per block of lines).

use serde_json::{Value, json};

/// The text of an ADF tree: text nodes, mentions as `@name`, a line per block.
pub fn text_of(node: &Value) -> String {
    let mut out = String::new();
    visit(node, &mut out);
    out.trim_end().to_string()
}

fn visit(node: &Value, out: &mut String) {
    match node["type"].as_str().unwrap_or_default() {
        "text" => out.push_str(node["text"].as_str().unwrap_or_default()),
        "mention" => {
            let name =
                node["attrs"]["text"].as_str().or_else(|| node["attrs"]["id"].as_str()).unwrap_or_default();
            if !name.starts_with('@') {
                out.push('@');
            }
            out.push_str(name);
        }
        "hardBreak" => out.push('\n'),
        "paragraph" | "heading" | "blockquote" | "codeBlock" => {
            children(node, out);
            out.push('\n');
        }
        "listItem" => {
            out.push_str("- ");
            children(node, out);
            if !out.ends_with('\n') {
                out.push('\n');
            }
        }
        _ => children(node, out),
    }
}

fn children(node: &Value, out: &mut String) {
    for child in node["content"].as_array().into_iter().flatten() {
        visit(child, out);
    }
}

/// Plain text as an ADF document: blank lines split paragraphs, a line break within
/// one is a `hardBreak`.
pub fn doc(text: &str) -> Value {
    let paragraphs: Vec<Value> = text
        .split("\n\n")
        .map(|paragraph| paragraph.trim_matches('\n'))
        .filter(|paragraph| !paragraph.trim().is_empty())
        .map(|paragraph| {
            let mut content = Vec::new();
            for (n, line) in paragraph.split('\n').enumerate() {
                if n > 0 {
                    content.push(json!({"type": "hardBreak"}));
                }
                if !line.is_empty() {
                    content.push(json!({"type": "text", "text": line}));
                }
            }
            json!({"type": "paragraph", "content": content})
        })
        .collect();
    json!({"type": "doc", "version": 1, "content": paragraphs})
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_goes_to_adf_and_back() {
        let text = "Swarm task completed.\n\nOutput:\nline one\nline two";
        let adf = doc(text);
        assert_eq!(adf["type"], "doc");
        assert_eq!(adf["content"].as_array().unwrap().len(), 2);
        assert_eq!(text_of(&adf), "Swarm task completed.\nOutput:\nline one\nline two");
        let mention = json!({"type": "doc", "content": [{"type": "paragraph", "content": [
            {"type": "mention", "attrs": {"id": "acc-1", "text": "@Swarm"}}, {"type": "text", "text": " hi"}]}]});
        assert_eq!(text_of(&mention), "@Swarm hi");
    }
}
