//! The tuning grammar: rules that map calls to algorithms, the same in
//! PCOLL_TUNE, in the file PCOLL_TUNE_FILE names, and in pcoll's built-in
//! defaults.
//!
//! ```text
//! rules  := rule { (newline | ';') rule }     '#' starts a comment
//! rule   := collective { condition } target
//! condition := key cmp number                 key: p (communicator size),
//!                                             bytes (see below), nodes
//!            | 'op=commutative' | 'op=noncommutative'
//!            | 'mpi=' maker                   the host MPI: mpich, mvapich,
//!                                             intel or openmpi
//! cmp    := '<' | '<=' | '>' | '>=' | '='
//! number := digits [ K | M | G ]              binary units (64K = 65536)
//! target := 'mpi' | algorithm [ ':' key=value { ',' key=value } ]
//! ```
//!
//! Example: `allreduce bytes<8K recursive_doubling; allreduce p>=4 ring`.
//! `bytes` is the vector (Reduce, Allreduce), the message (Bcast), or the
//! largest block (Gatherv). Rules are tried in order; the first whose
//! conditions hold and whose algorithm accepts the call decides.

use std::fmt;

use crate::algos::{self, Algorithm, Params};
use crate::core::types::Coll;

/// A comparison of one call property with a number.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cmp {
    Lt,
    Le,
    Gt,
    Ge,
    Eq,
}

impl Cmp {
    fn holds(self, x: usize, v: usize) -> bool {
        match self {
            Cmp::Lt => x < v,
            Cmp::Le => x <= v,
            Cmp::Gt => x > v,
            Cmp::Ge => x >= v,
            Cmp::Eq => x == v,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Cond {
    Procs(Cmp, usize),
    Bytes(Cmp, usize),
    /// Nodes the communicator spans.
    Nodes(Cmp, usize),
    Commutative(bool),
    /// The host MPI's maker.
    Mpi(HostMpi),
}

/// Who made the host MPI, as a rule names it (`mpi=intel`): the same ABI
/// family can move data at different speeds, and a rule can say where
/// the host's own point-to-point beats pcoll's node layer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HostMpi {
    Mpich,
    Mvapich,
    Intel,
    OpenMpi,
}

impl HostMpi {
    /// Each maker with its name in the rules.
    pub const NAMES: [(&'static str, HostMpi); 4] = [
        ("mpich", HostMpi::Mpich),
        ("mvapich", HostMpi::Mvapich),
        ("intel", HostMpi::Intel),
        ("openmpi", HostMpi::OpenMpi),
    ];

    /// Its name in the rules.
    pub fn name(self) -> &'static str {
        HostMpi::NAMES.iter().find(|&&(_, m)| m == self).map_or("", |&(n, _)| n)
    }
}

/// What a rule selects.
#[derive(Clone, Debug)]
pub enum Target {
    /// The host MPI's own collective.
    Mpi,
    Algo(&'static Algorithm, Params),
}

impl Target {
    pub fn name(&self) -> &'static str {
        match self {
            Target::Mpi => "mpi",
            Target::Algo(a, _) => a.name,
        }
    }
}

#[derive(Clone, Debug)]
pub struct Rule {
    pub coll: Coll,
    pub conds: Vec<Cond>,
    pub target: Target,
    /// 1-based line in its source, for messages.
    pub line: usize,
}

/// What a call looks like to the rules.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CallShape {
    pub coll: Coll,
    pub procs: usize,
    /// `None` when not known (a Gatherv at a rank without the layout).
    pub bytes: Option<usize>,
    pub commutative: bool,
    pub nodes: usize,
    /// `None` where pcoll does not know the host MPI's maker.
    pub mpi: Option<HostMpi>,
}

impl Rule {
    /// Whether the conditions hold; `None` if that depends on the unknown
    /// bytes.
    pub fn matches(&self, call: &CallShape) -> Option<bool> {
        if self.coll != call.coll {
            return Some(false);
        }
        let mut unknown = false;
        for cond in &self.conds {
            let holds = match *cond {
                Cond::Procs(cmp, v) => cmp.holds(call.procs, v),
                Cond::Nodes(cmp, v) => cmp.holds(call.nodes, v),
                Cond::Bytes(cmp, v) => match call.bytes {
                    Some(b) => cmp.holds(b, v),
                    None => {
                        unknown = true;
                        continue;
                    }
                },
                Cond::Commutative(c) => c == call.commutative,
                Cond::Mpi(m) => call.mpi == Some(m),
            };
            if !holds {
                return Some(false);
            }
        }
        if unknown {
            None
        } else {
            Some(true)
        }
    }
}

/// A parse error: where, what was expected, what was found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParseError {
    /// `PCOLL_TUNE`, a file path, or `built-in`.
    pub source: String,
    pub line: usize,
    /// 1-based column of the offending token.
    pub column: usize,
    pub expected: String,
    pub found: String,
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} line {}, column {}: expected {}, found {:?}",
            self.source, self.line, self.column, self.expected, self.found
        )
    }
}

