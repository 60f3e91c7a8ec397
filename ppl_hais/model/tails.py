"""Heavy-tailed starts: independent Student-t marginals along the Laplace fit's axes, each with
the tail index the target shows along that axis.

A Gaussian start cannot anneal into tails heavier than its own: the particles' reach grows
only slowly with the number of temperatures, and the mass beyond it is missing from the
estimate (the 36-D Student-t experts stayed 0.3–0.7 nat low from a
Gaussian start at every budget). A multivariate Student-t is heavy in every direction at once,
which a posterior whose heavy directions are independent of each other is not. So the tails are
read off the target itself: along each principal axis v_i of the Laplace covariance (standard
deviation σ_i), the log density at 10 σ_i and 100 σ_i from the mode falls by (ν_i + 1)·log 10
for a Student-t with ν_i degrees of freedom, and by far more for a Gaussian. A tail counts only
where it carries mass: where the density 10 σ_i out is within ``TAIL_DROP`` nats of the mode's
(a Student-t's with ν ≤ 10 is; a Gaussian's is 50 nats down, and so is a bulk that is Gaussian
for 10 σ before a prior's exponential tail takes over). Each axis gets a Student-t with that
ν_i (at least ``DF_FLOOR``, at most ``DF_CAP``) and the Laplace curvature at the mode, widened
by 1.2 as the Laplace start is. The probe costs 4 D + 1 density evaluations.

The same reading says which other starts cannot be right: importance weights p/q have a finite
variance along an axis only where q's tail index is below twice p's (tails |x|^−(ν+1)), so a
Gaussian start on a target with Student-t tails gives weights of infinite variance however
its pilot's ESS looks (:func:`too_light`).

Example
-------
>>> import jax, jax.numpy as jnp, numpy as np, ppl_hais as ph
>>> from ppl_hais.model.tails import read_tails, tail_start, too_light
>>> cauchy = lambda z: -jnp.sum(jnp.log1p(z * z))  # 2-D, independent Cauchy coordinates
>>> reading = read_tails(cauchy, ph.Gaussian(jnp.zeros(2), np.sqrt(0.5)), scale_inflation=1.0)
>>> [round(float(v), 1) for v in tail_start(reading, scale_inflation=1.0).df]  # ν per axis
[1.0, 1.0]
>>> too_light(ph.Gaussian(jnp.zeros(2), 1.0).log_prob, reading)
True
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from ..runtime.structure import compile_once
from .target import Gaussian, lift, register_pytree, sample_shape_of

__all__ = ["IndependentStudentT", "TailReading", "read_tails", "tail_start", "too_light"]

RADII = (10.0, 100.0)  # Laplace standard deviations from the mode where the tails are read
DF_FLOOR = 0.5  # the heaviest tail offered: a χ² draw with fewer degrees of freedom underflows
DF_CAP = 30.0  # lighter tails than this are read as a Gaussian's
HEAVY_BELOW = 10.0  # a start is built where some axis's tail index is below this
TAIL_DROP = 15.0  # nats below the mode at 10 σ beyond which a tail carries no mass that matters


@dataclass(frozen=True, eq=False)
class IndependentStudentT:
    """Independent Student-t marginals along the columns of an orthogonal ``basis``: the
    initial distribution of x = mean + basis · (scale ⊙ t), t_i ~ Student-t(df_i). With the
    identity basis it is NumPyro's ``StudentT(df, mean, scale).to_event(1)``. Sampled exactly.

    Parameters
    ----------
    mean : array (D,)
    scale : array (D,) or float
        The marginals' scales, along the basis's columns.
    df : array (D,) or float
        Degrees of freedom, one per column.
    basis : array (D, D), optional
        Orthonormal columns (default: the coordinate axes).

    Examples
    --------
    >>> import jax, jax.numpy as jnp, ppl_hais as ph
    >>> q = ph.IndependentStudentT(jnp.zeros(3), 2.0, df=[1.0, 3.0, 30.0])
    >>> q.sample(jax.random.key(0), (5,)).shape
    (5, 3)
    """

    mean: Any
    scale: Any = 1.0
    df: Any = 4.0
    basis: Any = None

    def __post_init__(self):
        mean = np.atleast_1d(np.asarray(self.mean, dtype=float))
        scale = np.broadcast_to(np.asarray(self.scale, dtype=float), mean.shape).copy()
        df = np.broadcast_to(np.asarray(self.df, dtype=float), mean.shape).copy()
        if not (np.all(scale > 0) and np.all(np.isfinite(scale))):
            raise ValueError("IndependentStudentT's scale must be positive and finite")
        if not np.all(df > 0):
            raise ValueError(f"IndependentStudentT needs df > 0, got {self.df!r}")
        basis = None if self.basis is None else np.asarray(self.basis, dtype=float)
        if basis is not None and (
            basis.shape != (mean.size, mean.size)
            or not np.allclose(basis.T @ basis, np.eye(mean.size), atol=1e-8)
        ):
            raise ValueError(f"basis must be a {mean.size}×{mean.size} orthogonal matrix")
        for name, value in (("mean", mean), ("scale", scale), ("df", df), ("basis", basis)):
            object.__setattr__(self, name, value)

    @property
    def dim(self) -> int:
        return int(self.mean.size)

    def sample(self, rng_key, sample_shape=()):
        """Draws of shape ``sample_shape + (D,)`` (NumPyro's protocol)."""
        shape = sample_shape_of(sample_shape) + (self.dim,)
        key_z, key_g = jax.random.split(rng_key)
        dtype = jnp.result_type(float)
        df = lift(self.df, len(shape))
        chi2 = 2.0 * jax.random.gamma(key_g, 0.5 * df, shape, dtype=dtype)
        t = jax.random.normal(key_z, shape, dtype=dtype) * jnp.sqrt(df / chi2)
        t = t * lift(self.scale, len(shape))
        return lift(self.mean, len(shape)) + (t if self.basis is None else t @ self.basis.T)

    def log_prob(self, z):
        """Normalized log density of z (..., D) over its last axis."""
        z = jnp.asarray(z)
        d = z - lift(self.mean, z.ndim)
        w = (d if self.basis is None else d @ self.basis) / lift(self.scale, z.ndim)
        df = lift(self.df, z.ndim)
        gammaln = jax.scipy.special.gammaln
        per_axis = (
            gammaln(0.5 * (df + 1.0)) - gammaln(0.5 * df) - 0.5 * jnp.log(df * math.pi)
            - jnp.log(lift(self.scale, z.ndim)) - 0.5 * (df + 1.0) * jnp.log1p(w * w / df)
        )  # fmt: skip
        return jnp.sum(per_axis, axis=-1)


register_pytree(IndependentStudentT, ("mean", "scale", "df", "basis"))


@compile_once
def _densities(log_density, points):
    return jax.vmap(log_density)(points)


def _axes(gaussian: Gaussian, scale_inflation: float):
    """(basis, σ): the principal axes and standard deviations of a Laplace Gaussian, its
    widening undone. A diagonal covariance keeps the coordinate axes (eigh's basis within a
    repeated eigenvalue is arbitrary, and independent coordinates are the likely reason)."""
    if gaussian.scale_tril is None:
        sd = np.asarray(gaussian.scale, dtype=float) / scale_inflation
        return np.eye(sd.size), sd
    tril = np.asarray(gaussian.scale_tril, dtype=float) / scale_inflation
    cov = tril @ tril.T
    if not np.any(cov - np.diag(np.diag(cov))):
        return np.eye(cov.shape[0]), np.sqrt(np.diag(cov))
    var, basis = np.linalg.eigh(cov)
    return basis, np.sqrt(var)


class TailReading(NamedTuple):
    """A target's tails along the Laplace fit's axes: the mode, the axes (columns), the
    Laplace standard deviations along them (unwidened) and the tail index read on each."""

    mean: Any
    basis: Any
    sd: Any
    df: Any


def tail_indices(log_density, mean, basis, sd):
    """The Student-t degrees of freedom the tails of ``log_density`` show along each column
    of ``basis`` from ``mean`` (heavier side), read at ``RADII`` standard deviations ``sd``,
    within [``DF_FLOOR``, ``DF_CAP``]; a side whose density is not finite there, or more than
    ``TAIL_DROP`` below the mode's at the nearer radius, reads as light."""
    mean, basis, sd = (np.asarray(a, dtype=float) for a in (mean, basis, sd))
    steps = (basis * sd).T  # row i: σ_i v_i
    points = np.stack([mean + s * r * steps for s in (1.0, -1.0) for r in RADII])
    points = np.concatenate([mean[None], points.reshape(-1, mean.size)])
    f = np.asarray(_densities(log_density, points), dtype=float)
    at_mode, f = f[0], f[1:].reshape(2, len(RADII), mean.size)
    with np.errstate(invalid="ignore"):
        slope = (f[:, 0] - f[:, 1]) / math.log(RADII[1] / RADII[0])  # ν + 1, per side
        slope = np.where((at_mode - f[:, 0] < TAIL_DROP) & np.isfinite(slope), slope, np.inf)
    slope = slope.min(axis=0)
    return np.clip(slope - 1.0, DF_FLOOR, DF_CAP)


def read_tails(log_density, gaussian: Gaussian, scale_inflation: float = 1.2) -> TailReading:
    """The tails of ``log_density`` along the axes of its Laplace ``gaussian`` (widened by
    ``scale_inflation``): 4 D evaluations of the density."""
    basis, sd = _axes(gaussian, scale_inflation)
    return TailReading(gaussian.mean, basis, sd, tail_indices(log_density, gaussian.mean,
                                                              basis, sd))


def tail_start(reading: TailReading, scale_inflation: float = 1.2) -> IndependentStudentT:
    """The :class:`IndependentStudentT` start of a reading: its axes, each with the tail index
    read there and the Laplace curvature at the mode, (ν + 1)/(ν s²) = 1/σ², widened."""
    df = reading.df
    scale = reading.sd * np.sqrt((df + 1.0) / df) * scale_inflation
    basis = reading.basis
    axes = None if np.array_equal(basis, np.eye(basis.shape[0])) else basis
    return IndependentStudentT(reading.mean, scale, df, axes)


def has_heavy_tails(reading: TailReading) -> bool:
    """Whether some axis reads heavier than ``HEAVY_BELOW``: where a tail start pays."""
    return bool(np.min(reading.df) < HEAVY_BELOW)


def too_light(log_prob, reading: TailReading) -> bool:
    """Whether a start (its normalized ``log_prob``) has tails too light for the importance
    weights to have a finite variance along some heavy axis of ``reading``: its own index
    there at least twice the target's."""
    own = tail_indices(log_prob, reading.mean, reading.basis, reading.sd)
    heavy = reading.df < HEAVY_BELOW
    return bool(np.any(heavy & (own >= 2.0 * reading.df)))
