//! Every `PCOLL_*` setting in one table: its name, what it accepts, its
//! default (shown from [`Config::default`], so it cannot drift from the
//! code), what a value does to the [`Config`], and its documentation.
//! The parser ([`Config::from_os`]), the list of known names (typo
//! suggestions, the ranks' [`super::config::Fingerprint`]) and the
//! reference (`pcoll config --markdown`, which is docs/configuration.md)
//! all come from [`SETTINGS`].

use super::config::{accepted_choices, parse_choice, Config, GathervMode, LogLevel, ShmTree, VerifyMode};
use super::rules::{self, Rules};
use crate::core::types::Coll;
use crate::shm::prefetch::AHEAD_FROM;

/// One `PCOLL_*` variable.
pub struct Setting {
    pub name: &'static str,
    pub accepts: Accepts,
    /// The value in `cfg`, as the reference shows it (applied to the
    /// default configuration: the default).
    pub show: fn(&Config) -> String,
    /// Applies a value that [`Setting::accepts`] let through; an error
    /// says what is wrong with it beyond that.
    pub set: fn(&mut Config, Value<'_>) -> Result<(), String>,
    /// One paragraph of Markdown: what the setting does.
    pub doc: &'static str,
}

/// What a setting accepts, which also parses it.
pub enum Accepts {
    /// `0` or `1`.
    Flag,
    /// A whole number with an optional binary K, M or G suffix, within
    /// `min..=max`; `zero` says what 0 means where it is special.
    Number { min: usize, max: usize, zero: Option<&'static str> },
    /// One of these words, in any case.
    Word(&'static [&'static str]),
    /// `auto`, `mpi` or one of the collective's algorithms.
    Choice(Coll),
    /// Text, described so.
    Text(&'static str),
}

/// A value as [`Accepts`] parsed it.
#[derive(Clone, Copy)]
pub enum Value<'a> {
    Flag(bool),
    Number(usize),
    /// The word as the table spells it.
    Word(&'static str),
    Text(&'a str),
}

impl Value<'_> {
    // The table pairs each setter with its kind of value, so another kind
    // is a bug in the table (every row is exercised by the tests).
    fn flag(self) -> bool {
        match self {
            Value::Flag(on) => on,
            _ => unreachable!("a flag setting"),
        }
    }

    fn number(self) -> usize {
        match self {
            Value::Number(n) => n,
            _ => unreachable!("a number setting"),
        }
    }

    fn word(self) -> &'static str {
        match self {
            Value::Word(w) => w,
            _ => unreachable!("a word setting"),
        }
    }

    fn text(&self) -> &str {
        match self {
            Value::Text(t) => t,
            _ => unreachable!("a text setting"),
        }
    }
}

impl Accepts {
    /// Parses `value`; `None` if it is not accepted.
    pub fn parse<'a>(&self, value: &'a str) -> Option<Value<'a>> {
        let value = value.trim();
        match self {
            Accepts::Flag => match value {
                "1" => Some(Value::Flag(true)),
                "0" => Some(Value::Flag(false)),
                _ => None,
            },
            Accepts::Number { min, max, .. } => {
                rules::number(value).filter(|n| (min..=max).contains(&n)).map(Value::Number)
            }
            Accepts::Word(words) => words.iter().find(|w| w.eq_ignore_ascii_case(value)).map(|&w| Value::Word(w)),
            Accepts::Choice(_) | Accepts::Text(_) => Some(Value::Text(value)),
        }
    }

    /// What is accepted, for error messages: "0, 1", "4K..64M".
    pub fn text(&self) -> String {
        match self {
            Accepts::Flag => "0, 1".into(),
            Accepts::Number { min, max, zero: Some(zero) } if *min == 0 => {
                format!("0 ({zero}) or 1..{}", number_text(*max))
            }
            Accepts::Number { min, max, .. } => format!("{}..{}", number_text(*min), number_text(*max)),
            Accepts::Word(words) => words.join(", "),
            Accepts::Choice(coll) => accepted_choices(*coll),
            Accepts::Text(what) => what.to_string(),
        }
    }

    /// What is accepted, for the reference: "`4K` to `64M`".
    fn markdown(&self) -> String {
        match self {
            Accepts::Flag => "`0`, `1`".into(),
            Accepts::Number { min, max, zero: Some(zero) } if *min == 0 => {
                format!("`0` ({zero}), or `1` to `{}`", number_text(*max))
            }
            Accepts::Number { min, max, .. } => format!("`{}` to `{}`", number_text(*min), number_text(*max)),
            Accepts::Word(words) => words.iter().map(|w| format!("`{w}`")).collect::<Vec<_>>().join(", "),
            Accepts::Choice(_) => "`auto`, `mpi`, `<algorithm>[:key=value,...]` ([Algorithms](algorithms.md))".into(),
            Accepts::Text(what) => what.to_string(),
        }
    }
}