impl std::error::Error for ParseError {}

#[derive(Clone, Debug, Default)]
pub struct Rules {
    pub source: String,
    pub rules: Vec<Rule>,
}

/// Parses `64`, `8K`, `16M`, `1G` (sizes and counts in rules, parameters
/// and PCOLL_SHM_* settings alike).
pub(crate) fn number(text: &str) -> Option<usize> {
    let (digits, shift) = match text.as_bytes().last()? {
        b'K' | b'k' => (&text[..text.len() - 1], 10),
        b'M' | b'm' => (&text[..text.len() - 1], 20),
        b'G' | b'g' => (&text[..text.len() - 1], 30),
        _ => (text, 0),
    };
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse::<usize>().ok()?.checked_mul(1 << shift)
}

impl Rules {
    /// Parses rules from `text`; `source` names it in errors. Lines and
    /// `;` both separate rules; errors give the line and the column in it.
    pub fn parse(text: &str, source: &str) -> Result<Rules, ParseError> {
        let mut rules = Vec::new();
        for (index, line) in text.split('\n').enumerate() {
            let line = line.split('#').next().unwrap_or("");
            let mut start = 0;
            for item in line.split(';') {
                if !item.trim().is_empty() {
                    rules.push(parse_rule(line, start, item, index + 1, source)?);
                }
                start += item.len() + 1;
            }
        }
        Ok(Rules { source: source.to_string(), rules })
    }

    /// The sizes at which these rules' byte conditions may change their
    /// verdict: between two neighbours every byte condition holds alike.
    pub fn byte_bounds(&self) -> impl Iterator<Item = usize> + '_ {
        self.rules.iter().flat_map(|rule| &rule.conds).flat_map(|cond| match *cond {
            Cond::Bytes(_, v) => vec![v, v.saturating_add(1)],
            _ => Vec::new(),
        })
    }

    /// The first rule of `call.coll` that surely matches and whose target
    /// accepts the call (`accepts`), with its index; `Err(())` if before it
    /// a rule's match depends on the unknown bytes.
    #[allow(clippy::result_unit_err)]
    pub fn pick(&self, call: &CallShape, accepts: impl Fn(&Target) -> bool) -> Result<Option<(usize, &Rule)>, ()> {
        for (i, rule) in self.rules.iter().enumerate() {
            match rule.matches(call) {
                Some(true) if accepts(&rule.target) => return Ok(Some((i, rule))),
                Some(_) => {}
                None => return Err(()),
            }
        }
        Ok(None)
    }
}

/// Byte offsets of the whitespace-separated tokens of `s`.
fn tokens(s: &str) -> Vec<(usize, &str)> {
    let mut out = Vec::new();
    let mut start = None;
    for (i, c) in s.char_indices() {
        match (c.is_whitespace(), start) {
            (true, Some(st)) => {
                out.push((st, &s[st..i]));
                start = None;
            }
            (false, None) => start = Some(i),
            _ => {}
        }
    }
    if let Some(st) = start {
        out.push((st, &s[st..]));
    }
    out
}

/// Parses `item`, which starts at byte `start` of `text` (its line).
fn parse_rule(text: &str, start: usize, item: &str, line: usize, source: &str) -> Result<Rule, ParseError> {
    let toks = tokens(item);
    let err = |at: usize, expected: &str, found: &str| ParseError {
        source: source.to_string(),
        line,
        column: text[..start + at].chars().count() + 1,
        expected: expected.to_string(),
        found: found.to_string(),
    };
    let (at, first) = toks[0];
    let coll = Coll::ALL
        .into_iter()
        .find(|c| c.name() == first)
        .ok_or_else(|| err(at, "a collective (allreduce, reduce, bcast, gatherv)", first))?;
    let Some(&(last_at, last)) = toks.last().filter(|_| toks.len() > 1) else {
        return Err(err(item.len(), "conditions and an algorithm after the collective", ""));
    };
    let mut conds = Vec::new();
    for &(at, tok) in &toks[1..toks.len() - 1] {
        conds.push(parse_cond(tok).map_err(|expected| err(at, &expected, tok))?);
    }
    let target = parse_target(coll, last).map_err(|expected| err(last_at, &expected, last))?;
    Ok(Rule { coll, conds, target, line })
}

