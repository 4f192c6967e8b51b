//! Intra-doc links that rendered as literal text.
//!
//! rustdoc warns about a link it cannot resolve only where it knows the text
//! is meant as a link; a `[`HoldToken`]` it takes for plain brackets renders
//! as `[HoldToken]` and says nothing. This reads the generated pages of our
//! crates and reports such brackets in the documentation text.

use std::fs;
use std::path::{Path, PathBuf};

/// The rustdoc folders of the published crates, under `target/doc`.
pub(crate) const DOC_FOLDERS: [&str; 6] = [
    "distlock",
    "lock_core",
    "lock_testkit",
    "lock_redis_single",
    "lock_reentrant",
    "lock_redlock",
];

/// Fails with every literal link found in the pages under `doc`.
pub(crate) fn check(doc: &Path) -> Result<(), String> {
    let mut found = Vec::new();
    let mut pages = 0;
    for folder in DOC_FOLDERS {
        for page in html_files(&doc.join(folder))? {
            pages += 1;
            let html = fs::read_to_string(&page)
                .map_err(|err| format!("cannot read {}: {err}", page.display()))?;
            for link in literal_links(&html) {
                let page = page.strip_prefix(doc).unwrap_or(&page).display();
                found.push(format!("{page}: {link}"));
            }
        }
    }
    if pages == 0 {
        return Err(format!("no rendered pages under {}", doc.display()));
    }
    if found.is_empty() {
        println!("xtask: {pages} rendered pages, no intra-doc link left as text");
        Ok(())
    } else {
        found.sort();
        found.dedup();
        Err(format!(
            "intra-doc links rendered as text (write a path rustdoc resolves):\n  {}",
            found.join("\n  ")
        ))
    }
}

fn html_files(folder: &Path) -> Result<Vec<PathBuf>, String> {
    let mut files = Vec::new();
    let mut folders = vec![folder.to_path_buf()];
    while let Some(folder) = folders.pop() {
        let entries =
            fs::read_dir(&folder).map_err(|err| format!("{}: {err}", folder.display()))?;
        for entry in entries.flatten() {
            let path = entry.path();
            if path.is_dir() {
                folders.push(path);
            } else if path
                .extension()
                .is_some_and(|extension| extension == "html")
            {
                files.push(path);
            }
        }
    }
    Ok(files)
}

/// The bracketed names in a page's documentation text: `[HoldToken]` and
/// `` [`HoldToken`] `` as rustdoc renders them when it made no link. Leaves
/// out code blocks, inline code, and the blanket implementations of other
/// crates' traits (whose docs link into pages `--no-deps` did not build).
fn literal_links(html: &str) -> Vec<String> {
    let html = html
        .find("id=\"blanket-implementations-list\"")
        .map_or(html, |end| &html[..end]);
    let mut links = Vec::new();
    for block in docblocks(html) {
        let text = without(&without(block, "<pre", "</pre>"), "<script", "</script>");
        let mut rest = text.as_str();
        while let Some(start) = rest.find("[<code>") {
            let after = &rest[start + "[<code>".len()..];
            if let Some(end) = after.find("</code>]") {
                if is_link_text(&after[..end]) {
                    links.push(format!("[`{}`]", &after[..end]));
                }
            }
            rest = after;
        }
        let plain = without(&text, "<code>", "</code>");
        let mut rest = plain.as_str();
        while let Some(start) = rest.find('[') {
            let after = &rest[start + 1..];
            if let Some(end) = after.find(']') {
                let name = &after[..end];
                if is_path(name) && (name.contains("::") || name.starts_with(char::is_uppercase)) {
                    links.push(format!("[{name}]"));
                }
            }
            rest = after;
        }
    }
    links
}

/// The contents of each `<div class="docblock ...">`, to its closing tag.
fn docblocks(html: &str) -> Vec<&str> {
    let mut blocks = Vec::new();
    let mut rest = html;
    while let Some(class) = rest
        .find("class=\"docblock")
        .into_iter()
        .chain(rest.find("class='docblock"))
        .min()
    {
        let Some(open_end) = rest[class..].find('>') else {
            break;
        };
        let body = &rest[class + open_end + 1..];
        let mut depth = 1usize;
        let mut at = 0;
        while depth > 0 {
            let next_open = body[at..].find("<div");
            let Some(next_close) = body[at..].find("</div>") else {
                at = body.len();
                break;
            };
            match next_open {
                Some(open) if open < next_close => {
                    depth += 1;
                    at += open + "<div".len();
                }
                _ => {
                    depth -= 1;
                    at += next_close + "</div>".len();
                }
            }
        }
        blocks.push(&body[..at]);
        rest = &body[at..];
    }
    blocks
}

/// `text` without the spans from each `open` to the next `close`.
fn without(text: &str, open: &str, close: &str) -> String {
    let mut kept = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find(open) {
        kept.push_str(&rest[..start]);
        match rest[start..].find(close) {
            Some(end) => rest = &rest[start + end + close.len()..],
            None => {
                rest = "";
            }
        }
    }
    kept.push_str(rest);
    kept
}

/// What rustdoc takes for a link in `` [`...`] ``: a path, perhaps with a
/// disambiguator (`fn@connect`) or a call or macro mark (`status()`,
/// `contract_suite!`).
fn is_link_text(text: &str) -> bool {
    let text = text.split_once('@').map_or(text, |(_, path)| path);
    let text = text
        .strip_suffix("()")
        .or_else(|| text.strip_suffix('!'))
        .unwrap_or(text);
    is_path(text)
}

/// A Rust path, as a link's text would be: `HoldToken`, `crate::MAX_TTL`,
/// `LockManager::acquire`.
fn is_path(text: &str) -> bool {
    !text.is_empty()
        && text.starts_with(|c: char| c.is_alphabetic() || c == '_')
        && text
            .chars()
            .all(|c| c.is_alphanumeric() || c == '_' || c == ':')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn brackets_left_in_the_text_are_reported() {
        let page = "<div class=\"docblock\"><p>Spend the [<code>HoldToken</code>] once; \
                    see [crate::MAX_TTL] and <a href=\"x\"><code>LockKey</code></a>, \
                    [<code>strategy</code>], [<code>Self::status()</code>], \
                    [<code>fn@connect</code>] and [<code>contract_suite!</code>].</p></div>";
        assert_eq!(
            literal_links(page),
            [
                "[`HoldToken`]",
                "[`strategy`]",
                "[`Self::status()`]",
                "[`fn@connect`]",
                "[`contract_suite!`]",
                "[crate::MAX_TTL]",
            ]
        );
    }

    #[test]
    fn code_signatures_and_other_crates_traits_are_left_out() {
        let page = "<pre class=\"rust item-decl\">fn hash_slice(data: &amp;[Self])</pre>\
                    <div class='docblock'><p>Takes <code>&amp;[u8]</code> or a [1] note.</p>\
                    <div class=\"example-wrap\"><pre class=\"rust\">let x = [Reply::Int(1)];</pre></div>\
                    <p>and more.</p></div>\
                    <div id=\"blanket-implementations-list\"><div class='docblock'>\
                    the provided [<code>Span</code>]</div></div>";
        assert_eq!(literal_links(page), Vec::<String>::new());
    }

    #[test]
    fn nested_blocks_end_at_their_own_closing_tag() {
        let page = "<div class=\"docblock\"><div><p>inner</p></div><p>[Kept]</p></div>\
                    <p>[Outside]</p>";
        assert_eq!(literal_links(page), ["[Kept]"]);
    }
}
