"""What an evidence conditions on: a digest of a model's observed data and its size.

log p(y | model) is a number about one data set y: evidences over different data are not
comparable, and their difference is no Bayes factor. Every evidence result records the
:class:`ObservedData` it conditions on, and :func:`ppl_hais.compare_evidence` refuses results
whose records differ (``arviz.compare`` refuses different numbers of observations the same
way).

The digest reads the observed values only: not the names of the sites that hold them (a PyMC
``"y"`` and a NumPyro ``"obs"`` over the same values agree), not their order among sites, not
their shapes (``y`` and ``y[:, None]`` agree), and not their dtypes: each site's values are
hashed as float32 (integers up to 2²⁴ exactly, floats to about 7 digits), so data kept in
float32 by one library (PyMC's ``floatX``) and in float64 by another agree. Covariates are
not observations: models over different predictors of the same ``y`` compare.

Example
-------
>>> import numpy as np
>>> from ppl_hais.model.observed import observed_data
>>> a = observed_data({"y": np.arange(4.0)})
>>> a.size, a == observed_data({"obs": np.arange(4)[:, None]})
(4, True)
>>> a == observed_data({"y": np.arange(3.0)})
False
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np

__all__ = ["ObservedData", "observed_data", "from_attrs", "differences"]


@dataclass(frozen=True)
class ObservedData:
    """The observations an evidence conditions on: ``digest`` (16 hex digits of SHA-256 over
    the sites' values), ``size`` (how many values), ``sites`` ((name, shape) of each observed
    site, for messages only: two records are equal when digest and size are)."""

    digest: str
    size: int
    sites: tuple[tuple[str, tuple[int, ...]], ...] = field(default=(), compare=False)

    def describe(self) -> str:
        """``"50 observed values (y: (50,); digest 3f2a…)"``."""
        sites = ", ".join(f"{n}: {tuple(s)}" for n, s in self.sites)
        return f"{self.size} observed values ({sites + '; ' if sites else ''}digest {self.digest})"

    def attrs(self) -> dict:
        """ArviZ attributes (``observed_digest``, ``observed_size``, ``observed_sites``)."""
        return {"observed_digest": self.digest, "observed_size": int(self.size),
                "observed_sites": ", ".join(f"{n}{list(s)}" for n, s in self.sites)}  # fmt: skip


def _site_digest(values) -> str:
    x = np.asarray(values)
    if x.dtype.kind not in "biuf":  # strings, objects: hashed by their text
        return hashlib.sha256(repr(x.ravel().tolist()).encode()).hexdigest()
    flat = np.ascontiguousarray(x.astype(np.float64).astype(np.float32).ravel())
    return hashlib.sha256(flat.tobytes()).hexdigest()


def observed_data(sites: Mapping[str, object]) -> ObservedData:
    """The record of ``{site name: observed values}`` (NumPy or JAX arrays, or scalars)."""
    arrays = {str(n): np.asarray(v) for n, v in sites.items() if v is not None}
    digests = sorted(_site_digest(v) for v in arrays.values())
    digest = hashlib.sha256("".join(digests).encode()).hexdigest()[:16]
    return ObservedData(digest, int(sum(v.size for v in arrays.values())),
                        tuple((n, tuple(int(d) for d in v.shape))
                              for n, v in sorted(arrays.items())))  # fmt: skip


def from_attrs(attrs: Mapping) -> ObservedData | None:
    """The record an ArviZ group's attributes hold (:meth:`ObservedData.attrs`), or None."""
    if "observed_digest" not in attrs:
        return None
    sites = []
    for part in str(attrs.get("observed_sites", "")).split(", "):
        if "[" in part:
            name, shape = part.split("[", 1)
            dims = [d for d in shape.rstrip("]").split(",") if d.strip()]
            sites.append((name, tuple(int(d) for d in dims)))
    return ObservedData(str(attrs["observed_digest"]), int(attrs["observed_size"]), tuple(sites))


def differences(records: Mapping[str, ObservedData | None]) -> str | None:
    """Why the named results cannot be compared (their observed data differ), or None. Results
    without a record (a user's ``AnnealingTarget``, a ``(log_z, se)`` pair) are not judged."""
    known = {n: r for n, r in records.items() if r is not None}
    groups: dict[ObservedData, list[str]] = {}
    for name, record in known.items():
        groups.setdefault(record, []).append(name)
    if len(groups) < 2:
        return None
    lines = [f"  {', '.join(map(repr, names))}: {record.describe()}"
             for record, names in groups.items()]
    sizes = {r.size for r in groups}
    how = ("different numbers of observations" if len(sizes) > 1
           else "the same number of observations with different values")  # fmt: skip
    return (
        f"these evidences condition on different observed data ({how}):\n" + "\n".join(lines)
        + "\nlog p(y | model) is a number about one data set: over different data the "
        "difference of two evidences is no Bayes factor. Fit every model to the same "
        "observations (covariates may differ); where the same data are held differently "
        "(split over several observed sites in one model, one site in another), pass "
        "require_same_data=False."
    )