fn parse_cond(tok: &str) -> Result<Cond, String> {
    const EXPECTED: &str = "a condition: p, bytes or nodes, then <, <=, >, >= or =, then a number \
                            (p<8, bytes>=64K, nodes=2), or op=commutative, op=noncommutative, or \
                            mpi=mpich, mvapich, intel, openmpi";
    let key_end = tok.find(['<', '>', '=']).ok_or(EXPECTED)?;
    let (key, rest) = tok.split_at(key_end);
    match key {
        "op" => {
            return match rest {
                "=commutative" => Ok(Cond::Commutative(true)),
                "=noncommutative" => Ok(Cond::Commutative(false)),
                _ => Err("op=commutative or op=noncommutative".to_string()),
            }
        }
        "mpi" => {
            let name = rest.strip_prefix('=').unwrap_or("");
            return HostMpi::NAMES
                .iter()
                .find(|(n, _)| *n == name)
                .map(|&(_, m)| Cond::Mpi(m))
                .ok_or_else(|| "mpi=mpich, mpi=mvapich, mpi=intel or mpi=openmpi".to_string());
        }
        "p" | "bytes" | "nodes" => {}
        _ => return Err(EXPECTED.to_string()),
    }
    // `rest` starts with '<', '>' or '='.
    let (cmp, len) = match rest.as_bytes() {
        [b'<', b'=', ..] => (Cmp::Le, 2),
        [b'>', b'=', ..] => (Cmp::Ge, 2),
        [b'<', ..] => (Cmp::Lt, 1),
        [b'>', ..] => (Cmp::Gt, 1),
        _ => (Cmp::Eq, 1),
    };
    let v = number(&rest[len..])
        .ok_or_else(|| format!("a number (digits with an optional K, M or G) after {key}{}", &rest[..len]))?;
    Ok(match key {
        "p" => Cond::Procs(cmp, v),
        "bytes" => Cond::Bytes(cmp, v),
        _ => Cond::Nodes(cmp, v),
    })
}

/// `mpi` or `algorithm[:k=v,...]` of `coll`.
pub fn parse_target(coll: Coll, text: &str) -> Result<Target, String> {
    if text == "mpi" {
        return Ok(Target::Mpi);
    }
    let (name, args) = match text.split_once(':') {
        Some((name, args)) => (name, Some(args)),
        None => (text, None),
    };
    let algo = algos::find(coll, name).ok_or_else(|| format!("mpi or an algorithm: {}", names(coll)))?;
    let mut params = algo.default_params();
    for arg in args.into_iter().flat_map(|a| a.split(',')).filter(|a| !a.is_empty()) {
        let (key, val) = arg.split_once('=').ok_or_else(|| format!("key=value parameters, not {arg:?}"))?;
        let idx = algo.params.iter().position(|p| p.name == key).ok_or_else(|| {
            let keys: Vec<&str> = algo.params.iter().map(|p| p.name).collect();
            format!(
                "a parameter of {} ({})",
                algo.name,
                if keys.is_empty() { "it has none".into() } else { keys.join(", ") }
            )
        })?;
        let spec = &algo.params[idx];
        let v = number(val).ok_or_else(|| format!("a whole number (K, M, G allowed) for {key}"))? as u64;
        if v < spec.min || v > spec.max {
            return Err(format!("{key} in {}..{}", spec.min, spec.max));
        }
        params[idx] = v;
    }
    Ok(Target::Algo(algo, params))
}

