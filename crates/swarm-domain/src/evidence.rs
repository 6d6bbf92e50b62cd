//! Evidence of shipped work (issue 47): the pull and merge request URLs an agent's text
//! names, as the reference's `extractGitHubPullRequestUrls` finds GitHub's, plus
//! GitLab's merge requests. Recorded on the task, shown on the dashboard and in the
//! tracker's comment.

/// At most this many are kept per task: a task that names more is listing, not shipping.
pub const PULL_REQUESTS_MAX: usize = 20;

/// The pull request (`https://<host>/<owner>/<repo>/pull/<n>`) and merge request
/// (`https://<host>/<group>/<project>/-/merge_requests/<n>`) URLs in `text`, each once,
/// in the order they appear, cut to the request itself (no `/files`, `#note_...`, query).
pub fn pull_request_urls(text: &str) -> Vec<String> {
    let mut found: Vec<String> = Vec::new();
    for (start, _) in text.match_indices("http") {
        let candidate = &text[start..];
        let end = candidate
            .find(|c: char| c.is_whitespace() || "<>\"'`()[]{}|\\^".contains(c))
            .unwrap_or(candidate.len());
        // A sentence's full stop or comma after a link is not part of it.
        let link = candidate[..end].trim_end_matches(['.', ',', ';', ':', '!', '?']);
        let Some(url) = pull_request_url(link) else { continue };
        if !found.contains(&url) {
            found.push(url);
            if found.len() == PULL_REQUESTS_MAX {
                break;
            }
        }
    }
    found
}

/// `url` cut to its pull or merge request, when it is one.
fn pull_request_url(url: &str) -> Option<String> {
    let rest = url.strip_prefix("https://").or_else(|| url.strip_prefix("http://"))?;
    let scheme_len = url.len() - rest.len();
    let path_end = rest.find(['?', '#']).unwrap_or(rest.len());
    let segments: Vec<&str> = rest[..path_end].split('/').collect();
    if !segments.first().is_some_and(|host| is_host(host)) {
        return None;
    }
    // GitLab: <group>/<subgroups...>/<project>/-/merge_requests/<n>; GitHub: <owner>/<repo>/pull/<n>.
    let (keep, number) = if let Some(at) = segments.iter().position(|s| *s == "merge_requests") {
        (at >= 4 && segments[at - 1] == "-").then_some((at + 2, segments.get(at + 1)?))?
    } else {
        let at = segments.iter().position(|s| *s == "pull")?;
        (at == 3).then_some((at + 2, segments.get(at + 1)?))?
    };
    if number.is_empty() || !number.chars().all(|c| c.is_ascii_digit()) {
        return None;
    }
    if segments[1..keep - 2].iter().any(|s| s.is_empty() || !s.chars().all(is_path_char)) {
        return None;
    }
    let path = segments[..keep].join("/");
    Some(format!("{}{path}", &url[..scheme_len]))
}

fn is_host(host: &str) -> bool {
    !host.is_empty() && host.chars().all(|c| c.is_ascii_alphanumeric() || ".-:".contains(c))
}

fn is_path_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || "._-~".contains(c)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pull_and_merge_requests_are_found_once_in_order() {
        let text = "Opened https://github.com/o/r/pull/12 and see \
                    https://gitlab.example.com/group/sub/proj/-/merge_requests/7#note_3 (also \
                    https://github.com/o/r/pull/12/files). Not: https://github.com/o/r/issues/3, \
                    https://gitlab.com/g/p/merge_requests/4, https://github.com/o/r/pull/x, \
                    https://github.com/o/r/pull/, http://localhost:8080/a/b/pull/9.";
        assert_eq!(
            pull_request_urls(text),
            vec![
                "https://github.com/o/r/pull/12",
                "https://gitlab.example.com/group/sub/proj/-/merge_requests/7",
                "http://localhost:8080/a/b/pull/9",
            ]
        );
        assert!(pull_request_urls("no links here").is_empty());
    }

    #[test]
    fn many_are_cut_to_the_maximum() {
        let text: String = (0..50).map(|n| format!("https://github.com/o/r/pull/{n} ")).collect();
        assert_eq!(pull_request_urls(&text).len(), PULL_REQUESTS_MAX);
    }
}