/// `n` as settings spell it: the largest binary unit that divides it
/// ("64K", "1G"), else the digits.
pub fn number_text(n: usize) -> String {
    [(30, "G"), (20, "M"), (10, "K")]
        .iter()
        .find(|&&(shift, _)| n >= 1 << shift && n.is_multiple_of(1 << shift))
        .map_or_else(|| n.to_string(), |&(shift, unit)| format!("{}{unit}", n >> shift))
}

fn flag(on: bool) -> String {
    String::from(if on { "1" } else { "0" })
}

fn choice_text(cfg: &Config, coll: Coll) -> String {
    use super::config::Choice;
    match &cfg.choices[coll.index()] {
        Choice::Auto => "auto".into(),
        Choice::Mpi => "mpi".into(),
        Choice::Force(algo, _) => algo.name.into(),
    }
}

fn set_choice(cfg: &mut Config, coll: Coll, value: &str) -> Result<(), String> {
    cfg.choices[coll.index()] = parse_choice(coll, value).map_err(|problem| problem.unwrap_or_default())?;
    Ok(())
}

fn parse_rules(text: &str, source: &str) -> Result<Rules, String> {
    Rules::parse(text, source).map_err(|e| e.to_string())
}

/// The sizes of the node layer that a setting takes whole.
const SIZE_MAX: usize = 1 << 30;

