"""Every model's evidence on many data sets of one design, estimated side by side.

Data sets of one design give each model the same target structure over different arrays, so
every estimate runs the same compiled anneals. :func:`estimate_all` runs ``batch_size``
estimates at once, each in a worker thread of one :class:`~ppl_hais.annealing.batching.Batch`:
their pilots, main runs and reverse anneals run as vmapped calls over the data sets
(:mod:`ppl_hais.annealing.batching`), while each estimate makes its own choices (its start,
its tuning, its checks) from its own data and key, as a call on its own would. Which estimates
share a call depends only on the order of the work, so a calibration's figures do not depend
on the threads' timing: the same key and ``batch_size`` give the same figures. Another
``batch_size`` changes them by floating-point rounding, which now and then tips one of the
ladder's thresholds the other way (another valid estimate, as from another key).

Example
-------
>>> import jax, numpy as np
>>> from ppl_hais.workflow.datasets import estimate_all
>>> fits = {"M": lambda key, data: (float(data["y"].sum()), 0.0, "", 0)}
>>> out = estimate_all(jax.random.key(0), ["M"], {"y": np.ones((3, 2))}, fits,
...                    progress_bar=False)
>>> out.log_z[:, 0].tolist()
[2.0, 2.0, 2.0]
"""

from __future__ import annotations

import threading
import warnings
from concurrent.futures import ThreadPoolExecutor
from typing import NamedTuple

import jax
import numpy as np
from tqdm.auto import tqdm

from ..annealing.batching import Batch
from ..annealing.execution import cpu_threads
from ..checks.record import EvidenceWarning, names
from ..mcmc.fast_random import host_fold_in
from ..runtime.precision import in_thread

__all__ = ["BATCH_SIZE", "Estimates", "estimate_all", "evidence_record"]

BATCH_SIZE = 16  # estimates run side by side by default


class Estimates(NamedTuple):
    """Each (data set, model)'s estimate: arrays of shape (data sets, models)."""

    log_z: np.ndarray
    log_z_se: np.ndarray
    checks: np.ndarray  # the failed checks' names, comma-separated ("" where none failed)
    gradients: np.ndarray


def evidence_record(ev) -> tuple[float, float, str, int]:
    """(log Z, SE, the failed checks' names comma-separated, gradients) of an
    :class:`~ppl_hais.workflow.evidence.Evidence`: what :func:`estimate_all` keeps of it."""
    return float(ev.log_z), float(ev.log_z_se), ",".join(names(ev.checks)), int(ev.gradients)


def estimate_all(rng_key, models, datasets, fits, *, batch_size: int = BATCH_SIZE,
                 progress_bar: bool = True) -> Estimates:  # fmt: skip
    """Every model's estimate on every data set: ``fits[name](key, data)`` returns
    :func:`evidence_record`'s tuple for one data set (``{site: values}``, row ``d`` of
    ``datasets``), from the key ``fold_in(rng_key, d · M + m)``. ``batch_size`` estimates run
    side by side (1: one after another). An estimate that fails with a ``ValueError``,
    ``FloatingPointError`` or ``LinAlgError`` is kept as NaN ± inf, its error in ``checks``.
    The estimates' ``EvidenceWarning``\\ s are kept in ``checks``, not raised."""
    if not isinstance(batch_size, (int, np.integer)) or batch_size < 1:
        raise ValueError(f"batch_size must be a whole number >= 1 (data sets estimated side "
                         f"by side), got {batch_size!r}")  # fmt: skip
    num = len(next(iter(datasets.values())))
    shape = (num, len(models))
    out = Estimates(np.zeros(shape), np.zeros(shape), np.full(shape, "", dtype=object),
                    np.zeros(shape))  # fmt: skip
    # model after model: the estimates that run side by side are mostly of one model
    jobs = [(d, m) for m in range(shape[1]) for d in range(num)]
    workers = max(1, min(int(batch_size), len(jobs)))
    # on CPU a few calls at once fill the cores; an accelerator runs one call at a time
    threads = cpu_threads() if jax.default_backend() == "cpu" else 1
    batch, stop = Batch(workers, threads=threads), threading.Event()

    def one(d, m):
        key = host_fold_in(rng_key, d * shape[1] + m)
        data = {k: v[d] for k, v in datasets.items()}
        try:
            record = fits[models[m]](key, data)
        except (ValueError, FloatingPointError, np.linalg.LinAlgError) as err:
            # kept as a failed estimate, never dropped: its data set counts as warned
            record = np.nan, np.inf, f"failed ({err})", 0
        out.log_z[d, m], out.log_z_se[d, m], out.checks[d, m], out.gradients[d, m] = record

    def work(w, bar):
        with batch.member():
            for d, m in jobs[w::workers]:
                if stop.is_set():
                    return
                one(d, m)
                bar.update(1)

    with (tqdm(total=len(jobs), desc="calibration", disable=not progress_bar) as bar,
          warnings.catch_warnings()):  # fmt: skip
        warnings.simplefilter("ignore", EvidenceWarning)  # kept in checks instead
        pool = ThreadPoolExecutor(workers)
        futures = [pool.submit(in_thread(work), w, bar) for w in range(workers)]
        try:
            for f in futures:
                f.result()
        finally:
            stop.set()  # an error or Ctrl-C: the others stop after their current estimate
            pool.shutdown(wait=True)
    return out
