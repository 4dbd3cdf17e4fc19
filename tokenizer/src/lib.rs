//! What the two binaries need besides the main crate: the parts of `data_io tokenize` and
//! `data_io train-tokenizer` that live in the Python layer (finding the tokenizer file,
//! reading prefix_config.yaml, printing the outcome), redone here so that the binaries give
//! the same results without Python. The work itself is `data_io_core::tokenize::tokenize`
//! and `data_io_core::train::train`, the functions the Python extension calls.

use std::env;
use std::fmt::Write as _;
use std::fs;
use std::path::{Path, PathBuf};

use data_io_core::tokenize::{Status, TokenizeReport};

/// The file the original (and data_io) look for in a tokenizer folder.
pub const TOKENIZER_FILE: &str = "tokenizer.json";

/// The path of the tokenizer JSON named by `spec`: a file, a folder holding `tokenizer.json`,
/// or a Hugging Face Hub id already in the local Hub cache.
///
/// The original fetched Hub ids over HTTP; these binaries do not (the main crate is built
/// without network access), so an id is looked up where `huggingface_hub` caches it, which is
/// where `data_io tokenize --tokenizer-path ORG/NAME` puts it. The error says how to get it.
pub fn resolve_tokenizer(spec: &str) -> Result<PathBuf, String> {
    let path = Path::new(spec);
    if path.is_file() {
        return Ok(path.to_path_buf());
    }
    if path.is_dir() {
        let candidate = path.join(TOKENIZER_FILE);
        if candidate.is_file() {
            return Ok(candidate);
        }
        return Err(format!(
            "{} is a folder without {TOKENIZER_FILE}; pass the file itself",
            path.display()
        ));
    }
    let looks_local = path.extension().is_some_and(|e| e == "json")
        || path.is_absolute()
        || spec.starts_with('.');
    if looks_local || !is_hub_id(spec) {
        let here = env::current_dir()
            .map(|d| format!(" (relative to the current folder {})", d.display()))
            .unwrap_or_default();
        let relative = if path.is_absolute() {
            ""
        } else {
            here.as_str()
        };
        return Err(format!(
            "tokenizer {spec} does not exist{relative}; pass an existing tokenizer.json or a \
             folder holding one with --tokenizer-path"
        ));
    }
    if let Some(found) = hub_cache_file(spec) {
        return Ok(found);
    }
    Err(format!(
        "tokenizer {spec:?} is neither a local file or folder nor in the Hugging Face cache \
         ({}); this binary does not download. Fetch it once with `data_io tokenize ... \
         --tokenizer-path {spec}` (which downloads and caches it) or `hf download {spec} \
         {TOKENIZER_FILE} --local-dir DIR` and pass --tokenizer-path DIR",
        hub_cache_root().display()
    ))
}

/// `org/name` (one slash, neither part empty): the form of a Hub repository id.
fn is_hub_id(spec: &str) -> bool {
    match spec.split_once('/') {
        Some((org, name)) => !org.is_empty() && !name.is_empty() && !name.contains('/'),
        None => !spec.is_empty(),
    }
}

/// Where `huggingface_hub` keeps its cache: `HF_HUB_CACHE`, else `HF_HOME/hub`, else
/// `XDG_CACHE_HOME/huggingface/hub`, else `~/.cache/huggingface/hub` (its documented order).
fn hub_cache_root() -> PathBuf {
    let var = |name: &str| {
        env::var_os(name)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    };
    if let Some(cache) = var("HF_HUB_CACHE") {
        return cache;
    }
    if let Some(home) = var("HF_HOME") {
        return home.join("hub");
    }
    let cache = var("XDG_CACHE_HOME")
        .or_else(|| var("HOME").map(|home| home.join(".cache")))
        .unwrap_or_else(|| PathBuf::from(".cache"));
    cache.join("huggingface").join("hub")
}