/// Every setting, in the reference's order.
pub static SETTINGS: &[Setting] = &[
    Setting {
        name: "PCOLL_ENABLE",
        accepts: Accepts::Flag,
        show: |c| flag(c.enable),
        set: |c, v| {
            c.enable = v.flag();
            Ok(())
        },
        doc: "`0`: every call goes straight to the host MPI (stock behaviour), and no other variable is read",
    },
    Setting {
        name: "PCOLL_ALLREDUCE",
        accepts: Accepts::Choice(Coll::Allreduce),
        show: |c| choice_text(c, Coll::Allreduce),
        set: |c, v| set_choice(c, Coll::Allreduce, v.text()),
        doc: "how MPI_Allreduce runs: `auto` lets pcoll choose per call, `mpi` always runs the host MPI's own \
              collective, an algorithm name forces it ([Forcing an algorithm](#forcing-an-algorithm))",
    },
    Setting {
        name: "PCOLL_REDUCE",
        accepts: Accepts::Choice(Coll::Reduce),
        show: |c| choice_text(c, Coll::Reduce),
        set: |c, v| set_choice(c, Coll::Reduce, v.text()),
        doc: "how MPI_Reduce runs, as `PCOLL_ALLREDUCE`",
    },
    Setting {
        name: "PCOLL_BCAST",
        accepts: Accepts::Choice(Coll::Bcast),
        show: |c| choice_text(c, Coll::Bcast),
        set: |c, v| set_choice(c, Coll::Bcast, v.text()),
        doc: "how MPI_Bcast runs, as `PCOLL_ALLREDUCE`",
    },
    Setting {
        name: "PCOLL_GATHERV",
        accepts: Accepts::Choice(Coll::Gatherv),
        show: |c| choice_text(c, Coll::Gatherv),
        set: |c, v| set_choice(c, Coll::Gatherv, v.text()),
        doc: "how MPI_Gatherv runs, as `PCOLL_ALLREDUCE`",
    },
    Setting {
        name: "PCOLL_TUNE",
        accepts: Accepts::Text("rules, see docs/configuration.md"),
        show: |c| c.tune.as_ref().map_or("unset".into(), |_| "rules".into()),
        set: |c, v| {
            c.tune = Some(parse_rules(v.text(), "PCOLL_TUNE")?);
            Ok(())
        },
        doc: "rules given inline ([Tuning rules](#tuning-rules)); tried before `PCOLL_TUNE_FILE` and the built-in \
              rules",
    },
    Setting {
        name: "PCOLL_TUNE_FILE",
        accepts: Accepts::Text("a readable rules file"),
        show: |c| c.tune_file.as_ref().map_or("unset".into(), |r| r.source.clone()),
        set: |c, v| {
            let path = v.text().trim();
            let text = std::fs::read_to_string(path).map_err(|e| format!("cannot read it: {e}"))?;
            c.tune_file = Some(parse_rules(&text, path)?);
            Ok(())
        },
        doc: "rules from a file (e.g. written by `pcoll tune`); every rank reads it",
    },
    Setting {
        name: "PCOLL_GATHERV_MODE",
        accepts: Accepts::Word(&["conservative", "aggressive"]),
        show: |c| {
            String::from(match c.gatherv_mode {
                GathervMode::Conservative => "conservative",
                GathervMode::Aggressive => "aggressive",
            })
        },
        set: |c, v| {
            c.gatherv_mode = match v.word() {
                "aggressive" => GathervMode::Aggressive,
                _ => GathervMode::Conservative,
            };
            Ok(())
        },
        doc: "how non-root ranks of a Gatherv learn what they need from the root's layout. `conservative`: the \
              root broadcasts its decision and layout, standard-conforming. `aggressive`: you promise that every \
              rank passes the root's `recvcounts`, `displs` and `recvtype`, so no broadcast is needed; a rank that \
              passes none while one is needed aborts the job",
    },
    Setting {
        name: "PCOLL_LOG",
        accepts: Accepts::Word(&["off", "error", "warn", "info", "debug", "trace"]),
        show: |c| format!("{:?}", c.log).to_lowercase(),
        set: |c, v| {
            c.log = match v.word() {
                "off" => LogLevel::Off,
                "error" => LogLevel::Error,
                "info" => LogLevel::Info,
                "debug" => LogLevel::Debug,
                "trace" => LogLevel::Trace,
                _ => LogLevel::Warn,
            };
            Ok(())
        },
        doc: "log level, on stderr; ranks may differ in it",
    },
    Setting {
        name: "PCOLL_STATS",
        accepts: Accepts::Flag,
        show: |c| flag(c.stats),
        set: |c, v| {
            c.stats |= v.flag();
            Ok(())
        },
        doc: "`1`: print a job-wide summary at MPI_Finalize ([Output](output.md))",
    },
    Setting {
        name: "PCOLL_STATS_FILE",
        accepts: Accepts::Text("a file path"),
        show: |c| c.stats_file.as_ref().map_or("unset".into(), |p| p.display().to_string()),
        set: |c, v| {
            let path = v.text().trim();
            if path.is_empty() {
                return Err("empty".into());
            }
            (c.stats_file, c.stats) = (Some(path.into()), true);
            Ok(())
        },
        doc: "write the summary to this file instead of stderr; implies the summary even if `PCOLL_STATS=0`",
    },
    Setting {
        name: "PCOLL_VERIFY",
        accepts: Accepts::Word(&["0", "1", "abort"]),
        show: |c| {
            String::from(match c.verify {
                None => "0",
                Some(VerifyMode::Report) => "1",
                Some(VerifyMode::Abort) => "abort",
            })
        },
        set: |c, v| {
            c.verify = match v.word() {
                "1" => Some(VerifyMode::Report),
                "abort" => Some(VerifyMode::Abort),
                _ => None,
            };
            Ok(())
        },
        doc: "compare every call pcoll runs with the host MPI's collective: `1` reports, `abort` also stops the \
              job at the first mismatch ([PCOLL_VERIFY](checking.md#pcoll_verify))",
    },
    Setting {
        name: "PCOLL_REPRODUCIBLE",
        accepts: Accepts::Flag,
        show: |c| flag(c.reproducible),
        set: |c, v| {
            c.reproducible = v.flag();
            Ok(())
        },
        doc: "`1`: Reduce and Allreduce run only canonical algorithms, which give bitwise-identical results \
              ([PCOLL_REPRODUCIBLE](checking.md#pcoll_reproducible))",
    },
    Setting {
        name: "PCOLL_CALIBRATE",
        accepts: Accepts::Flag,
        show: |c| flag(c.calibrate),
        set: |c, v| {
            c.calibrate = v.flag();
            Ok(())
        },
        doc: "`1`: at MPI_Init, world ranks 0 and 1 time pcoll's transport and kernels, and rank 0 prints \
              cost-model parameters for `pcoll model --model` (needs 2 or more ranks and `PCOLL_ENABLE=1`)",
    },
    Setting {
        name: "PCOLL_SETUP_AFTER",
        accepts: Accepts::Number { min: 0, max: 1 << 20, zero: None },
        show: |c| c.setup_after.to_string(),
        set: |c, v| {
            c.setup_after = v.number();
            Ok(())
        },
        doc: "calls on a new communicator that the host MPI runs before pcoll sets the communicator up (its \
              private duplicate, node discovery, segment); `0`: at the first call. Ignored (`0`) with \
              `PCOLL_REPRODUCIBLE=1` or an algorithm forced for a collective, which every call must run \
              ([Communicators](node-layer.md#communicators-set-up-and-memory))",
    },
    Setting {
        name: "PCOLL_SHM",
        accepts: Accepts::Flag,
        show: |c| flag(c.shm.enable),
        set: |c, v| {
            c.shm.enable = v.flag();
            Ok(())
        },
        doc: "`0`: no shared-memory segment; node and multi-node algorithms cannot run, and the point-to-point \
              rules apply",
    },
    Setting {
        name: "PCOLL_SHM_ZCOPY",
        accepts: Accepts::Flag,
        show: |c| flag(c.shm.zcopy),
        set: |c, v| {
            c.shm.zcopy = v.flag();
            Ok(())
        },
        doc: "`0`: no zero copy between processes (cross-memory attach); the `shm_zcopy` algorithms cannot run",
    },
    Setting {
        name: "PCOLL_SHM_BUDGET",
        accepts: Accepts::Number { min: 0, max: 1 << 40, zero: None },
        show: |c| c.shm.budget.map_or("half of `/dev/shm` among the host's ranks".into(), number_text),
        set: |c, v| {
            c.shm.budget = Some(v.number());
            Ok(())
        },
        doc: "bytes of `/dev/shm` one process may reserve for its parts of segments (live communicators' and \
              kept ones'); beyond it, new communicators run without the node layer \
              ([Budget](node-layer.md#budget))",
    },
    Setting {
        name: "PCOLL_RANKS_PER_NODE",
        accepts: Accepts::Number { min: 1, max: 1 << 20, zero: None },
        show: |c| c.shm.ranks_per_node.map_or("unset (real nodes)".into(), |k| k.to_string()),
        set: |c, v| {
            c.shm.ranks_per_node = Some(v.number());
            Ok(())
        },
        doc: "split each node into groups of this many consecutive `MPI_COMM_WORLD` ranks, which then count as \
              separate nodes (node emulation)",
    },
    Setting {
        name: "PCOLL_LEADERS",
        accepts: Accepts::Number { min: 1, max: 4096, zero: None },
        show: |c| c.shm.leaders.map_or("unset (4)".into(), |k| k.to_string()),
        set: |c, v| {
            c.shm.leaders = Some(v.number());
            Ok(())
        },
        doc: "leaders per node for `dpml` when its `leaders` parameter is 0; at most the smallest node's rank \
              count",
    },
    Setting {
        name: "PCOLL_SHM_CHUNK",
        accepts: Accepts::Number { min: 4 << 10, max: 64 << 20, zero: None },
        show: |c| number_text(c.shm.chunk),
        set: |c, v| {
            c.shm.chunk = v.number();
            Ok(())
        },
        doc: "bytes of the chunks moved through each of a rank's two chunk areas in the segment. This is the unit \
              of the node algorithms' copy-in (except `shm_flat` Allreduce; a `shm_flat` Reduce cuts vectors \
              shorter than four chunks into about four of at least 16 KiB), the largest `salar` chunk, and it \
              limits Gatherv zero copy and `hier` Gatherv to 16·p ≤ chunk",
    },
    Setting {
        name: "PCOLL_SHM_ALLREDUCE_CHUNK",
        accepts: Accepts::Number { min: 4 << 10, max: 64 << 20, zero: None },
        show: |c| number_text(c.shm.allreduce_chunk),
        set: |c, v| {
            c.shm.allreduce_chunk = v.number();
            Ok(())
        },
        doc: "bytes of the chunks of a `shm_flat` Allreduce. The chunk areas hold the larger of this and \
              `PCOLL_SHM_CHUNK`",
    },
    Setting {
        name: "PCOLL_SHM_ADAPT",
        accepts: Accepts::Flag,
        show: |c| flag(c.shm.adapt),
        set: |c, v| {
            c.shm.adapt = v.flag();
            Ok(())
        },
        doc: "`1`: a `shm_flat` Allreduce of 2 KiB or more times its calls and copies in with whichever stores, \
              streaming or ordinary, are faster on this machine now, a `shm_flat` or `shm_partition` Reduce of \
              4 KiB or more, and a `shm` Gatherv's blocks of 4 KiB or more, with those the root's timings favour, \
              a Bcast of 4 KiB or more through the chunk areas or the queue with those its readers' timings \
              favour, a `shm` Bcast moves the message by zero copy or, whichever the root has timed faster, \
              through the queue (below 256 KiB) or the pipeline, and a `shm_flat_zcopy` Reduce or Allreduce of 8 KiB \
              or more on hot buffers goes by zero copy only where rank 0 has timed it faster than flat \
              ([The shared-memory node layer](node-layer.md)); `0`: the Allreduce, Reduce, Gatherv and Bcast \
              copies follow `PCOLL_SHM_STREAM`, the `shm` Bcast uses zero copy, and `shm_flat_zcopy` zero copy \
              wherever the buffers are hot",
    },
    Setting {
        name: "PCOLL_SHM_SLOTS",
        accepts: Accepts::Number { min: 1, max: 4096, zero: None },
        show: |c| c.shm.slots.map_or("1024, fewer where the budget is small".into(), |n| n.to_string()),
        set: |c, v| {
            c.shm.slots = Some(v.number());
            Ok(())
        },
        doc: "`shm_queue`: slots per rank in the broadcast queue. By default 1024 (4 MiB of 4 KiB slots), so \
              that a set comes back to a reader only after its lines have left the reader's L2 (a root's stores \
              into lines a reader still holds wait for each), halved down to 256 until a rank's block fits a \
              quarter of the budget (`PCOLL_SHM_BUDGET`). The `shm` Bcast's messages from the root's last buffer \
              cycle through all of them, others through the first 512 (on cold buffers a larger queue's lines \
              come back from memory) ([The queue's size](node-layer.md#the-queues-size))",
    },
    Setting {
        name: "PCOLL_SHM_FRAGMENT",
        accepts: Accepts::Number { min: 0, max: 16 << 20, zero: Some("model") },
        show: |c| number_text(c.shm.fragment),
        set: |c, v| {
            c.shm.fragment = v.number();
            Ok(())
        },
        doc: "`shm_queue`: bytes per fragment (= slot size). `0`: a size per message from the queue model, page \
              multiples up to a slot of 4 KiB",
    },
    Setting {
        name: "PCOLL_SHM_SETS",
        accepts: Accepts::Number { min: 1, max: 4096, zero: None },
        show: |c| c.shm.sets.map_or("one per 4 slots".into(), |n| n.to_string()),
        set: |c, v| {
            c.shm.sets = Some(v.number());
            Ok(())
        },
        doc: "`shm_queue`: sets the queue is split into (a set is reused once all readers are done with it); at \
              most `PCOLL_SHM_SLOTS`",
    },
    Setting {
        name: "PCOLL_SHM_RING",
        accepts: Accepts::Number { min: 2, max: 1024, zero: None },
        show: |c| c.shm.ring.to_string(),
        set: |c, v| {
            if !v.number().is_power_of_two() {
                return Err("not a power of two".into());
            }
            c.shm.ring = v.number();
            Ok(())
        },
        doc: "slots per rank for small messages, used in turn, a power of two (at least 2: an algorithm may \
              hold a step open while it writes the next): a rank that no one answers (a \
              Bcast root, a Reduce or Gatherv non-root) runs up to this many calls ahead of its readers, and reads \
              their progress once in as many calls ([Small messages](node-layer.md#small-messages))",
    },
    Setting {
        name: "PCOLL_SHM_RING_BYTES",
        accepts: Accepts::Number { min: 0, max: 4096, zero: Some("a line's 48 bytes only") },
        show: |c| c.shm.ring_bytes.to_string(),
        set: |c, v| {
            c.shm.ring_bytes = v.number();
            Ok(())
        },
        doc: "messages (or a collective's steps) of up to this many bytes travel in a slot of the ring, larger \
              ones through the chunk areas, which a writer may reuse only every other step; at least 48",
    },
    Setting {
        name: "PCOLL_SHM_ROTATE",
        accepts: Accepts::Number { min: 1, max: 256, zero: None },
        show: |c| c.shm.rotate.map_or("8, fewer where the budget is small or the chunks large".into(), |r| r.to_string()),
        set: |c, v| {
            if !v.number().is_power_of_two() {
                return Err("not a power of two".into());
            }
            c.shm.rotate = Some(v.number());
            Ok(())
        },
        doc: "places each chunk area moves through, a chunk apart, from one use to the next, a power of two \
              (`1`: it stays put): a writer's stores into lines that a reader on another core still holds wait \
              for each line, and moved on, the lines have left the reader's cache by the time they come back. \
              Each place beyond the first costs two chunks per rank; by default the places are as many as fit \
              a quarter of the budget (`PCOLL_SHM_BUDGET`) ([Chunk areas that move](node-layer.md#chunk-areas-that-move))",
    },
    Setting {
        name: "PCOLL_SHM_SPREAD",
        accepts: Accepts::Number { min: 1, max: 256, zero: None },
        show: |c| {
            c.shm.spread.map_or("32, fewer where the budget is small or the chunks large".into(), |r| r.to_string())
        },
        set: |c, v| {
            if !v.number().is_power_of_two() {
                return Err("not a power of two".into());
            }
            c.shm.spread = Some(v.number());
            Ok(())
        },
        doc: "places, a chunk apart, whose bytes the steps of rooted calls back to back or on hot buffers (a \
              Reduce's non-root, a Gatherv owner; `PCOLL_SHM_BACK_TO_BACK`) move through, each by its own length \
              from one use to the next, a power of two; the chunk areas' places (`PCOLL_SHM_ROTATE`) where it is \
              fewer, and always for an Allreduce, whose writers also read each other's lines. On hot buffers, \
              lines come back sooner than in cold calls, while the reader still holds them. Each place beyond the chunk \
              areas' costs two chunks per rank; by default the places are as many as fit a quarter of the \
              budget after the queue ([Chunk areas that move](node-layer.md#chunk-areas-that-move))",
    },
    Setting {
        name: "PCOLL_SHM_TREE",
        accepts: Accepts::Word(&["flat", "chain", "kary", "knomial"]),
        show: |c| format!("{:?}", c.shm.tree).to_lowercase(),
        set: |c, v| {
            c.shm.tree = match v.word() {
                "flat" => ShmTree::Flat,
                "chain" => ShmTree::Chain,
                "knomial" => ShmTree::Knomial,
                _ => ShmTree::Kary,
            };
            Ok(())
        },
        doc: "`shm_queue`: the tree that carries fragment notifications",
    },
    Setting {
        name: "PCOLL_SHM_TREE_K",
        accepts: Accepts::Number { min: 2, max: 64, zero: None },
        show: |c| c.shm.tree_k.to_string(),
        set: |c, v| {
            c.shm.tree_k = v.number();
            Ok(())
        },
        doc: "`shm_queue`: fan-out of the `kary` and `knomial` notification trees",
    },
    Setting {
        name: "PCOLL_SHM_STREAM",
        accepts: Accepts::Number { min: 0, max: SIZE_MAX, zero: Some("never") },
        show: |c| number_text(c.shm.stream_from),
        set: |c, v| {
            c.shm.stream_from = v.number();
            Ok(())
        },
        doc: "copies into the segment of at least this many bytes (a chunk, or a `shm_queue` message) use \
              non-temporal stores, which bypass the writer's cache, except where `PCOLL_SHM_ADAPT` chooses; `0`: \
              never, and no choice ([Streaming copy-in](node-layer.md#streaming-copy-in))",
    },
    Setting {
        name: "PCOLL_SHM_STREAM_OUT",
        accepts: Accepts::Number { min: 0, max: SIZE_MAX, zero: Some("never") },
        show: |c| number_text(c.shm.stream_out_from),
        set: |c, v| {
            c.shm.stream_out_from = v.number();
            Ok(())
        },
        doc: "messages of at least this many bytes are copied into your buffers with non-temporal stores: a \
              pipeline Bcast's copies out, a Gatherv root's own block (per block; into the receive buffer of \
              its last Gatherv, taken to be hot, only from 4 MiB) \
              ([Streaming copy-out](node-layer.md#streaming-copy-out))",
    },
    Setting {
        name: "PCOLL_SHM_PREFETCH_OUT",
        accepts: Accepts::Number { min: 0, max: SIZE_MAX, zero: Some("never") },
        show: |c| {
            c.shm.prefetch_out_from.map_or_else(
                || format!("`{}` where a probe at start finds that it pays, else `0`", number_text(AHEAD_FROM)),
                number_text,
            )
        },
        set: |c, v| {
            c.shm.prefetch_out_from = Some(v.number());
            Ok(())
        },
        doc: "writes of at least this many bytes into your buffers with ordinary stores (a copy out of the \
              segment, a combination into your receive buffer) ask for the buffer's lines 2 KiB ahead of the \
              stores, in pieces of 1 KiB; whether that pays depends on the processor, which each process probes \
              unless this is set ([Prefetching ahead of stores](node-layer.md#prefetching-ahead-of-stores))",
    },
    Setting {
        name: "PCOLL_SHM_GATHERV_COPY_IN",
        accepts: Accepts::Number { min: 0, max: SIZE_MAX, zero: Some("none") },
        show: |c| number_text(c.shm.gatherv_copy_in_up_to),
        set: |c, v| {
            c.shm.gatherv_copy_in_up_to = v.number();
            Ok(())
        },
        doc: "in the node Gatherv `shm`, blocks of at most this many bytes (and at most a chunk) go through \
              their owner's area, larger ones straight into the root's buffer; `0`: every block straight",
    },
    Setting {
        name: "PCOLL_SHM_GATHERV_HOT_COPY_IN",
        accepts: Accepts::Number { min: 0, max: SIZE_MAX, zero: Some("none") },
        show: |c| number_text(c.shm.gatherv_hot_copy_in_up_to),
        set: |c, v| {
            c.shm.gatherv_hot_copy_in_up_to = v.number();
            Ok(())
        },
        doc: "in the node Gatherv `shm` with `PCOLL_SHM_ADAPT`, blocks that their owner sends again from the \
              buffer it sent its last one from (hot) of at most this many bytes (and at most a chunk area) \
              also go through their owner's area where the root has timed that faster than straight into its \
              buffer; at 2 ranks, hot blocks from 4 KiB to this many bytes (and at most the window) go \
              through the node's window where their owner did not write its last call (with or without \
              `PCOLL_SHM_ADAPT`); `0`: only those of `PCOLL_SHM_GATHERV_COPY_IN`, and no window",
    },
    Setting {
        name: "PCOLL_SHM_PIPELINE_WINDOW",
        accepts: Accepts::Number { min: 0, max: SIZE_MAX, zero: Some("none") },
        show: |c| number_text(c.shm.pipeline_window_from),
        set: |c, v| {
            c.shm.pipeline_window_from = v.number();
            Ok(())
        },
        doc: "in the node Bcast `shm_pipeline` (the rules' way below 8 KiB) at 2 ranks, messages of at least this \
              many bytes (and at most the window) that their root sends again from the buffer of its last Bcast \
              go through the node's window, as the hot Bcasts of `shm_queue_zcopy` and `shm` do, where their \
              root did not write its last call; `0`: none",
    },
    Setting {
        name: "PCOLL_SHM_BCAST_TIMED",
        accepts: Accepts::Number { min: 1, max: SIZE_MAX, zero: None },
        show: |c| number_text(c.shm.bcast_timed_from),
        set: |c, v| {
            c.shm.bcast_timed_from = v.number();
            Ok(())
        },
        doc: "the `shm` Bcast times zero copy against the pipeline from this many bytes, and against the queue \
              below, and keeps the faster per size class (with `PCOLL_SHM_ADAPT`; without it, zero copy)",
    },
    Setting {
        name: "PCOLL_SHM_BACK_TO_BACK",
        accepts: Accepts::Number { min: 0, max: 1_000_000_000, zero: Some("no call counts as back to back") },
        show: |c| c.shm.back_to_back_ns.to_string(),
        set: |c, v| {
            c.shm.back_to_back_ns = v.number() as u64;
            Ok(())
        },
        doc: "nanoseconds: a Reduce or Allreduce (a Bcast) that starts within this time of the end of the \
              same rank's last one on the communicator comes back to back; `shm_flat_binomial` hands runs of \
              hot calls that come back to back on every rank, `shm_binomial` and `shm_queue_binomial` those whose \
              root's come back to back, to the binomial tree over the host MPI \
              ([Calls back to back](node-layer.md#calls-back-to-back)); `shm_flat_zcopy`'s runs of calls back \
              to back (or on their last buffers) on every rank, and a Gatherv owner's, spread their steps \
              through the chunk areas ([Chunk areas that move](node-layer.md#chunk-areas-that-move))",
    },
];

