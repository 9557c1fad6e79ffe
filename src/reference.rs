//! The reference pages generated from the code's own tables:
//! docs/configuration.md from [`SETTINGS`](crate::select::settings) and
//! docs/algorithms.md from [`ALGORITHMS`](crate::algos::ALGORITHMS) and
//! the built-in rules. The prose around the tables lives in
//! docs/templates/; `pcoll config --markdown` and `pcoll algorithms
//! --markdown` print the pages, and a
//! test fails when the files in docs/ differ from them, or when README.md
//! does not hold the table of the common settings (`pcoll config
//! --readme-table`).

use crate::algos::{self, Algorithm};
use crate::core::types::Coll;
use crate::select::defaults;
use crate::select::rules::{Cmp, Cond, Rules, Target};
use crate::select::settings::{self, number_text};

const CONFIGURATION: &str = include_str!("../docs/templates/configuration.md");
const ALGORITHMS_PAGE: &str = include_str!("../docs/templates/algorithms.md");

/// docs/configuration.md.
pub fn configuration_page() -> String {
    fill(CONFIGURATION, "<!-- the settings table: src/select/settings.rs -->", &settings::markdown_table(None))
}

/// README.md's table of the settings most users need
/// ([`settings::COMMON`]), its links pointing into docs/.
pub fn readme_table() -> String {
    let table = settings::markdown_table(Some(settings::COMMON)).replace("](#", "](docs/configuration.md#");
    let mut parts = table.split("](");
    let mut out = parts.next().unwrap_or_default().to_string();
    for part in parts {
        let within_docs = part.starts_with("docs/") || part.starts_with("http");
        out += if within_docs { "](" } else { "](docs/" };
        out += part;
    }
    out
}

/// docs/algorithms.md.
pub fn algorithms_page() -> String {
    Coll::ALL.into_iter().fold(ALGORITHMS_PAGE.to_string(), |page, coll| {
        let marker = format!("<!-- the {} table: src/algos/mod.rs, src/select/defaults.rs -->", coll.name());
        fill(&page, &marker, &algorithm_table(coll))
    })
}

/// `template` with `marker` replaced by `table` (without its last newline:
/// the template's own follows).
fn fill(template: &str, marker: &str, table: &str) -> String {
    assert!(template.contains(marker), "the template has {marker}");
    template.replace(marker, table.trim_end())
}

fn algorithm_table(coll: Coll) -> String {
    let mut out = String::from(
        "| forcing value | parameters | scope | what it does | built-in rules | seed |\n|---|---|---|---|---|---|\n",
    );
    for algo in algos::for_coll(coll) {
        let params: Vec<String> = algo
            .params
            .iter()
            .map(|p| format!("`{}`={}..{} (default {}): {}", p.name, p.min, p.max, p.default, p.help))
            .collect();
        out += &format!(
            "| `{}` | {} | {} | {} | {} | {} |\n",
            algo.name,
            params.join("; "),
            algo.imp.scope(),
            algo.summary,
            chosen_when(algo),
            algo.seed.unwrap_or(""),
        );
    }
    out
}

/// The built-in rules that pick `algo`, as conditions; "never" if none.
fn chosen_when(algo: &Algorithm) -> String {
    let picks = |rules: &Rules| -> Vec<String> {
        rules
            .rules
            .iter()
            .filter(|r| r.coll == algo.coll && matches!(r.target, Target::Algo(a, _) if std::ptr::eq(a, algo)))
            .map(|r| match r.conds.is_empty() {
                true => "otherwise".to_string(),
                false => r.conds.iter().map(condition).collect::<Vec<_>>().join(", "),
            })
            .collect()
    };
    let (plain, reproducible) = (picks(defaults::rules()), picks(defaults::reproducible_rules()));
    let mut all: Vec<String> = plain;
    all.extend(reproducible.into_iter().map(|c| format!("reproducible: {c}")));
    match all.is_empty() {
        true => "never".into(),
        false => all.join("; "),
    }
}

fn condition(cond: &Cond) -> String {
    let cmp = |c: &Cmp| match c {
        Cmp::Lt => "<",
        Cmp::Le => "≤",
        Cmp::Gt => ">",
        Cmp::Ge => "≥",
        Cmp::Eq => "=",
    };
    match cond {
        Cond::Procs(c, v) => format!("p {} {v}", cmp(c)),
        Cond::Bytes(c, v) => format!("bytes {} {}", cmp(c), number_text(*v)),
        Cond::Nodes(c, v) => format!("nodes {} {v}", cmp(c)),
        Cond::Commutative(true) => "commutative".into(),
        Cond::Commutative(false) => "not commutative".into(),
        Cond::Mpi(m) => format!("host MPI {}", m.name()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The command that rewrites a page, for the failure message.
    fn out_of_date(page: &str, command: &str) -> String {
        format!("docs/{page} is out of date: run `cargo run --no-default-features --features tool --bin pcoll -- {command} > docs/{page}`")
    }

    #[test]
    fn docs_configuration_md_is_the_output_of_pcoll_config_markdown() {
        let file = include_str!("../docs/configuration.md");
        assert!(file == configuration_page(), "{}", out_of_date("configuration.md", "config --markdown"));
        assert!(settings::SETTINGS.iter().all(|s| file.contains(&format!("| `{}` |", s.name))));
    }

    #[test]
    fn the_readme_lists_the_common_settings_as_the_reference_does() {
        let table = readme_table();
        assert!(
            include_str!("../README.md").contains(&table),
            "README.md's table of variables is out of date: replace it with the output of `pcoll config \\
             --readme-table`:\n{table}"
        );
    }

    #[test]
    fn docs_algorithms_md_is_the_output_of_pcoll_algorithms_markdown() {
        let file = include_str!("../docs/algorithms.md");
        assert!(file == algorithms_page(), "{}", out_of_date("algorithms.md", "algorithms --markdown"));
        assert!(crate::algos::ALGORITHMS.iter().all(|a| file.contains(&format!("| `{}` |", a.name))));
    }
}