fn names(coll: Coll) -> String {
    algos::for_coll(coll).map(|a| a.name).collect::<Vec<_>>().join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(coll: Coll, procs: usize, bytes: Option<usize>) -> CallShape {
        CallShape { coll, procs, bytes, commutative: true, nodes: 1, mpi: None }
    }

    #[test]
    fn parses_and_picks_in_order() {
        let text = "# defaults\nallreduce bytes<8K recursive_doubling\nallreduce p>=4 op=commutative ring; allreduce rabenseifner\nbcast mpi";
        let rules = Rules::parse(text, "test").unwrap();
        assert_eq!(rules.rules.len(), 4);
        let pick = |c: CallShape| rules.pick(&c, |_| true).unwrap().map(|(_, r)| r.target.name());
        assert_eq!(pick(call(Coll::Allreduce, 8, Some(100))), Some("recursive_doubling"));
        assert_eq!(pick(call(Coll::Allreduce, 8, Some(8192))), Some("ring"));
        assert_eq!(pick(call(Coll::Allreduce, 2, Some(8192))), Some("rabenseifner"));
        assert_eq!(pick(call(Coll::Bcast, 2, Some(1))), Some("mpi"));
        assert_eq!(pick(call(Coll::Gatherv, 2, Some(1))), None);
        // A non-commutative call skips the ring rule; a refusing algorithm too.
        let nc = CallShape { commutative: false, ..call(Coll::Allreduce, 8, Some(1 << 20)) };
        assert_eq!(pick(nc), Some("rabenseifner"));
        let not_ring = rules.pick(&call(Coll::Allreduce, 8, Some(1 << 20)), |t| t.name() != "ring").unwrap();
        assert_eq!(not_ring.map(|(i, _)| i), Some(2));
        // Unknown bytes: undecidable only if a bytes rule comes first.
        assert!(rules.pick(&call(Coll::Allreduce, 8, None), |_| true).is_err());
        assert_eq!(pick(call(Coll::Bcast, 2, None)), Some("mpi"));
        // Parameters, units and comparisons.
        let r = Rules::parse("reduce p=3 bytes>1M nodes>=2 knomial:k=8", "t").unwrap();
        assert_eq!(
            r.rules[0].conds,
            vec![Cond::Procs(Cmp::Eq, 3), Cond::Bytes(Cmp::Gt, 1 << 20), Cond::Nodes(Cmp::Ge, 2)]
        );
        assert!(!r.rules[0].matches(&call(Coll::Reduce, 3, Some(2 << 20))).unwrap());
        assert!(matches!(&r.rules[0].target, Target::Algo(a, p) if a.name == "knomial" && p[..] == [8]));
        // The host MPI's maker: holds only under that maker, never where
        // it is unknown.
        let r = Rules::parse("bcast mpi=intel binomial; bcast mpi=openmpi mpi", "t").unwrap();
        assert_eq!(r.rules[0].conds, vec![Cond::Mpi(HostMpi::Intel)]);
        let under = |mpi| CallShape { mpi, ..call(Coll::Bcast, 2, Some(8)) };
        let picks = |mpi| r.pick(&under(mpi), |_| true).unwrap().map(|(i, _)| i);
        assert_eq!(picks(Some(HostMpi::Intel)), Some(0));
        assert_eq!(picks(Some(HostMpi::OpenMpi)), Some(1));
        assert_eq!(picks(Some(HostMpi::Mpich)), None);
        assert_eq!(picks(None), None);
        assert!(HostMpi::NAMES.iter().all(|&(name, m)| m.name() == name));
    }

    #[test]
    fn errors_name_the_place_and_what_was_expected() {
        let cases = [
            ("allreduce bytes<8X ring", 1, 11, "a number"),
            ("allreduce ring\nreduce p<<2 binomial", 2, 8, "a number"),
            ("alreduce ring", 1, 1, "a collective"),
            ("allreduce ring", 1, 0, ""),
            ("bcast size<4 binomial", 1, 7, "a condition"),
            ("bcast bogus", 1, 7, "mpi or an algorithm: binomial"),
            ("reduce knomial:k=9", 1, 8, "k in 2..8"),
            ("reduce knomial:q=2", 1, 8, "a parameter of knomial (k)"),
            ("gatherv", 1, 8, "conditions and an algorithm"),
            ("bcast p<2 binomial;  bcast p<=x binomial", 1, 28, "a number"),
        ];
        for (text, line, column, expected) in cases {
            match Rules::parse(text, "PCOLL_TUNE") {
                Ok(_) if column == 0 => {}
                Ok(r) => panic!("{text:?} parsed: {r:?}"),
                Err(e) => {
                    assert_eq!((e.line, e.column), (line, column), "{text:?}: {e}");
                    assert!(e.expected.starts_with(expected), "{text:?}: {e}");
                    assert!(e.to_string().starts_with("PCOLL_TUNE line"), "{e}");
                }
            }
        }
    }

    /// Every way a rule can be malformed, one case per error path of the
    /// parser: the line, the column of the offending token (in characters),
    /// what was expected and what was found.
    #[test]
    fn every_parse_error_names_line_column_expected_and_found() {
        let cases: &[(&str, usize, usize, &str, &str)] = &[
            // The collective.
            ("allgather binomial", 1, 1, "a collective (allreduce, reduce, bcast, gatherv)", "allgather"),
            ("  reduce", 1, 9, "conditions and an algorithm after the collective", ""),
            // Conditions: no comparison, unknown key, the op condition.
            ("reduce p binomial", 1, 8, "a condition: p, bytes or nodes", "p"),
            ("reduce count<4 binomial", 1, 8, "a condition: p, bytes or nodes", "count<4"),
            ("reduce op=sum binomial", 1, 8, "op=commutative or op=noncommutative", "op=sum"),
            ("reduce op<commutative binomial", 1, 8, "op=commutative or op=noncommutative", "op<commutative"),
            ("reduce mpi=cray binomial", 1, 8, "mpi=mpich, mpi=mvapich, mpi=intel or mpi=openmpi", "mpi=cray"),
            ("reduce mpi<intel binomial", 1, 8, "mpi=mpich, mpi=mvapich, mpi=intel or mpi=openmpi", "mpi<intel"),
            // Numbers: missing, bad unit, not digits, overflowing.
            ("reduce p< binomial", 1, 8, "a number (digits with an optional K, M or G) after p<", "p<"),
            (
                "reduce bytes>=8X binomial",
                1,
                8,
                "a number (digits with an optional K, M or G) after bytes>=",
                "bytes>=8X",
            ),
            ("reduce nodes=K binomial", 1, 8, "a number (digits with an optional K, M or G) after nodes=", "nodes=K"),
            ("reduce bytes<99999999999G binomial", 1, 8, "a number", "bytes<99999999999G"),
            ("reduce p<=-1 binomial", 1, 8, "a number", "p<=-1"),
            // The target: unknown algorithm, a condition instead of one,
            // parameters of mpi, malformed, unknown or out-of-range parameters.
            ("bcast p<4 bogus", 1, 11, "mpi or an algorithm: binomial", "bogus"),
            ("allreduce p<4", 1, 11, "mpi or an algorithm: recursive_doubling", "p<4"),
            ("bcast mpi:k=2", 1, 7, "mpi or an algorithm", "mpi:k=2"),
            ("reduce knomial:k", 1, 8, "key=value parameters, not \"k\"", "knomial:k"),
            ("reduce knomial:fanout=4", 1, 8, "a parameter of knomial (k)", "knomial:fanout=4"),
            ("reduce binomial:k=4", 1, 8, "a parameter of binomial (it has none)", "binomial:k=4"),
            ("reduce knomial:k=four", 1, 8, "a whole number (K, M, G allowed) for k", "knomial:k=four"),
            ("reduce knomial:k=1", 1, 8, "k in 2..8", "knomial:k=1"),
            // Lines: comments, blank lines and CRLF endings do not shift
            // them; a ';' starts a new rule on the same line.
            ("# tuned\r\n\r\nbcast binomial\r\nreduce p>2 op=commutative kary:k=9\r\n", 4, 27, "k in 2..8", "kary:k=9"),
            // Two targets: the first is read as a condition.
            ("reduce p>2 binomial kary", 1, 12, "a condition", "binomial"),
            ("bcast binomial; gatherv p>=2 bytes<1K  linear; reduce bogus", 1, 55, "mpi or an algorithm", "bogus"),
            // Columns count characters, not bytes (U+00A0 is whitespace).
            ("bcast\u{a0}p>1\u{a0}bogus", 1, 11, "mpi or an algorithm", "bogus"),
        ];
        for &(text, line, column, expected, found) in cases {
            let e = Rules::parse(text, "rules.txt").expect_err(text);
            assert_eq!((e.line, e.column), (line, column), "{text:?}: {e}");
            assert!(e.expected.starts_with(expected), "{text:?}: expected {expected:?}, got {e}");
            assert_eq!(e.found, found, "{text:?}: {e}");
            assert_eq!(e.source, "rules.txt");
            let shown = e.to_string();
            let head = format!("rules.txt line {line}, column {column}: expected {expected}");
            assert!(shown.starts_with(&head), "{shown}");
            assert!(shown.ends_with(&format!("found {found:?}")), "{shown}");
        }
    }

    #[test]
    fn well_formed_edge_cases_parse() {
        let text = "# only a comment\n\n;;\r\nreduce knomial:\nreduce op=noncommutative p>=2 nodes<2 binomial # tail";
        let rules = Rules::parse(text, "t").unwrap();
        assert_eq!(rules.rules.len(), 2);
        assert_eq!(rules.rules[1].line, 5);
        assert_eq!(rules.rules[1].conds[0], Cond::Commutative(false));
        assert!(Rules::parse("", "t").unwrap().rules.is_empty());
    }
}