/// `tokenizer.json` of the `main` revision of `repo_id` in the Hub cache, if it is there.
fn hub_cache_file(repo_id: &str) -> Option<PathBuf> {
    let folder = hub_cache_root().join(format!("models--{}", repo_id.replace('/', "--")));
    let revision = fs::read_to_string(folder.join("refs").join("main")).ok()?;
    let file = folder
        .join("snapshots")
        .join(revision.trim())
        .join(TOKENIZER_FILE);
    file.is_file().then_some(file)
}

/// The (prefix, max_per_file) rules of a `prefix_config.yaml`, checked as the Python layer
/// checks them (`data_io/prefix_config.py`), so that a file `data_io train-tokenizer` refuses
/// is refused here too, with the same explanation.
pub fn load_prefix_limits(path: &Path) -> Result<Vec<(String, Option<u64>)>, String> {
    let source = path.display();
    let text = fs::read_to_string(path).map_err(|e| {
        if e.kind() == std::io::ErrorKind::NotFound {
            let here = env::current_dir()
                .map(|d| format!(" (relative to the current folder {})", d.display()))
                .unwrap_or_default();
            format!(
                "prefix config {source} does not exist{here}; pass --prefix-config FILE, or \
                 --prefix-config none to use every text"
            )
        } else {
            format!("cannot read prefix config {source}: {e}")
        }
    })?;
    let data: serde_yaml::Value =
        serde_yaml::from_str(&text).map_err(|e| format!("{source} is not valid YAML: {e}"))?;
    parse_prefix_limits(&data, &source.to_string())
}

const RULE_FIELDS: [&str; 4] = ["prefix", "max_per_file", "long_context", "repeat"];

fn parse_prefix_limits(
    data: &serde_yaml::Value,
    source: &str,
) -> Result<Vec<(String, Option<u64>)>, String> {
    use serde_yaml::Value;
    let items = match data {
        Value::Null => return Ok(Vec::new()),
        Value::Sequence(items) => items,
        other => {
            return Err(format!(
                "{source}: the top level must be a list of rules ('- prefix: ...'), got {}",
                yaml_kind(other)
            ))
        }
    };
    let mut rules: Vec<(String, Option<u64>)> = Vec::with_capacity(items.len());
    for (index, item) in items.iter().enumerate() {
        let position = index + 1;
        let Value::Mapping(map) = item else {
            return Err(format!(
                "{source}: item {position} is {}; every item must be a mapping such as \
                 '- prefix: flan__' with optional max_per_file, long_context, repeat",
                yaml_kind(item)
            ));
        };
        let prefix = match map.get("prefix") {
            Some(Value::String(prefix)) if !prefix.is_empty() => prefix.clone(),
            other => {
                return Err(format!(
                    "{source}: item {position}: 'prefix' is missing or not a non-empty string \
                     ({other:?})"
                ))
            }
        };
        let at = format!("{source}: item {position} (prefix {prefix:?})");
        let mut unknown: Vec<String> = map
            .keys()
            .map(|key| {
                key.as_str()
                    .map_or_else(|| format!("{key:?}"), str::to_owned)
            })
            .filter(|key| !RULE_FIELDS.contains(&key.as_str()))
            .collect();
        unknown.sort();
        if !unknown.is_empty() {
            return Err(format!(
                "{at}: unknown field(s) {}; allowed: {}",
                unknown.join(", "),
                RULE_FIELDS.join(", ")
            ));
        }
        let max_per_file = match map.get("max_per_file") {
            None | Some(Value::Null) => None,
            Some(Value::Number(n)) if n.as_u64().is_some() => n.as_u64(),
            Some(other) => {
                return Err(format!(
                    "{at}: max_per_file must be a non-negative integer or null (no cap), got \
                     {other:?}"
                ))
            }
        };
        match map.get("long_context") {
            None => {}
            Some(Value::String(mode)) if mode == "truncate" || mode == "drop" => {}
            Some(other) => {
                return Err(format!(
                    "{at}: long_context must be 'truncate' or 'drop', got {other:?}"
                ))
            }
        }
        match map.get("repeat") {
            None => {}
            Some(Value::Number(n)) if n.as_u64().is_some_and(|r| r >= 1) => {}
            Some(other) => {
                return Err(format!(
                    "{at}: repeat must be an integer >= 1, got {other:?}"
                ))
            }
        }
        // A later rule whose prefix an earlier one already matches can never apply.
        if let Some((earlier, (earlier_prefix, _))) = rules
            .iter()
            .enumerate()
            .find(|(_, (earlier, _))| prefix.starts_with(earlier.as_str()))
        {
            let earlier = earlier + 1;
            return Err(format!(
                "{source}: item {position} (prefix {prefix:?}) can never apply: item {earlier} \
                 (prefix {earlier_prefix:?}) comes first and matches every name it matches; \
                 move item {position} above item {earlier} or remove it"
            ));
        }
        rules.push((prefix, max_per_file));
    }
    Ok(rules)
}