/// The setting named `name`.
pub fn find(name: &str) -> Option<&'static Setting> {
    SETTINGS.iter().find(|s| s.name == name)
}

/// Where `name` is in [`SETTINGS`].
pub fn index(name: &str) -> usize {
    SETTINGS.iter().position(|s| s.name == name).expect("a known setting")
}

/// The settings most users need: README.md's table.
pub const COMMON: &[&str] = &[
    "PCOLL_ENABLE",
    "PCOLL_ALLREDUCE",
    "PCOLL_REDUCE",
    "PCOLL_BCAST",
    "PCOLL_GATHERV",
    "PCOLL_TUNE_FILE",
    "PCOLL_LOG",
    "PCOLL_STATS",
    "PCOLL_STATS_FILE",
    "PCOLL_VERIFY",
    "PCOLL_REPRODUCIBLE",
    "PCOLL_SHM_ZCOPY",
    "PCOLL_SHM_BUDGET",
];

/// The reference table of the settings `names` (all if `None`), in
/// Markdown.
pub fn markdown_table(names: Option<&[&str]>) -> String {
    let default = Config::default();
    let mut out = String::from("| variable | default | accepted values | meaning |\n|---|---|---|---|\n");
    for s in SETTINGS.iter().filter(|s| names.is_none_or(|names| names.contains(&s.name))) {
        let shown = (s.show)(&default);
        let shown = if shown.contains('`') || shown.contains(' ') { shown } else { format!("`{shown}`") };
        out += &format!("| `{}` | {shown} | {} | {} |\n", s.name, s.accepts.markdown(), s.doc);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::select::config::SETUP_AFTER;

    #[test]
    fn numbers_are_spelt_in_the_largest_unit_that_divides_them() {
        assert_eq!(
            [0, 1, 4096, 65536, 1 << 20, 1 << 30, 1 << 40, 1536].map(number_text),
            ["0", "1", "4K", "64K", "1M", "1G", "1024G", "1536"]
        );
    }

    #[test]
    fn names_are_unique_and_every_default_parses_back_to_itself() {
        let default = Config::default();
        for (i, s) in SETTINGS.iter().enumerate() {
            assert_eq!(index(s.name), i, "{} twice", s.name);
            let shown = (s.show)(&default);
            // text settings are unset by default, which no text says
            if let (false, Some(value)) = (matches!(s.accepts, Accepts::Text(_)), s.accepts.parse(&shown)) {
                let mut cfg = Config::default();
                (s.set)(&mut cfg, value).unwrap();
                assert_eq!(format!("{cfg:?}"), format!("{default:?}"), "{}={shown}", s.name);
            }
        }
        assert_eq!(SETUP_AFTER.to_string(), (find("PCOLL_SETUP_AFTER").unwrap().show)(&default));
        assert!(COMMON.iter().all(|name| find(name).is_some()));
    }
}
