//! Collectives, element representations and reduction operators, as pcoll
//! sees them after the ABI layer has classified the MPI handles.

use std::fmt;

/// The four collectives pcoll implements.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Coll {
    Allreduce,
    Reduce,
    Bcast,
    Gatherv,
}

impl Coll {
    pub const ALL: [Coll; 4] = [Coll::Allreduce, Coll::Reduce, Coll::Bcast, Coll::Gatherv];

    /// Lower-case name used in logs, statistics and the `pcoll` tool.
    pub fn name(self) -> &'static str {
        match self {
            Coll::Allreduce => "allreduce",
            Coll::Reduce => "reduce",
            Coll::Bcast => "bcast",
            Coll::Gatherv => "gatherv",
        }
    }

    /// The environment variable that forces this collective's algorithm.
    pub fn env_var(self) -> &'static str {
        match self {
            Coll::Allreduce => "PCOLL_ALLREDUCE",
            Coll::Reduce => "PCOLL_REDUCE",
            Coll::Bcast => "PCOLL_BCAST",
            Coll::Gatherv => "PCOLL_GATHERV",
        }
    }

    pub fn index(self) -> usize {
        self as usize
    }

    /// Reduce and Allreduce.
    pub fn is_reduction(self) -> bool {
        matches!(self, Coll::Allreduce | Coll::Reduce)
    }
}

impl fmt::Display for Coll {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Machine representation of one element of a predefined MPI datatype.
/// `Bool` is C's `_Bool` (one byte, 0 or 1). The pair types are the C
/// structs of MPI_MINLOC/MPI_MAXLOC, with their padding (size = extent).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Elem {
    I8,
    U8,
    I16,
    U16,
    I32,
    U32,
    I64,
    U64,
    F32,
    F64,
    Bool,
    /// Two f32: C `float _Complex`.
    C32,
    /// Two f64: C `double _Complex`.
    C64,
    /// `struct { float v; int i; }` (MPI_FLOAT_INT).
    F32I32,
    /// `struct { double v; int i; }` (MPI_DOUBLE_INT), 16 bytes.
    F64I32,
    /// `struct { long v; int i; }` (MPI_LONG_INT), 16 bytes.
    I64I32,
    /// `struct { int v; int i; }` (MPI_2INT).
    I32I32,
    /// `struct { short v; int i; }` (MPI_SHORT_INT), 8 bytes.
    I16I32,
}

impl Elem {
    /// Bytes per element including padding (the MPI extent).
    pub fn extent(self) -> usize {
        match self {
            Elem::I8 | Elem::U8 | Elem::Bool => 1,
            Elem::I16 | Elem::U16 => 2,
            Elem::I32 | Elem::U32 | Elem::F32 => 4,
            Elem::I64 | Elem::U64 | Elem::F64 | Elem::C32 => 8,
            Elem::C64 => 16,
            Elem::F32I32 | Elem::I32I32 | Elem::I16I32 => 8,
            Elem::F64I32 | Elem::I64I32 => 16,
        }
    }
}

/// The predefined reduction operators pcoll has native kernels for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ReduceOp {
    Max,
    Min,
    Sum,
    Prod,
    Land,
    Band,
    Lor,
    Bor,
    Lxor,
    Bxor,
    MinLoc,
    MaxLoc,
}

/// The MPI standard's datatype groups (MPI-4.1 section 6.9.2), which decide
/// which operators are valid for a datatype.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TypeClass {
    CInteger,
    /// MPI_INTEGER, MPI_INTEGERn: as C integers, without the logical operators.
    FortranInteger,
    /// MPI_AINT, MPI_OFFSET, MPI_COUNT.
    MultiLanguage,
    Floating,
    Logical,
    Complex,
    Byte,
    Pair,
}

impl ReduceOp {
    /// Whether the MPI standard defines this operator on this datatype group.
    /// Combinations it does not define go to the host MPI, so the user sees
    /// the host's own behaviour (usually an error).
    pub fn valid_for(self, class: TypeClass) -> bool {
        use TypeClass::*;
        match self {
            ReduceOp::Max | ReduceOp::Min => matches!(class, CInteger | FortranInteger | MultiLanguage | Floating),
            ReduceOp::Sum | ReduceOp::Prod => {
                matches!(class, CInteger | FortranInteger | MultiLanguage | Floating | Complex)
            }
            ReduceOp::Land | ReduceOp::Lor | ReduceOp::Lxor => matches!(class, CInteger | Logical),
            ReduceOp::Band | ReduceOp::Bor | ReduceOp::Bxor => {
                matches!(class, CInteger | FortranInteger | MultiLanguage | Byte)
            }
            ReduceOp::MinLoc | ReduceOp::MaxLoc => class == Pair,
        }
    }
}