fn yaml_kind(value: &serde_yaml::Value) -> &'static str {
    use serde_yaml::Value;
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Sequence(_) => "a list",
        Value::Mapping(_) => "a mapping",
        Value::Tagged(_) => "a tagged value",
    }
}

/// The condition map of `--conditions TAG=TOKEN,...` (clap has split it at the commas), in
/// the order given; empty items are ignored, as `data_io tokenize` does.
pub fn parse_conditions(items: &[String]) -> Result<Vec<(String, String)>, String> {
    let mut pairs: Vec<(String, String)> = Vec::new();
    for item in items.iter().map(|i| i.trim()).filter(|i| !i.is_empty()) {
        let (tag, token) = item.split_once('=').unwrap_or((item, ""));
        if tag.is_empty() || token.is_empty() {
            return Err(format!(
                "--conditions item {item:?} is not TAG=TOKEN (e.g. direct=<|object_ref_start|>)"
            ));
        }
        if pairs.iter().any(|(seen, _)| seen == tag) {
            return Err(format!("--conditions gives tag {tag:?} twice"));
        }
        pairs.push((tag.to_owned(), token.to_owned()));
    }
    Ok(pairs)
}

/// What `data_io tokenize` reports as a failure, in one message (its `raise_for_failures`):
/// failed files, a MIXED output, or no row at all. `None` when the run succeeded.
pub fn tokenize_failure(report: &TokenizeReport) -> Option<String> {
    let failed: Vec<_> = report
        .files
        .iter()
        .filter(|f| f.status == Status::Failed)
        .collect();
    let mut message = String::new();
    if !failed.is_empty() {
        let _ = writeln!(
            message,
            "{} of {} file(s) failed; the other outputs are intact and a re-run redoes only \
             what is missing:",
            failed.len(),
            report.files.len()
        );
        for file in &failed {
            let error = file.error.as_deref().unwrap_or(file.reason.as_str());
            let _ = writeln!(message, "  - {error}");
        }
    }
    if !report.mixed.is_empty() {
        let _ = writeln!(
            message,
            "the output {} is MIXED: {} task folder(s) do not match its tokenizer_info.json \
             (tokenizer {}); a model trained on it sees two tokenizations:",
            report.output,
            report.mixed.len(),
            report.tokenizer_path
        );
        for task in &report.mixed {
            let _ = writeln!(message, "  - {task}");
        }
        if let Some(command) = &report.repair_command {
            let _ = writeln!(
                message,
                "Repair it (fix the failed files first, if any) with:\n  {command}"
            );
        }
    }
    if message.is_empty() && report.kept.is_empty() && report.files.iter().all(|f| f.rows == 0) {
        let bad: u64 = report.files.iter().map(|f| f.bad_rows).sum();
        let why = if bad > 0 {
            format!("all {bad} row(s) were bad and skipped")
        } else {
            "every file is empty".to_owned()
        };
        let _ = write!(
            message,
            "no rows at all: {} input file(s) under {} and {why}; the output {} holds no \
             training data. Check the inputs (run with --on-error fail to see the first bad row)",
            report.files.len(),
            report.inputs.join(", "),
            report.output
        );
    }
    (!message.is_empty()).then(|| message.trim_end().to_owned())
}

