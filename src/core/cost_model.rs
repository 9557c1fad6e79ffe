//! The cost model's parameters: an alpha-beta-gamma model of a network
//! and of local work, with an overhead per message and an eager limit.
//! Pure data, its text form (`key=value,...`) and typical values; the
//! simulator prices schedules with it, and the library's calibration
//! (PCOLL_CALIBRATE=1) fits it to timings.

use std::fmt;

/// Parameters of the model, in seconds.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CostModel {
    /// Latency per message.
    pub alpha: f64,
    /// Software overhead per message at each end (holds the ports).
    pub overhead: f64,
    /// Transfer time per byte (inverse link bandwidth).
    pub beta: f64,
    /// Reduction time per byte combined.
    pub gamma: f64,
    /// Local copy time per byte.
    pub delta: f64,
    /// Messages up to this many bytes go eagerly (without waiting for the
    /// receive to be posted).
    pub eager: usize,
}

impl CostModel {
    /// Typical of an InfiniBand cluster of 2020: 1.5 us latency, 0.3 us of
    /// software per message, 12 GB/s links, 4 GB/s reductions, 10 GB/s
    /// copies.
    pub const CLUSTER: CostModel = CostModel {
        alpha: 1.5e-6,
        overhead: 0.3e-6,
        beta: 1.0 / 12e9,
        gamma: 1.0 / 4e9,
        delta: 1.0 / 10e9,
        eager: 16384,
    };

    /// Only bytes on the wire count: the price is the critical-path bytes.
    pub const BANDWIDTH: CostModel =
        CostModel { alpha: 0.0, overhead: 0.0, beta: 1.0, gamma: 0.0, delta: 0.0, eager: 0 };
}

impl CostModel {
    /// Parses `key=value,...` over this model's values (alpha and overhead
    /// in seconds per message, beta, gamma and delta in seconds per byte,
    /// eager in bytes), the form
    /// [`fmt::Display`] prints and calibration reports.
    pub fn with(mut self, text: &str) -> Result<CostModel, String> {
        for item in text.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            let (key, value) = item.split_once('=').ok_or_else(|| format!("{item:?} is not key=value"))?;
            let number: f64 = value.trim().parse().map_err(|_| format!("{key}={value:?} is not a number"))?;
            if !(number.is_finite() && number >= 0.0) {
                return Err(format!("{key}={value} is not a finite number >= 0"));
            }
            match key.trim() {
                "alpha" => self.alpha = number,
                "overhead" => self.overhead = number,
                "beta" => self.beta = number,
                "gamma" => self.gamma = number,
                "delta" => self.delta = number,
                "eager" => self.eager = number as usize,
                other => {
                    return Err(format!("no model parameter {other:?} (alpha, overhead, beta, gamma, delta, eager)"))
                }
            }
        }
        Ok(self)
    }
}

impl fmt::Display for CostModel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "alpha={:.3e},overhead={:.3e},beta={:.3e},gamma={:.3e},delta={:.3e},eager={}",
            self.alpha, self.overhead, self.beta, self.gamma, self.delta, self.eager
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_what_it_prints() {
        let m = CostModel::CLUSTER.with("alpha=2e-6, eager=0").unwrap();
        assert_eq!((m.alpha, m.eager, m.beta), (2e-6, 0, CostModel::CLUSTER.beta));
        assert_eq!(CostModel::CLUSTER.with(&m.to_string()).unwrap().to_string(), m.to_string());
        for bad in ["alpha", "alpha=x", "alpha=-1", "tau=1"] {
            assert!(CostModel::CLUSTER.with(bad).is_err(), "{bad}");
        }
    }
}