/// A few lines on what a tokenize run did (the totals of `data_io tokenize`'s summary).
pub fn tokenize_summary(report: &TokenizeReport) -> String {
    let count = |status: Status| report.files.iter().filter(|f| f.status == status).count();
    let done = report
        .files
        .iter()
        .filter(|f| f.status == Status::Tokenized);
    let (rows, tokens, bytes) = done.fold((0u64, 0u64, 0u64), |(r, t, b), f| {
        (r + f.rows, t + f.tokens, b + f.bytes)
    });
    let mut text = format!(
        "tokenizer -> {}  (tokenizer {}, vocab {}, tokens {}, {} threads, encoder {})\n\
         {} files: {} tokenized, {} unchanged, {} failed; the output holds {} task(s), {} rows, \
         {} tokens\nthis run: {rows} rows, {tokens} tokens from {:.1} MB in {:.2} s",
        report.output,
        report.tokenizer_path,
        report.vocab_size,
        report.token_dtype,
        report.threads,
        report.encoder,
        report.files.len(),
        count(Status::Tokenized),
        count(Status::Unchanged),
        count(Status::Failed),
        report.output_tasks,
        report.output_rows,
        report.output_tokens,
        bytes as f64 / 1e6,
        report.seconds,
    );
    if !report.removed_orphans.is_empty() {
        let _ = write!(
            text,
            "\nremoved {} orphan folder(s) (source file gone): {}",
            report.removed_orphans.len(),
            report.removed_orphans.join(", ")
        );
    }
    if !report.skipped_files.is_empty() {
        let _ = write!(
            text,
            "\nskipped {} input file(s) that are not .jsonl, .jsonl.gz, .jsonl.zst or .parquet, \
             e.g. {}",
            report.skipped_files.len(),
            report
                .skipped_files
                .iter()
                .take(3)
                .cloned()
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits(yaml: &str) -> Result<Vec<(String, Option<u64>)>, String> {
        parse_prefix_limits(
            &serde_yaml::from_str(yaml).map_err(|e| e.to_string())?,
            "p.yaml",
        )
    }

    #[test]
    fn prefix_rules_are_read_in_order_with_their_caps() {
        let rules = limits("- prefix: a__\n  max_per_file: 5\n- prefix: b__\n  repeat: 2\n");
        assert_eq!(
            rules,
            Ok(vec![("a__".to_owned(), Some(5)), ("b__".to_owned(), None)])
        );
        assert_eq!(limits(""), Ok(vec![]));
    }

    #[test]
    fn bad_prefix_rules_are_refused_naming_the_item() {
        let err = |yaml: &str| limits(yaml).unwrap_err();
        assert!(err("- prefix: a\n  max_per_fil: 3\n").contains("unknown field(s) max_per_fil"));
        assert!(err("- prefix: a\n  max_per_file: -1\n").contains("item 1 (prefix \"a\")"));
        assert!(err("- prefix: a\n- prefix: ab\n").contains("item 2 (prefix \"ab\") can never"));
        assert!(err("prefix: a\n").contains("top level must be a list"));
        assert!(err("- prefix: a\n  long_context: cut\n").contains("long_context"));
    }

    #[test]
    fn conditions_keep_their_order_and_refuse_bad_items() {
        let items = [
            "cot=<|b|>".to_owned(),
            "direct=<|a|>".to_owned(),
            String::new(),
        ];
        assert_eq!(
            parse_conditions(&items),
            Ok(vec![
                ("cot".to_owned(), "<|b|>".to_owned()),
                ("direct".to_owned(), "<|a|>".to_owned())
            ])
        );
        assert!(parse_conditions(&["cot".to_owned()]).is_err());
        assert!(parse_conditions(&["a=x".to_owned(), "a=y".to_owned()]).is_err());
    }

    #[test]
    fn hub_ids_are_told_apart_from_paths() {
        assert!(is_hub_id("Qwen/Qwen3-Next-80B-A3B-Instruct"));
        assert!(!is_hub_id("a/b/c"));
        let err = resolve_tokenizer("./missing/tokenizer.json").unwrap_err();
        assert!(err.contains("does not exist"), "{err}");
    }
}
